package app_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
)

// protocolsRound is how many generations a round of
// BenchmarkProtocolsCPU runs for each protocol.
const protocolsRound = 10

// protocolsClientsEnv makes TestProtocolsClients BenchmarkProtocolsCPU's
// clients.
const protocolsClientsEnv = "AGENTD_TEST_PROTOCOLS_CLIENTS"

// The ways BenchmarkProtocolsCPU runs a generation, the Generate stream
// first: its metrics' labels.
var benchProtocols = []string{"grpc", "grpc-follow", "connect", "json"}

// BenchmarkProtocolsCPU is what a generation costs agentd in CPU when its
// client speaks Connect or HTTP/JSON rather than gRPC (target: at most
// 1.2×), the whole generation going over the protocol:
//
//   - grpc: a Generate stream (grpc-go);
//   - connect: CreateGeneration, then FollowGeneration to the end
//     (connect-go, binary protobuf, HTTP/2 without TLS);
//   - json: POST /v1/generations, then its event stream (Server-Sent
//     Events) to the end (net/http and protojson, HTTP/1.1);
//   - grpc-follow: CreateGeneration and FollowGeneration over gRPC, which
//     tells what starting detached and following cost from what the
//     transcoding costs.
//
// One agentd serves every protocol on one TCP port, on SQLite, in this
// process, with neither traces nor metrics, as agentd-bench-e2e measures
// agentd's CPU alone; its clients are a process of their own (this test
// binary again, TestProtocolsClients). Each generation has
// agentd-bench-e2e's shape: 4 model turns, the first three each calling
// echo through the bridge (a Go stdio MCP server, a process of its own),
// the last answering text. The model is, by sub-benchmark, "openai":
// agentd-bench-e2e's fake Chat Completions model, served by the clients'
// process, which agentd reaches over loopback with its OpenAI codec as it
// would a provider; or "script": the script provider, in process, the
// cheapest model there is, against which the protocols' costs weigh the
// most. Rounds of protocolsRound generations go to each protocol in turn,
// the order rotating from round to round; this process's CPU is read
// around each, and the clients' process reads its own. It reports each
// protocol's CPU per generation, agentd's and its client's, and the
// medians over rounds of the ratios of agentd's to its CPU with a
// Generate stream.
func BenchmarkProtocolsCPU(b *testing.B) {
	exe, env := mcptest.Command(b, mcptest.Tools)
	for _, model := range []string{"openai", "script"} {
		b.Run(model, func(b *testing.B) {
			clients := startClients(b)
			cfg := benchStoreConfig(b, config.StoreSQLite)
			cfg.Bridge.TerminateGrace = benchGrace
			cfg.Bridge.Servers = map[string]config.Server{"tools": {Command: exe, Env: env, Shared: config.SharedGlobal}}
			cfg.Providers = map[string]config.Provider{"openai": {APIKey: "bench-key", BaseURL: clients.model}}
			s := &webStack{}
			s.serve(b, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
			clients.send(b, s.addr+" "+model)
			for _, p := range benchProtocols {
				clients.round(b, p) // connect, start the server's process, fill the schema cache
			}
			protocolRounds(b, clients)
		})
	}
}

// protocolRounds runs b's rounds with clients and reports them.
func protocolRounds(b *testing.B, clients *protocolClients) {
	agentd, client := make([][]float64, len(benchProtocols)), make([][]float64, len(benchProtocols))
	rounds := 0
	for b.Loop() {
		for i := range benchProtocols {
			arm := (i + rounds) % len(benchProtocols)
			t0 := cpuTime(b)
			spent := clients.round(b, benchProtocols[arm])
			agentd[arm] = append(agentd[arm], perGeneration(cpuTime(b)-t0))
			client[arm] = append(client[arm], perGeneration(spent))
		}
		rounds++
	}
	for i, p := range benchProtocols {
		b.ReportMetric(median(agentd[i]), "cpu-µs/gen-"+p)
		b.ReportMetric(median(client[i]), "client-cpu-µs/gen-"+p)
		if i == 0 {
			continue
		}
		ratios := make([]float64, rounds)
		for r := range rounds {
			ratios[r] = agentd[i][r] / agentd[0][r]
		}
		b.ReportMetric(median(ratios), p+"/grpc")
	}
}

// perGeneration is the µs of a round's CPU time per generation.
func perGeneration(d time.Duration) float64 {
	return float64(d.Microseconds()) / protocolsRound
}

// protocolClients is TestProtocolsClients running.
type protocolClients struct {
	model string // the base URL of its fake model
	in    io.Writer
	out   *bufio.Reader
}

// startClients starts TestProtocolsClients until b ends, and waits for
// its fake model.
func startClients(b *testing.B) *protocolClients {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestProtocolsClients$", "-test.count=1")
	cmd.Env = append(os.Environ(), protocolsClientsEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = in.Close() // its end
		_ = cmd.Wait()
	})
	c := &protocolClients{in: in, out: bufio.NewReader(out)}
	c.model = c.answer(b, "model ")
	return c
}

func (c *protocolClients) send(b *testing.B, line string) {
	if _, err := fmt.Fprintln(c.in, line); err != nil {
		b.Fatal(err)
	}
}

// answer reads the clients' next line, which must begin with prefix,
// and returns the rest of it.
func (c *protocolClients) answer(b *testing.B, prefix string) string {
	line, err := c.out.ReadString('\n')
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
	if err != nil || !ok {
		more, _ := io.ReadAll(c.out)
		b.Fatalf("the clients said %q (%v), not %q, then:\n%s", line, err, prefix, more)
	}
	return rest
}

