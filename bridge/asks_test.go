package bridge

import (
	"context"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/config"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcptest"
	"github.com/agentd/agentd/internal/oauthtest"
)

// oauthSpec declares an HTTP server whose refusals agentd resolves.
func oauthSpec(name, url, authorization string) *bridgev1.ServerSpec {
	s := httpSpec(name, url, authorization, roomyTimeout)
	s.GetHttp().Oauth = true
	return s
}

// answerRequests answers the server requests of a session's stream with
// answer, in order, until the stream ends, and records them. The test must
// cancel the stream's context before its cleanups run.
func answerRequests(t *testing.T, client bridgev1.BridgeServiceClient, id string, stream grpc.ServerStreamingClient[bridgev1.OpenSessionResponse],
	answer func(*bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest) func() []*bridgev1.ServerRequest {
	var mu sync.Mutex
	var seen []*bridgev1.ServerRequest
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			r := ev.GetRequest()
			if r == nil {
				continue
			}
			mu.Lock()
			seen = append(seen, r)
			mu.Unlock()
			a := answer(r)
			a.SessionId, a.Id = id, r.GetId()
			if _, err := client.AnswerServerRequest(context.WithoutCancel(t.Context()), a); err != nil {
				t.Errorf("AnswerServerRequest: %v", err)
			}
		}
	}()
	// An answer may still be on its way back when the calls it resolved
	// have returned; the test's connection closes only after it arrives
	// (the stream ends when the test cancels its context).
	t.Cleanup(func() { <-done })
	return func() []*bridgev1.ServerRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]*bridgev1.ServerRequest(nil), seen...)
	}
}

// TestServerRequestsAuthorization: X-M1. A server declared with oauth that
// refuses a request makes the bridge ask agentd, on the session's stream,
// with the server's challenge; the request goes again with agentd's
// answer, and later ones carry it. An error answer fails the request with
// agentd's status. A server without oauth is not asked about (X-M3).
func TestServerRequestsAuthorization(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(c *config.Bridge) { c.AllowPrivateNetworks = true })

	t.Run("X-M1 answered", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable, Token: "tok-123", Challenge: `Bearer scope="files:read"`})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		id, stream := open(t, ctx, f.client, oauthSpec("secured", srv.URL, "tok-stale"))
		seen := answerRequests(t, f.client, id, stream, func(*bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest {
			return &bridgev1.AnswerServerRequestRequest{Answer: &bridgev1.AnswerServerRequestRequest_Authorization{Authorization: "tok-123"}}
		})
		if got := call(t, f.client, id, "secured", "authorization", "{}"); got.GetOutput() != "Bearer tok-123" {
			t.Errorf("the server saw Authorization %q, want Bearer tok-123", got.GetOutput())
		}
		if got := call(t, f.client, id, "secured", "authorization", "{}"); got.GetOutput() != "Bearer tok-123" {
			t.Errorf("a later call carried %q, want Bearer tok-123", got.GetOutput())
		}
		reqs := seen()
		if len(reqs) != 1 {
			t.Fatalf("agentd was asked %d times, want once", len(reqs))
		}
		a := reqs[0].GetAuthorization()
		if reqs[0].GetServerName() != "secured" || a.GetStatus() != 401 || a.GetPresented() != "Bearer tok-stale" ||
			len(a.GetWwwAuthenticate()) != 1 || !strings.Contains(a.GetWwwAuthenticate()[0], "files:read") {
			t.Errorf("request = %v, want secured's 401 with its challenge and the stale token", reqs[0])
		}
	})

	t.Run("X-M1 refused by agentd", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable, Token: "tok-123"})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		id, stream := open(t, ctx, f.client, oauthSpec("secured", srv.URL, ""))
		answerRequests(t, f.client, id, stream, func(*bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest {
			e := fault.New(fault.Unauthenticated, "nobody authorized it").WithInfo("MCP_AUTHORIZATION_UNANSWERED", map[string]string{"server": "secured"})
			st := fault.Status(e).Proto()
			return &bridgev1.AnswerServerRequestRequest{Answer: &bridgev1.AnswerServerRequestRequest_Error{Error: &bridgev1.CallError{Code: st.GetCode(), Message: st.GetMessage(), Details: st.GetDetails()}}}
		})
		_, err := f.client.CallTool(t.Context(), &bridgev1.CallToolRequest{SessionId: id, ServerName: "secured", ToolName: "echo", Arguments: `{"text":"hi"}`})
		msg, info := errorInfo(t, err, codes.Unauthenticated)
		if msg != "nobody authorized it" || info.GetReason() != "MCP_AUTHORIZATION_UNANSWERED" {
			t.Errorf("error = %q %v, want agentd's", msg, info)
		}
		if n := srv.Executions("echo"); n != 0 {
			t.Errorf("echo ran %d times", n)
		}
	})

	t.Run("X-M3 no oauth, no question", func(t *testing.T) {
		t.Parallel()
		srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable, Token: "tok-123"})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		id, stream := open(t, ctx, f.client, httpSpec("plain", srv.URL, "", roomyTimeout))
		seen := answerRequests(t, f.client, id, stream, func(*bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest {
			return &bridgev1.AnswerServerRequestRequest{Answer: &bridgev1.AnswerServerRequestRequest_Authorization{Authorization: "tok-123"}}
		})
		_, err := f.client.CallTool(t.Context(), &bridgev1.CallToolRequest{SessionId: id, ServerName: "plain", ToolName: "echo", Arguments: `{}`})
		errorInfo(t, err, codes.Unauthenticated)
		if n := len(seen()); n != 0 {
			t.Errorf("agentd was asked %d times about a server without oauth", n)
		}
	})
}

// TestServerRequestsStepUpOnce: X-M1. Parallel calls that a server refuses
// for want of a scope (403 insufficient_scope) make the bridge ask agentd
// once: the calls waiting behind the first resolution go again with its
// answer.
func TestServerRequestsStepUpOnce(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, func(c *config.Bridge) { c.AllowPrivateNetworks = true })
	as := oauthtest.New(t, oauthtest.Options{})
	base, _ := as.Issue("mcp:read")
	wide, _ := as.Issue("mcp:read", as.StepUpScope)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	id, stream := open(t, ctx, f.client, oauthSpec("crm", as.MCPURL, base))
	seen := answerRequests(t, f.client, id, stream, func(*bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest {
		return &bridgev1.AnswerServerRequestRequest{Answer: &bridgev1.AnswerServerRequestRequest_Authorization{Authorization: wide}}
	})
	if got := call(t, f.client, id, "crm", "echo", `{"text":"hi"}`); got.GetIsError() {
		t.Fatalf("echo with the base scope = %v", got)
	}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if got := call(t, f.client, id, "crm", as.StepUpTool, `{"text":"hi"}`); got.GetIsError() {
				t.Errorf("%s after the step-up = %v", as.StepUpTool, got)
			}
		})
	}
	wg.Wait()
	reqs := seen()
	if len(reqs) != 1 || reqs[0].GetAuthorization().GetStatus() != 403 {
		t.Errorf("agentd was asked %v; want once, for the 403", reqs)
	}
}
