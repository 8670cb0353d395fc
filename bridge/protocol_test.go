package bridge

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentd/agentd/bridge/internal/mcpconn"
	"github.com/agentd/agentd/bridge/internal/schemacache"
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/testwait"
)

// TestProtocolVersions: X-M8. The bridge offers 2026-07-28 and falls back
// to the classic handshake; it remembers, beside the server's schema-cache
// entry, what each server negotiated, so a classic server's later
// connections pay no server/discover probe: a stateless go-sdk HTTP
// server negotiates 2026-07-28, a stateful one 2025-11-25 (one probe over
// two sessions), and a stdio server that exits on the probe (a request it
// does not know) gets a fresh process with the classic handshake, once:
// its pool's later processes, the warm spare included, start classic.
func TestProtocolVersions(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(c *config.Bridge) {
		c.AllowPrivateNetworks = true
		c.Pool.CommandWarm = 1
	})
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			mode       mcptest.HTTPMode
			want       string
			wantProbes int // over two sessions
		}{
			{mcptest.Stateless, mcpconn.ModernVersion, 2}, // its handshake is the probe
			{mcptest.Streamable, mcpconn.ClassicVersion, 1},
		} {
			t.Run(tc.mode.String(), func(t *testing.T) {
				t.Parallel()
				srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: tc.mode})
				for range 2 {
					id, _ := open(t, t.Context(), f.client, httpSpec("web", srv.URL, "", roomyTimeout))
					if got := call(t, f.client, id, "web", "echo", `{"text":"hi"}`); got.GetOutput() != "hi" {
						t.Errorf("echo = %v", got)
					}
					closeSession(t, f.client, id)
				}
				key := schemacache.ServerKey(schemacache.KeyParts{URL: srv.URL})
				if got := f.svc.cache.ProtocolVersion(key); got != tc.want {
					t.Errorf("remembered %q, want %q", got, tc.want)
				}
				if got := srv.Discovers(); got != tc.wantProbes {
					t.Errorf("server/discover requests over two sessions = %d, want %d", got, tc.wantProbes)
				}
			})
		}
	})
	t.Run("stdio exits on the probe", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		probes, pids := filepath.Join(dir, "probes"), filepath.Join(dir, "pids")
		spec := commandSpec(t, "strict", mcptest.ExitOnUnknown, map[string]string{mcptest.ProbeFileEnv: probes, mcptest.PidFileEnv: pids})
		for range 2 {
			id, _ := open(t, t.Context(), f.client, spec)
			if got := call(t, f.client, id, "strict", "echo", `{"text":"hi"}`); got.GetOutput() != "hi" {
				t.Errorf("echo = %v", got)
			}
			closeSession(t, f.client, id)
		}
		// The pool keeps a warm spare: wait for it (the probe's process,
		// the first one, the spare).
		testwait.For(t, "three processes: the probe's, the first and the warm spare", func() bool { return len(mcptest.Pids(t, pids)) >= 3 })
		if got := mcptest.Probes(t, probes); len(got) != 1 || got[0] != "server/discover" {
			t.Errorf("processes ended by the probe: %q; want one, by server/discover", got)
		}
		st := spec.GetStdio()
		key := schemacache.ServerKey(schemacache.KeyParts{Command: st.GetCommand(), Env: st.GetEnv()})
		if got := f.svc.cache.ProtocolVersion(key); got != mcpconn.ClassicVersion {
			t.Errorf("remembered %q, want %q", got, mcpconn.ClassicVersion)
		}
	})
}

// TestProtocolVersionEverything: X-M8. server-everything, an npm server
// nobody here wrote, negotiates 2025-11-25 over stdio after the probe, and
// is remembered so.
func TestProtocolVersionEverything(t *testing.T) {
	node, scripts := realNode(t, everythingScript)
	f := realFixture(t, node)
	spec := &bridgev1.ServerSpec{Name: "everything", ReadTimeout: durationpb.New(roomyTimeout), Transport: &bridgev1.ServerSpec_Stdio{Stdio: &bridgev1.StdioTarget{
		Command: node, Args: []string{scripts[0], "stdio"},
	}}}
	for range 2 {
		id, stream := open(t, t.Context(), f.client, spec)
		if got := call(t, f.client, id, "everything", "echo", `{"message":"hi"}`); got.GetOutput() != "Echo: hi" {
			t.Errorf("echo = %v", got)
		}
		closeRealSession(t, f, id, stream)
	}
	key := schemacache.ServerKey(schemacache.KeyParts{Command: node, Args: []string{scripts[0], "stdio"}})
	if got := f.svc.cache.ProtocolVersion(key); got != mcpconn.ClassicVersion {
		t.Errorf("remembered %q, want %q", got, mcpconn.ClassicVersion)
	}
}