// round runs protocolsRound generations the way p says and returns the
// CPU the clients took for them.
func (c *protocolClients) round(b *testing.B, p string) time.Duration {
	c.send(b, p)
	n, err := strconv.ParseInt(c.answer(b, "cpu-ns "), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(n)
}

// TestProtocolsClients is BenchmarkProtocolsCPU's clients, run by it
// alone (protocolsClientsEnv). It serves e2eModel and writes its base URL
// to stdout ("model URL"), reads the address of agentd and the model to
// ask ("ADDR MODEL"), then, for each way of running a generation read
// from stdin, one a line, runs protocolsRound generations that way and
// writes the CPU they took (user and system), "cpu-ns N", until stdin
// ends.
func TestProtocolsClients(t *testing.T) {
	if os.Getenv(protocolsClientsEnv) == "" {
		t.Skip("BenchmarkProtocolsCPU runs it")
	}
	model := httptest.NewServer(http.HandlerFunc(e2eModel))
	defer model.Close()
	fmt.Printf("model %s/v1\n", model.URL)
	lines := bufio.NewScanner(os.Stdin)
	if !lines.Scan() {
		t.Fatal("no agentd to ask")
	}
	addr, provider, _ := strings.Cut(lines.Text(), " ")
	s := &webStack{addr: addr}
	s.dial(t)
	start := toolLoopRequest(t)
	if provider == "openai" {
		start.GetStart().GetAgent().Provider, start.GetStart().GetAgent().Model, start.GetStart().GetAgent().ProviderOptions = provider, "bench-model", nil
	}
	generation := map[string]func(){
		"grpc":        toolLoop(t, s.conn, start),
		"grpc-follow": created(t, s, protoGRPC, start.GetStart()),
		"connect":     created(t, s, protoConnect, start.GetStart()),
		"json":        created(t, s, protoJSON, start.GetStart()),
	}
	for lines.Scan() {
		gen, ok := generation[lines.Text()]
		if !ok {
			t.Fatalf("no way %q", lines.Text())
		}
		t0 := cpuTime(t)
		for range protocolsRound {
			gen()
		}
		fmt.Printf("cpu-ns %d\n", cpuTime(t)-t0)
	}
}

// created returns a function that runs one generation of start over
// protocol p to its end: CreateGeneration, then a follow from its first
// event. It fails t unless the generation completed after three tool
// calls that succeeded.
func created(t testing.TB, s *webStack, p string, start *agentdv1.StartGeneration) func() {
	req := &agentdv1.CreateGenerationRequest{Start: start}
	return func() {
		o := createGeneration(t, s, p, "", nil, req)
		if o.code != 0 {
			t.Fatalf("CreateGeneration over %s: %v %s", p, o.code, o.msg)
		}
		id := o.res.(*agentdv1.CreateGenerationResponse).GetGenerationId()
		o = follow(t, s, p, "", nil, &agentdv1.FollowGenerationRequest{GenerationId: id})
		if o.code != 0 {
			t.Fatalf("following %s over %s: %v %s", id, p, o.code, o.msg)
		}
		toolEvents(t, slices.Values(o.events), 3)
	}
}

// e2eModel is agentd-bench-e2e's fake model: a Chat Completions endpoint
// that streams, to a request holding n tool results, a call of echo for
// n < 3, else its final text, each event flushed on its own.
func e2eModel(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for _, event := range e2eAnswers[min(bytes.Count(body, []byte(`"role":"tool"`)), len(e2eAnswers)-1)] {
		if _, err := io.WriteString(w, event); err != nil {
			return
		}
		w.(http.Flusher).Flush()
	}
}

// e2eAnswers are e2eModel's answers by turn, as agentd-bench-e2e's fake
// chunks them: the role and the call's name, its arguments in fragments,
// the finish reason; or the role, then the text word by word, the finish
// reason; then usage alone, then [DONE].
var e2eAnswers = func() [4][]string {
	chunk := func(turn int, delta, finish string) string {
		return fmt.Sprintf(`data: {"id":"chatcmpl-bench-%d","object":"chat.completion.chunk","created":1764500000,"model":"bench-model","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}],"usage":null}`+"\n\n", turn+1, delta, finish)
	}
	quoted := func(s string) string {
		q, _ := json.Marshal(s)
		return string(q)
	}
	var answers [4][]string
	for turn := range answers {
		var events []string
		finish := `"stop"`
		if turn < 3 {
			events = append(events, chunk(turn, fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_%d","type":"function","function":{"name":"echo","arguments":""}}]}`, turn+1), "null"))
			for _, frag := range []string{`{"te`, `xt": "tur`, fmt.Sprintf(`n %d"}`, turn+1)} {
				events = append(events, chunk(turn, `{"tool_calls":[{"index":0,"function":{"arguments":`+quoted(frag)+`}}]}`, "null"))
			}
			finish = `"tool_calls"`
		} else {
			events = append(events, chunk(turn, `{"role":"assistant","content":""}`, "null"))
			for _, word := range strings.SplitAfter("All three echoes came back.", " ") {
				events = append(events, chunk(turn, `{"content":`+quoted(word)+`}`, "null"))
			}
		}
		events = append(events, chunk(turn, `{}`, finish),
			fmt.Sprintf(`data: {"id":"chatcmpl-bench-%d","object":"chat.completion.chunk","created":1764500000,"model":"bench-model","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":12,"total_tokens":%d}}`+"\n\n", turn+1, 200+40*turn, 212+40*turn),
			"data: [DONE]\n\n")
		answers[turn] = events
	}
	return answers
}()
