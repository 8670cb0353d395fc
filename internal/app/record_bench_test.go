package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/store"
)

// The shape of BenchmarkRecordGrowth's generations: each tool turn calls
// echo once with a text of recordTextBytes, and a text turn answers
// recordAnswer.
const (
	recordTextBytes = 8 << 10
	recordAnswer    = "All the echoes came back."
)

// recordTurns are the tool turns of BenchmarkRecordGrowth's generations,
// by model: the script at three lengths, a real provider's codec at the
// shortest and the longest.
var recordTurns = []struct {
	model string
	turns []int
}{
	{"script", []int{10, 40, 160}},
	{"openai", []int{10, 160}},
}

// BenchmarkRecordGrowth measures what the durable record of one long
// generation costs, on each store, against what the generation says: an
// agentd served as `agentd serve` serves it (in-memory listener,
// interceptors, embedded bridge) with a Go stdio MCP server (mcptest.Tools,
// registered shared) runs generations of N tool turns, each calling echo
// with an 8 KiB text, then a text turn. Each operation is one generation,
// a Generate stream to its end. It reports, per generation and per tool
// turn, the bytes the store wrote (storeWrites says how each store's are
// counted), the generation's content (the calls' arguments, the tools'
// results and the model's text, as the client received them) and the
// ratio written/content (target: at most 4 at every N); the store's
// Checkpoint calls (a checkpoint queued while another is being written
// replaces it, so their number, and the bytes, vary with timing); and
// this process's CPU time per tool turn, user and system: agentd, the
// client and, for openai, the fake model (the MCP server is a process of
// its own, and so is PostgreSQL). The ratio of the CPU per turn at 160
// turns to that at 10 (target: at most 2) is scripts/bench-ratios.sh's.
//
// "script" is the script provider: a turn costs agentd nothing but the
// tool loop and the record. "openai" is the Chat Completions codec against
// a fake streaming model in this process: each request encodes the whole
// conversation, a cost that grows with the conversation whatever the
// record does.
func BenchmarkRecordGrowth(b *testing.B) {
	exe, env := mcptest.Command(b, mcptest.Tools)
	text := recordText()
	for _, driver := range benchStores {
		b.Run(driver, func(b *testing.B) {
			for _, arm := range recordTurns {
				for _, n := range arm.turns {
					b.Run(fmt.Sprintf("%s/turns=%d", arm.model, n), func(b *testing.B) {
						cfg := benchStoreConfig(b, driver)
						cfg.Bridge.TerminateGrace = benchGrace
						cfg.Bridge.Servers = map[string]config.Server{"tools": {Command: exe, Env: env, Shared: config.SharedGlobal}}
						if arm.model == "openai" {
							cfg.Providers = map[string]config.Provider{"openai": {APIKey: "bench-key", BaseURL: recordModelURL(b, text, n)}}
						}
						recordGrowth(b, cfg, recordRequest(b, arm.model, n, text), n)
					})
				}
			}
		})
	}
}

// recordGrowth serves agentd with cfg and measures generations of start,
// each of turns tool turns, as BenchmarkRecordGrowth reports them.
func recordGrowth(b *testing.B, cfg config.Config, start *agentdv1.GenerateRequest, turns int) {
	timed := &timedGenerations{}
	o := app.WithGenerations(app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)},
		func(g store.Generations) store.Generations { timed.Generations = g; return timed })
	conn, _ := apptest.Serve(b, o)
	client := agentdv1.NewAgentServiceClient(conn)
	// Connect, start the server's process, fill the schema cache.
	toolGeneration(b, client, recordRequest(b, "script", 1, "warm-up"), 1)
	timed.reset()
	writes := storeWrites(b, cfg)
	runtime.GC() // the set-up's garbage is not the generations'
	before, cpu0 := writes(), cpuTime(b)
	var content int64
	for b.Loop() {
		content += toolGeneration(b, client, start, turns)
	}
	cpu, after := cpuTime(b)-cpu0, writes()
	written := after["written"] - before["written"]
	if written == 0 {
		b.Fatalf("the store wrote nothing that was counted: is %s on a file system that counts no writes (tmpfs)? Point TMPDIR at a disk", cfg.StateDir)
	}
	gens, allTurns := float64(b.N), float64(b.N*turns)
	b.ReportMetric(float64(written)/gens/(1<<20), "written-MiB/gen")
	b.ReportMetric(float64(written)/allTurns/(1<<10), "written-KiB/turn")
	b.ReportMetric(float64(content)/allTurns/(1<<10), "content-KiB/turn")
	b.ReportMetric(float64(written)/float64(content), "written/content")
	b.ReportMetric(float64(cpu)/allTurns/float64(time.Millisecond), "cpu-ms/turn")
	b.ReportMetric(float64(timed.count("checkpoint"))/gens, "checkpoints/gen")
	b.ReportMetric(float64(timed.count("append"))/gens, "appends/gen")
	b.ReportMetric(float64(timed.written())/float64(content), "given/content")
	for name, v := range after {
		if name != "written" {
			b.ReportMetric(float64(v-before[name])/gens/(1<<20), name+"-MiB/gen")
		}
	}
}

