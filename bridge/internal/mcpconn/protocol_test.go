package mcpconn

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/mcptest"
)

// memory is a VersionMemory for one server.
type memory struct {
	mu sync.Mutex
	v  string
}

func (m *memory) Version() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.v
}

func (m *memory) Remember(v string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.v = v
}

// connectTwice makes two connections with dial, sharing one memory, and
// checks that each negotiates want and serves a call, and that the memory
// keeps want.
func connectTwice(t *testing.T, want string, dial func(*memory) (*Conn, error)) {
	t.Helper()
	mem := &memory{}
	for range 2 {
		conn, err := dial(mem)
		if err != nil {
			t.Fatal(err)
		}
		if got := conn.ProtocolVersion(); got != want {
			t.Errorf("negotiated %q, want %q", got, want)
		}
		if got := callText(t, conn, "echo", map[string]any{"text": "hi"}); got != "hi" {
			t.Errorf("echo = %q", got)
		}
		_ = conn.Close()
	}
	if got := mem.Version(); got != want {
		t.Errorf("remembered %q, want %q", got, want)
	}
}

// TestProtocolVersions: X-M8. agentd offers 2026-07-28 and falls back to
// the classic handshake: a stateless go-sdk HTTP server and a go-sdk
// stdio server negotiate 2026-07-28, a stateful HTTP server 2025-11-25,
// and a stdio server that exits on the probe (a request it does not know)
// gets a fresh process and the classic handshake. Each is remembered; the second
// connection pays no probe to a classic server.
func TestProtocolVersions(t *testing.T) {
	t.Parallel()
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			mode mcptest.HTTPMode
			want string
			// probes the server received over two connections.
			wantProbes int
		}{
			{mcptest.Stateless, ModernVersion, 2}, // the modern handshake is the probe
			{mcptest.Streamable, ClassicVersion, 1},
			// The legacy transport is found after a refused probe and
			// initialize; the second connection offers no probe.
			{mcptest.SSE, ClassicVersion, 1},
		} {
			t.Run(tc.mode.String(), func(t *testing.T) {
				t.Parallel()
				srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: tc.mode})
				connectTwice(t, tc.want, func(mem *memory) (*Conn, error) {
					return DialHTTP(t.Context(), HTTPSpec{Name: "fake", URL: srv.URL, Transport: privateTransport(t)}, roomyTimeout, Options{Versions: mem})
				})
				probes := 0
				for _, r := range srv.Requests() {
					if r.RPCMethod == "server/discover" {
						probes++
					}
				}
				if got := probes; got != tc.wantProbes {
					t.Errorf("the server got %d server/discover requests over two connections, want %d", got, tc.wantProbes)
				}
			})
		}
	})
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			server string
			want   string
			// processes started over two connections.
			wantSpawns int
		}{
			{mcptest.Tools, ModernVersion, 2},
			{mcptest.ExitOnUnknown, ClassicVersion, 3}, // the probe's process, then one each
		} {
			t.Run(tc.server, func(t *testing.T) {
				t.Parallel()
				spec := stdioSpec(t, tc.server)
				pids := filepath.Join(t.TempDir(), "pids")
				spec.Env[mcptest.PidFileEnv] = pids
				connectTwice(t, tc.want, func(mem *memory) (*Conn, error) {
					return DialStdio(t.Context(), spec, roomyTimeout, Options{Versions: mem})
				})
				started := mcptest.Pids(t, pids)
				if len(started) != tc.wantSpawns {
					t.Errorf("%d processes started over two connections, want %d", len(started), tc.wantSpawns)
				}
				for _, pid := range started {
					mcptest.WaitGone(t, pid)
				}
			})
		}
	})
	t.Run("no memory", func(t *testing.T) {
		t.Parallel()
		// Without a memory every connection probes; the server that exits
		// on the probe still gets its fresh process.
		conn := dial(t, stdioSpec(t, mcptest.ExitOnUnknown), roomyTimeout, nil)
		if got := conn.ProtocolVersion(); got != ClassicVersion {
			t.Errorf("negotiated %q, want %q", got, ClassicVersion)
		}
	})
}

