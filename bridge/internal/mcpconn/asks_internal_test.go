package mcpconn

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// TestAsksFor: X-M1. Only a refusal that someone waits for is worth a
// question: a POST carrying a request, or the legacy transport's GET that
// opens its session; never a notification (the cancellation of a call
// that gave up is sent with the old token, and would ask the person again
// for nothing) nor the standalone event stream.
func TestAsksFor(t *testing.T) {
	post := func(body string) *http.Request {
		r, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	get, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/mcp", nil)
	unreplayable := post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	unreplayable.GetBody = nil
	unreplayable.Body = io.NopCloser(bytes.NewReader(nil))
	for _, tc := range []struct {
		name string
		rt   *roundTripper
		req  *http.Request
		want bool
	}{
		{"request", &roundTripper{}, post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`), true},
		{"notification", &roundTripper{}, post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`), false},
		{"standalone stream", &roundTripper{}, get, false},
		{"legacy session stream", &roundTripper{sse: true}, get, true},
		{"body not replayable", &roundTripper{}, unreplayable, false},
	} {
		if got := tc.rt.asksFor(tc.req); got != tc.want {
			t.Errorf("%s: asksFor = %v, want %v", tc.name, got, tc.want)
		}
	}
}
