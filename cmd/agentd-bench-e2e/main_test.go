package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/proctest"
	"github.com/agentd/agentd/internal/store/pgtest"
)

func TestMain(m *testing.M) {
	// The harness starts this test binary as the fake model.
	serveFakeIfAsked()
	proctest.VerifyTestMain(m)
}

// TestFakeModel: the fake answers by the number of tool results in the
// request, an echo call for each of the first three turns and the final
// text then, and keeps the first body of each turn for the floor.
func TestFakeModel(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newFakeModel())
	defer srv.Close()
	fl := &floor{url: srv.URL + completionsPath, http: srv.Client()}
	messages := []any{map[string]any{"role": "user", "content": "go"}}
	for turn := range toolTurns + 1 {
		body, err := json.Marshal(map[string]any{"model": model, "stream": true, "messages": messages})
		if err != nil {
			t.Fatal(err)
		}
		name, args, text, err := fl.complete(t.Context(), body)
		if err != nil {
			t.Fatalf("turn %d: %v", turn+1, err)
		}
		if turn == toolTurns {
			if name != "" || text != finalText {
				t.Errorf("final turn: call %q, text %q; want no call, %q", name, text, finalText)
			}
			break
		}
		var got map[string]string
		if err := json.Unmarshal([]byte(args), &got); err != nil || name != "echo" || got["message"] != "turn "+string(rune('1'+turn)) {
			t.Errorf("turn %d: call %q with %q (%v); want echo with turn %d", turn+1, name, args, err, turn+1)
		}
		messages = append(messages, map[string]any{"role": "tool", "tool_call_id": "x", "content": "Echo"})
	}

	resp, err := srv.Client().Get(srv.URL + bodiesPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var bodies []string
	if err := json.NewDecoder(resp.Body).Decode(&bodies); err != nil || len(bodies) != toolTurns+1 {
		t.Fatalf("bodies %q, %v; want %d", bodies, err, toolTurns+1)
	}
	for i, b := range bodies {
		if n := strings.Count(b, `"role":"tool"`); n != i {
			t.Errorf("body %d holds %d tool results, want %d", i+1, n, i)
		}
	}

	req, _ := http.NewRequest(http.MethodPost, srv.URL+completionsPath, strings.NewReader(`{"stream":true,"messages":[]}`))
	resp, err = srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a request without the key: %s, want 401", resp.Status)
	}
}

// everythingOrSkip returns server-everything's entry point, or skips when
// npm ci has not installed it (fails under AGENTD_REQUIRE_NPM_SERVERS=1).
func everythingOrSkip(t *testing.T) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := os.Stat(path)
	_, nodeErr := exec.LookPath("node")
	if statErr != nil || nodeErr != nil {
		if os.Getenv("AGENTD_REQUIRE_NPM_SERVERS") == "1" {
			t.Fatalf("server-everything or node is missing (%v, %v)", statErr, nodeErr)
		}
		t.Skip("server-everything or node is missing: run npm ci")
	}
	return path
}

// buildAgentd builds the agentd binary the harness measures.
func buildAgentd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agentd")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "../agentd").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/agentd: %v\n%s", err, out)
	}
	return bin
}

// tiny is a run of two generations in every window.
func tiny(bin, everything string) []string {
	return []string{"-agentd", bin, "-everything", everything, "-gens", "2", "-conc-gens", "2",
		"-default-gens", "2", "-default-conc-gens", "2", "-concurrency", "2", "-warmup", "1"}
}