// TestListToolsTTL: X-M8. A 2026-07-28 server's ttlMs comes with its tool
// list; a classic server gives no hint.
func TestListToolsTTL(t *testing.T) {
	t.Parallel()
	ttl := 1500 * time.Millisecond
	for _, tc := range []struct {
		mode mcptest.HTTPMode
		want *time.Duration
	}{
		{mcptest.Stateless, &ttl},
		{mcptest.Streamable, nil},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			t.Parallel()
			srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: tc.mode, TTL: &ttl})
			conn := dialFake(t, srv, roomyTimeout)
			tools, got, err := conn.ListToolsTTL(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(tools) == 0 {
				t.Error("no tools")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ttl (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInputRequests: X-M8. On a 2026-07-28 session a server's elicitation
// comes as an input request in the tools/call result: agentd's elicitation
// handler answers it (deferrable), and the call goes again with the
// answer, the defaults of the form filled in (SEP-1034). A deferred one
// ends the call with InputRequired, and the retry carries the answer and
// the request state.
func TestInputRequests(t *testing.T) {
	t.Parallel()
	type dialer func(t *testing.T) *Conn
	for name, connect := range map[string]dialer{
		"stateless http": func(t *testing.T) *Conn {
			return dialFake(t, mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Stateless}), roomyTimeout)
		},
		"stdio": func(t *testing.T) *Conn { return dial(t, stdioSpec(t, mcptest.Tools), roomyTimeout, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conn := connect(t)
			if !Modern(conn.ProtocolVersion()) {
				t.Fatalf("negotiated %s", conn.ProtocolVersion())
			}
			var mu sync.Mutex
			var asked []bool // Deferrable of each request
			deferIt := false
			conn.Serve(&Owner{Elicit: func(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				mu.Lock()
				defer mu.Unlock()
				asked = append(asked, Deferrable(ctx))
				if deferIt {
					return nil, ErrDeferred
				}
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Bo"}}, nil
			}})
			wantAnswer := mcptest.ElicitOutput{Action: "accept", Content: map[string]any{
				"name": "Bo", "age": float64(36), "ratio": 0.5, "subscribe": true, "color": "green",
			}}

			// Answered at once.
			res, err := conn.CallTool(t.Context(), "elicit", nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantAnswer, answerOf(t, res)); diff != "" {
				t.Errorf("the answer the server got (-want +got):\n%s", diff)
			}

			// Deferred, then retried with the answer.
			mu.Lock()
			deferIt = true
			mu.Unlock()
			_, err = conn.CallTool(t.Context(), "elicit", nil)
			ir, ok := errors.AsType[*InputRequired](err)
			if !ok {
				t.Fatalf("CallTool = %v; want *InputRequired", err)
			}
			if ir.RequestState != mcptest.ElicitState || len(ir.Requests) != 1 || ir.Requests["answer"] == nil || ir.Requests["answer"].Message != mcptest.ElicitForm.Message {
				t.Errorf("input required %+v; want the server's request \"answer\" and its state", ir)
			}
			retry := WithRetry(t.Context(), map[string]*mcp.ElicitResult{"answer": {Action: "decline"}}, ir.RequestState)
			res, err = conn.CallTool(retry, "elicit", nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(mcptest.ElicitOutput{Action: "decline"}, answerOf(t, res)); diff != "" {
				t.Errorf("the retry's answer (-want +got):\n%s", diff)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff([]bool{true, true}, asked); diff != "" {
				t.Errorf("requests asked, deferrable (-want +got):\n%s", diff)
			}
		})
	}
}

// answerOf is the elicit tool's structured result.
func answerOf(t *testing.T, res *mcp.CallToolResult) mcptest.ElicitOutput {
	t.Helper()
	var out mcptest.ElicitOutput
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("elicit's result %s: %v", data, err)
	}
	return out
}
