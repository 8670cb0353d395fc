package mcpconn

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/fault"
)

func TestAuthorizationHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"R-D4 empty sends nothing", "", ""},
		{"R-D4 bare token gets Bearer", "tok-123", "Bearer tok-123"},
		{"R-D4 bare token with token68 padding", "dXNlcjpwYXNz==", "Bearer dXNlcjpwYXNz=="},
		{"R-D4 Basic kept", "Basic abc", "Basic abc"},
		{"R-D4 Bearer kept", "Bearer x", "Bearer x"},
		{"R-D4 lowercase scheme kept", "bearer x", "bearer x"},
		{"R-D4 other scheme kept", "Token abc", "Token abc"},
		{"R-D4 no scheme before the space", "a/b c", "Bearer a/b c"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := AuthorizationHeader(tc.in); got != tc.want {
				t.Errorf("AuthorizationHeader(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestDialHTTPHeaders checks R-D4 on the wire: the Authorization header and
// the extra headers reach the server on every request.
func TestDialHTTPHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, authorization, want string
	}{
		{"R-D4 bare token", "tok-123", "Bearer tok-123"},
		{"R-D4 Basic kept", "Basic abc", "Basic abc"},
		{"R-D4 none", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			seen := make(map[string]bool) // "METHOD authorization x-api-key"
			server := mcp.NewServer(&mcp.Implementation{Name: "http", Version: "1"}, nil)
			server.AddTool(&mcp.Tool{Name: "noop", InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{}, nil
				})
			handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen[r.Method+" "+r.Header.Get("Authorization")+" "+r.Header.Get("X-Api-Key")] = true
				mu.Unlock()
				handler.ServeHTTP(w, r)
			}))
			t.Cleanup(func() {
				ts.Close()
				http.DefaultTransport.(*http.Transport).CloseIdleConnections()
			})

			spec := HTTPSpec{Name: "remote", URL: ts.URL + "/mcp", Authorization: tc.authorization, Headers: map[string]string{"X-Api-Key": "k-1"}, Transport: NewTransport(true)}
			conn, err := DialHTTP(t.Context(), spec, 10*time.Second, Options{})
			if err != nil {
				t.Fatalf("DialHTTP: %v", err)
			}
			if conn.Pid() != 0 {
				t.Errorf("Pid() = %d for an HTTP server, want 0", conn.Pid())
			}
			tools, err := conn.ListTools(t.Context())
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			if len(tools) != 1 || tools[0].Name != "noop" {
				t.Errorf("ListTools = %v, want [noop]", tools)
			}
			if err := conn.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}

			mu.Lock()
			defer mu.Unlock()
			if !seen["POST "+tc.want+" k-1"] {
				t.Errorf("no POST with Authorization %q and X-Api-Key k-1", tc.want)
			}
			for req := range seen {
				method, rest, _ := strings.Cut(req, " ")
				if rest != tc.want+" k-1" {
					t.Errorf("%s request had headers %q, want %q", method, rest, tc.want+" k-1")
				}
			}
		})
	}
}

// TestDialHTTPErrorRedactsURL: a failed connection names the host, never
// the URL's path or query (R-X4).
func TestDialHTTPErrorRedactsURL(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1.
	spec := HTTPSpec{Name: "remote", URL: "http://127.0.0.1:1/tenant-42/mcp?key=sk-123", Authorization: "tok-secret", Transport: NewTransport(true)}
	_, err := DialHTTP(t.Context(), spec, 10*time.Second, Options{})
	if err == nil {
		t.Fatal("DialHTTP succeeded against a closed port")
	}
	if k := fault.KindOf(err); k != fault.Unavailable {
		t.Errorf("kind = %v, want Unavailable (%v)", k, err)
	}
	msg := err.Error()
	for _, s := range []string{"tenant-42", "sk-123", "tok-secret"} {
		if strings.Contains(msg, s) {
			t.Errorf("error %q contains %q", msg, s)
		}
	}
	for _, s := range []string{`"remote"`, "127.0.0.1:1", "the handshake"} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not name %s", msg, s)
		}
	}
}

// An HTTP server's credentials, quoted back in its errors, are redacted
// with its URL: the authorization whole, as the header it becomes and as
// its token alone, and every header value (internal/redact holds the
// rules' cases).
func TestRedactorCredentials(t *testing.T) {
	t.Parallel()
	r := newRedactor(HTTPSpec{URL: "https://h.example/k-path?key=q-secret", Authorization: "tok-1234", Headers: map[string]string{"X-Key": "hdr-5678", "X-Short": "ab"}})
	in := `403 from https://h.example/k-path?key=q-secret: "Authorization: Bearer tok-1234", X-Key hdr-5678, ab`
	got := r.Err(errors.New(in)).Error()
	for _, s := range []string{"k-path", "q-secret", "tok-1234", "hdr-5678"} {
		if strings.Contains(got, s) {
			t.Errorf("%q shows %q", got, s)
		}
	}
	if want := `403 from https://h.example/…: "Authorization: [redacted]", X-Key [redacted], ab`; got != want {
		t.Errorf("redacted to %q, want %q", got, want)
	}
	if r.Text(in) != got {
		t.Errorf("Text and Err disagree: %q", r.Text(in))
	}
}