// TestDeferredInputRequest: X-M8. On a 2026-07-28 server, an elicitation
// comes as an input request of the tools/call result: agentd is asked
// (deferrable), and may defer it; the call then ends with input_required
// (the server's request by id and its request state), and the retry that
// carries input_responses and request_state completes it.
func TestDeferredInputRequest(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(c *config.Bridge) { c.AllowPrivateNetworks = true })
	srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Stateless})
	id, requests, stream := openAsking(t, t.Context(), f.client, httpSpec("asker", srv.URL, "", roomyTimeout))

	startCall(t, stream, 1, "asker", "elicit", `{}`)
	r := nextRequest(t, requests)
	if !r.GetDeferrable() || r.GetCallId() != 1 {
		t.Fatalf("request %v; want call 1's, deferrable", r)
	}
	if _, err := f.client.AnswerServerRequest(t.Context(), &bridgev1.AnswerServerRequestRequest{SessionId: id, Id: r.GetId(),
		Answer: &bridgev1.AnswerServerRequestRequest_Deferred{Deferred: &bridgev1.Deferred{}}}); err != nil {
		t.Fatal(err)
	}
	ended := recvAnswer(t, stream).GetResult()
	want := &bridgev1.InputRequired{
		Requests:     map[string]*bridgev1.Elicitation{"answer": r.GetElicitation()},
		RequestState: mcptest.ElicitState,
	}
	if diff := cmp.Diff(want, ended.GetInputRequired(), protocmp.Transform()); diff != "" {
		t.Fatalf("the deferred call's input_required (-want +got):\n%s", diff)
	}
	if ended.GetOutput() != "" || ended.GetIsError() {
		t.Errorf("the deferred call also answered %v", ended)
	}
	executions := srv.Executions("elicit")

	// The retry, as after a pause: the answer and the state go with the
	// call; nobody is asked again.
	res, err := f.client.CallTool(t.Context(), &bridgev1.CallToolRequest{SessionId: id, ServerName: "asker", ToolName: "elicit",
		InputResponses: map[string]*bridgev1.ElicitationResult{"answer": {Action: "accept", Content: mustStruct(t, map[string]any{"name": "Lin"})}},
		RequestState:   ended.GetInputRequired().GetRequestState()})
	if err != nil {
		t.Fatal(err)
	}
	var got mcptest.ElicitOutput
	if err := json.Unmarshal([]byte(res.GetOutput()), &got); err != nil {
		t.Fatalf("elicit's output %q: %v", res.GetOutput(), err)
	}
	if diff := cmp.Diff(mcptest.ElicitOutput{Action: "accept", Content: map[string]any{"name": "Lin"}}, got); diff != "" {
		t.Errorf("what the server received on the retry (-want +got):\n%s", diff)
	}
	if n := srv.Executions("elicit"); n != executions+1 {
		t.Errorf("the retry ran the tool %d times", n-executions)
	}
	select {
	case r := <-requests:
		t.Errorf("the retry asked again: %v", r)
	default:
	}

	// A deferral of a question that cannot wait (2025-11-25) is agentd's
	// mistake: the server's request fails, and the call with it.
	classic := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable})
	id2, requests2, stream2 := openAsking(t, t.Context(), f.client, httpSpec("asker", classic.URL, "", roomyTimeout))
	startCall(t, stream2, 1, "asker", "elicit", `{}`)
	r = nextRequest(t, requests2)
	if r.GetDeferrable() {
		t.Errorf("a 2025-11-25 request is deferrable: %v", r)
	}
	if _, err := f.client.AnswerServerRequest(t.Context(), &bridgev1.AnswerServerRequestRequest{SessionId: id2, Id: r.GetId(),
		Answer: &bridgev1.AnswerServerRequestRequest_Deferred{Deferred: &bridgev1.Deferred{}}}); err != nil {
		t.Fatal(err)
	}
	if res := recvAnswer(t, stream2).GetResult(); !res.GetIsError() || res.GetInputRequired() != nil {
		t.Errorf("a deferred 2025-11-25 question ended its call with %v; want the tool's failure", res)
	}
}