// storeWrites returns a function that reads how many bytes cfg's store has
// written so far, as "written" and the counts it is the sum of or stands
// beside. On SQLite, which runs in this process: its write_bytes
// (/proc/self/io), what this process sent to the block layer ("written"),
// and its wchar, what it passed to write calls ("syswrite": a check on the
// page cache's accounting, with the MCP server's requests in it). On
// PostgreSQL, through the store's DSN: the WAL the server generated
// ("wal", from pg_current_wal_lsn) plus the database's growth
// ("relgrowth", pg_database_size).
func storeWrites(b *testing.B, cfg config.Config) func() map[string]int64 {
	if cfg.Store.Driver != config.StorePostgres {
		return func() map[string]int64 {
			counters := procIO(b)
			return map[string]int64{"written": counters["write_bytes"], "syswrite": counters["wchar"]}
		}
	}
	conn, err := pgx.Connect(b.Context(), cfg.Store.DSN)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close(context.Background()) })
	return func() map[string]int64 {
		var wal, size int64
		if err := conn.QueryRow(context.Background(),
			`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, pg_database_size(current_database())`).Scan(&wal, &size); err != nil {
			b.Fatal(err)
		}
		return map[string]int64{"written": wal + size, "wal": wal, "relgrowth": size}
	}
}

// count is how many calls of method t has timed.
func (t *timedGenerations) count(method string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.calls[method])
}

// procIO is this process's I/O counters, /proc/self/io, by name.
func procIO(b *testing.B) map[string]int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Fatalf("the store's writes are counted from /proc/self/io (Linux): %v", err)
	}
	counters := make(map[string]int64)
	for line := range strings.Lines(string(data)) {
		name, value, _ := strings.Cut(strings.TrimSpace(line), ": ")
		if n, err := strconv.ParseInt(value, 10, 64); err == nil {
			counters[name] = n
		}
	}
	return counters
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// recordText is echo's argument: recordTextBytes of letters and digits
// drawn at random, the same every run, which no store's compression
// shrinks much.
func recordText() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, recordTextBytes)
	for i := range buf {
		buf[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(buf)
}

// recordRequest starts a generation of turns tool turns, each calling the
// "tools" server's echo with text, then a text turn: played by the script
// provider (one repeated turn), or asked of model ("openai", whose fake
// plays the same).
func recordRequest(b *testing.B, model string, turns int, text string) *agentdv1.GenerateRequest {
	b.Helper()
	maxTurns := int32(turns)
	agent := &agentdv1.Agent{
		Provider:     model,
		Mcps:         []*agentdv1.MCPServer{{Transport: &agentdv1.MCPServer_Ref{Ref: "tools"}}},
		MaxToolTurns: &maxTurns,
	}
	if model == "script" {
		opts, err := structpb.NewStruct(map[string]any{"script": map[string]any{"turns": []any{
			map[string]any{"repeat": turns, "tool_calls": []any{map[string]any{"name": "echo", "arguments": map[string]any{"text": text}}}},
			map[string]any{"text": recordAnswer},
		}}})
		if err != nil {
			b.Fatal(err)
		}
		agent.ProviderOptions = opts
	} else {
		agent.Model = "bench-model"
	}
	return &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
		Agent:    agent,
		Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "Call echo until told to stop."}}}}},
	}}}
}

// toolGeneration runs one generation of start on client to its end and
// returns its content in bytes, as toolEvents does.
func toolGeneration(b testing.TB, client agentdv1.AgentServiceClient, start *agentdv1.GenerateRequest, turns int) int64 {
	return toolEvents(b, generated(b, client, start), turns)
}

// toolEvents reads a generation's events and returns its content in bytes:
// the calls' arguments, the tools' outputs and the model's text. It fails
// b unless the generation completed after turns tool calls that
// succeeded.
func toolEvents(b testing.TB, events iter.Seq[*agentdv1.GenerateResponse], turns int) int64 {
	var content int64
	calls, completed := 0, false
	for ev := range events {
		if f := ev.GetToolCallFinished(); f != nil {
			if f.GetIsError() {
				b.Fatalf("tool call failed: %s", f.GetOutput())
			}
			calls++
		}
		content += int64(len(ev.GetTextDelta().GetText()) + len(ev.GetToolCallStarted().GetArguments()) + len(ev.GetToolCallFinished().GetOutput()))
		completed = completed || ev.GetCompleted() != nil
	}
	if !completed || calls != turns {
		b.Fatalf("generation ended with completed %v after %d tool calls; want completed after %d", completed, calls, turns)
	}
	return content
}

// recordModel is a Chat Completions endpoint that plays
// BenchmarkRecordGrowth's generation: a request holding fewer than turns
// tool messages gets a call of echo with the text, the next recordAnswer,
// each streamed. It tells the turn by counting the request's tool
// messages, so that its own work is a scan of each request.
type recordModel struct {
	args  []byte // the call's arguments, as a JSON string
	turns int
}

// recordModelURL serves a recordModel and returns its base URL.
func recordModelURL(b *testing.B, text string, turns int) string {
	args, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		b.Fatal(err)
	}
	quoted, err := json.Marshal(string(args))
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(&recordModel{args: quoted, turns: turns})
	b.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func (m *recordModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not a chat completion"}}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	done := bytes.Count(body, []byte(`"role":"tool"`))
	delta, finish := fmt.Sprintf(`{"role":"assistant","content":%q}`, recordAnswer), "stop"
	if done < m.turns {
		// The call's id is the turn's: every call of a conversation has its own.
		delta = fmt.Sprintf(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_%d","type":"function","function":{"name":"echo","arguments":%s}}]}`, done+1, m.args)
		finish = "tool_calls"
	}
	fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", delta)
	fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":%q}]}\n\n", finish)
	fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5}}\n\ndata: [DONE]\n\n")
}
