package mcpconn

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/testwait"
)

type sniffWriter struct {
	http.ResponseWriter
	onWrite func([]byte)
}

func (w *sniffWriter) Write(b []byte) (int, error) { w.onWrite(b); return w.ResponseWriter.Write(b) }
func (w *sniffWriter) Flush()                      { w.ResponseWriter.(http.Flusher).Flush() }

// The standalone GET stream, resumed with Last-Event-ID after a drop, may
// stay silent: it is not bounded by read_timeout, and a healthy, chatty
// call in flight meanwhile completes.
func TestQuietResumedStandaloneStream(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	type in struct{}
	mcp.AddTool(srv, &mcp.Tool{Name: "ticker"}, func(ctx context.Context, req *mcp.CallToolRequest, _ in) (*mcp.CallToolResult, any, error) {
		for i := range 80 { // 8 s, progress every 100 ms: never silent
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i)})
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	open := make(chan struct{}) // closed once the standalone stream is open
	var opened sync.Once
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") == "" {
			// A proxy drops the standalone stream shortly after it carried an event.
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			w = &sniffWriter{ResponseWriter: w, onWrite: func(b []byte) {
				opened.Do(func() { close(open) }) // the server's first write: ": ok"
				if strings.Contains(string(b), "list_changed") {
					time.AfterFunc(50*time.Millisecond, cancel)
				}
			}}
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	spec := HTTPSpec{Name: "x", URL: ts.URL, Transport: privateTransport(t), MaxReconnectionWait: 4 * time.Second}
	// Twenty of the ticker's intervals, a margin a busy machine keeps, and
	// far less than the resumed stream stays quiet (X-H6).
	conn, err := DialHTTP(t.Context(), spec, 2*time.Second, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// X-H6: the event below must go on the stream, so wait for it.
	testwait.Recv(t, open, "the standalone stream to open")
	mcp.AddTool(srv, &mcp.Tool{Name: "other"}, func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	}) // notifications/tools/list_changed on the standalone stream
	if _, err := conn.CallTool(t.Context(), "ticker", nil); err != nil {
		t.Fatalf("a healthy, chatty call failed: %v", err)
	}
}