// TestBench runs the harness end to end on a tiny workload, with agentd's
// CPU profile of a one-second shared concurrent window, then an
// interrupted run: both print what they should and leave no process
// behind (TestMain checks the children; the harness checks agentd's).
// Timings are not asserted.
//
// Not parallel: TestMain counts this process's children.
func TestBench(t *testing.T) {
	everything := everythingOrSkip(t)
	bin := buildAgentd(t)

	var out, progress bytes.Buffer
	profile := filepath.Join(t.TempDir(), "cpu.pprof")
	if err := run(t.Context(), append(tiny(bin, everything), "-cpuprofile", profile, "-cpuprofile-seconds", "1"), &out, &progress); err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	table := out.String()
	for _, want := range []string{"| floor: ", "| durable floor: ", "| agentd, `shared: true` (SQLite) |", "| agentd, default ", "| shared / floor |", "| shared / durable floor |", "| default / floor |"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table has no %q:\n%s", want, table)
		}
	}
	// Allocations in every row: the three floors' and agentd's two modes',
	// agentd's from its debug endpoint.
	if rows := regexp.MustCompile(`(?m)^\| (floor|durable floor|agentd)[^\n]*\| [0-9.]+ KiB, [1-9][0-9]* objects \|`).FindAllString(table, -1); len(rows) != 5 {
		t.Errorf("%d rows give allocations per generation, want 5:\n%s", len(rows), table)
	}
	// A profile is gzipped protobuf.
	if data, err := os.ReadFile(profile); err != nil || len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		t.Errorf("agentd's CPU profile: %d bytes, %v; want a gzipped profile", len(data), err)
	}
	if t.Failed() {
		t.Logf("progress:\n%s", progress.String())
	}

	// Interrupted once the first window starts.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := &cancelOn{want: "floor, sequential", cancel: cancel}
	err := run(ctx, tiny(bin, everything), io.Discard, w)
	if err == nil || !strings.Contains(err.Error(), "context canceled") || !strings.Contains(err.Error(), "agentd's log") {
		t.Fatalf("an interrupted run: %v; want context canceled, naming agentd's log", err)
	}
	// A failed run keeps agentd's state directory, with its log, for a
	// person to read; a test has read enough.
	if m := regexp.MustCompile(`agentd's log: (\S+)/agentd\.log\)`).FindStringSubmatch(err.Error()); m != nil {
		os.RemoveAll(m[1])
	}
}

// cancelOn calls cancel once what is written to it holds want.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	want   string
	cancel context.CancelFunc
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.want) {
		c.cancel()
	}
	return len(p), nil
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-gens", "0"}, {"-concurrency", "-1"}, {"-timeout", "0s"}, {"extra"}} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) = nil error", args)
		}
	}
	o, err := parseFlags(nil, io.Discard)
	if err != nil || o.concurrency != 8 || o.agentd != "bin/agentd" {
		t.Errorf("defaults: %+v, %v", o, err)
	}
}

// TestSteps: a generation's record is its steps, numbered from 1, each
// committed in the durable floor's one table; the floor's records nothing.
func TestSteps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) steps
	}{
		{"sqlite", func(t *testing.T) steps {
			s, err := openSQLiteSteps(filepath.Join(t.TempDir(), "floor.db"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"postgres", func(t *testing.T) steps {
			s, err := openPostgresSteps(t.Context(), pgtest.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tc.open(t)
			if err := newRecord(nil).step(t.Context(), stepData{Text: "nothing"}); err != nil {
				t.Fatal(err)
			}
			rec := newRecord(s)
			if err := rec.start(t.Context(), []byte("request")); err != nil {
				t.Fatal(err)
			}
			for _, d := range []stepData{{Tool: "echo", Arguments: json.RawMessage(`{"message":"turn 1"}`)}, {Result: "Echo: turn 1", Text: finalText}} {
				if err := rec.step(t.Context(), d); err != nil {
					t.Fatal(err)
				}
			}
			got := readSteps(t, s)
			want := []string{
				"1 request",
				`2 {"tool":"echo","arguments":{"message":"turn 1"}}`,
				`3 {"result":"Echo: turn 1","text":"` + finalText + `"}`,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the steps (-want +got):\n%s", diff)
			}
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}

// readSteps reads back every step s holds, as "seq payload".
func readSteps(t *testing.T, s steps) []string {
	t.Helper()
	const q = `SELECT seq, payload FROM floor_steps ORDER BY generation, seq`
	var got []string
	add := func(seq int, payload []byte) { got = append(got, fmt.Sprintf("%d %s", seq, payload)) }
	switch s := s.(type) {
	case *sqliteSteps:
		rows, err := s.db.QueryContext(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var seq int
			var payload []byte
			if err := rows.Scan(&seq, &payload); err != nil {
				t.Fatal(err)
			}
			add(seq, payload)
		}
	case *pgSteps:
		rows, _ := s.pool.Query(t.Context(), q)
		var seq int
		var payload []byte
		if _, err := pgx.ForEachRow(rows, []any{&seq, &payload}, func() error { add(seq, payload); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return got
}
