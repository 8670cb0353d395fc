package mcpconn

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/mcptest"
)

// TestHTTPFailedResolutionAskedOnce (X-M1): a server that refuses every
// request refuses the 2026-07-28 server/discover probe and then the
// classic initialize that the go-sdk falls back to on the same
// connection, both carrying the same authorization. A resolution that
// failed (a person declined, a grant was refused) is not run again for
// the second refusal: the handshake fails with its error, and the
// resolver, which may ask a person, ran once. A cancelled resolution
// says nothing about the grant, so the next refusal is resolved again.
func TestHTTPFailedResolutionAskedOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		err       error
		wantCalls int32
	}{
		{"declined", fault.New(fault.Unauthenticated, "the person declined").WithInfo("MCP_AUTHORIZATION_FAILED", nil), 1},
		{"refused grant", fault.New(fault.Unauthenticated, "the token endpoint refused the grant"), 1},
		{"cancelled", fault.New(fault.Canceled, "the wait for the person was cancelled"), 2},
		{"context", context.Canceled, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := mcptest.NewHTTP(t, mcptest.HTTPOptions{Mode: mcptest.Streamable, Token: "tok-never-granted",
				Challenge: `Bearer resource_metadata="https://auth.example.com/.well-known/oauth-protected-resource"`})
			var calls atomic.Int32
			spec := HTTPSpec{Name: "files", URL: srv.URL, Transport: privateTransport(t),
				Authorize: func(context.Context, Challenge) (string, error) {
					calls.Add(1)
					return "", tc.err
				}}
			conn, err := DialHTTP(t.Context(), spec, roomyTimeout, Options{})
			if err == nil {
				_ = conn.Close()
				t.Fatal("DialHTTP succeeded against a server that refuses everything")
			}
			if !errors.Is(err, tc.err) && err.Error() != tc.err.Error() {
				t.Errorf("DialHTTP = %v, want the resolver's error %v", err, tc.err)
			}
			if got := calls.Load(); got != tc.wantCalls {
				t.Errorf("the resolver ran %d times, want %d", got, tc.wantCalls)
			}
			var refused []string
			for _, r := range srv.Requests() {
				if r.Status == http.StatusUnauthorized && r.RPCMethod != "" {
					refused = append(refused, r.RPCMethod)
				}
			}
			if !slices.Contains(refused, "server/discover") || !slices.Contains(refused, "initialize") {
				t.Errorf("the server refused %v, want the probe and the classic handshake", refused)
			}
		})
	}
}

// TestAuthorizerRemembersByRefusal (X-M1): a failed resolution answers
// later refusals of the same authorization that ask for the same thing;
// one asking for another scope, or a 401 after a failed step-up, is a new
// question and is resolved. A failure that is no answer (a dependency
// down) is not remembered.
func TestAuthorizerRemembersByRefusal(t *testing.T) {
	t.Parallel()
	refusal := func(status int, challenge string) *http.Response {
		return &http.Response{StatusCode: status, Header: http.Header{"Www-Authenticate": {challenge}}}
	}
	declined := fault.New(fault.Unauthenticated, "declined")
	var calls int
	a := &authorizer{turn: make(chan struct{}, 1), resolve: func(context.Context, Challenge) (string, error) {
		calls++
		return "", declined
	}}
	a.current.Store("Bearer old")
	steps := []struct {
		resp      *http.Response
		wantCalls int
	}{
		{refusal(403, `Bearer error="insufficient_scope", scope="b a"`), 1},
		{refusal(403, `Bearer error="insufficient_scope", scope="a b"`), 1}, // the same set
		{refusal(403, `Bearer error="insufficient_scope", scope="c"`), 2},
		{refusal(401, `Bearer error="invalid_token"`), 3},
		{refusal(401, `Bearer error="invalid_token"`), 3},
	}
	for i, s := range steps {
		if _, err := a.renew(t.Context(), s.resp, "Bearer old"); !errors.Is(err, declined) {
			t.Errorf("step %d: renew = %v, want %v", i, err, declined)
		}
		if calls != s.wantCalls {
			t.Errorf("step %d: the resolver ran %d times, want %d", i, calls, s.wantCalls)
		}
	}
	down := fault.New(fault.Unavailable, "the authorization server could not be reached")
	a.resolve = func(context.Context, Challenge) (string, error) { calls++; return "", down }
	for range 2 {
		_, _ = a.renew(t.Context(), refusal(403, `Bearer error="insufficient_scope", scope="d"`), "Bearer old")
	}
	if calls != 5 {
		t.Errorf("an unavailable authorization server: the resolver ran %d times in all, want 5 (asked again)", calls)
	}
}
