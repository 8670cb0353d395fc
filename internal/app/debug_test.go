package app_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
)

// TestDebugEndpoint: with debug.listen set, agentd serves
// net/http/pprof and the runtime's metrics there, the allocation totals
// growing with a generation; nothing of it is served without debug.listen,
// and the endpoint stops with agentd.
func TestDebugEndpoint(t *testing.T) {
	t.Parallel()
	cfg := demoConfig(t, 0)
	cfg.Debug.Listen = "127.0.0.1:0"
	a, conn, stop := apptest.ServeAgent(t, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	addr := a.DebugAddr()
	if addr == "" {
		t.Fatal("DebugAddr is empty with debug.listen set")
	}
	if body := get(t, "http://"+addr+"/debug/pprof/"); !strings.Contains(body, "goroutine") {
		t.Errorf("GET /debug/pprof/ lists no goroutine profile:\n%s", body)
	}
	if body := get(t, "http://"+addr+"/debug/pprof/goroutine?debug=1"); !strings.Contains(body, "goroutine profile:") {
		t.Errorf("GET /debug/pprof/goroutine?debug=1:\n%s", body)
	}
	allocs := func() (bytes, objects float64) {
		var m map[string]float64
		if err := json.Unmarshal([]byte(get(t, "http://"+addr+"/debug/runtime")), &m); err != nil {
			t.Fatal(err)
		}
		return m["/gc/heap/allocs:bytes"], m["/gc/heap/allocs:objects"]
	}
	b0, o0 := allocs()
	generate(t, agentdv1.NewAgentServiceClient(conn), demoStart(t))
	if b1, o1 := allocs(); b0 == 0 || b1 <= b0 || o1 <= o0 {
		t.Errorf("allocations before and after a generation: %v bytes, %v objects, then %v, %v", b0, o0, b1, o1)
	}
	stop()
	if _, err := http.Get("http://" + addr + "/debug/runtime"); err == nil {
		t.Error("the debug endpoint still answers after agentd stopped")
	}
}

// TestDebugOffByDefault: no profiling endpoint unless asked.
func TestDebugOffByDefault(t *testing.T) {
	t.Parallel()
	a, _, _ := apptest.ServeAgent(t, app.Options{Config: demoConfig(t, 0), Logger: slog.New(slog.DiscardHandler)})
	if d := a.DebugAddr(); d != "" {
		t.Errorf("DebugAddr = %q without debug.listen", d)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", url, resp.StatusCode, body)
	}
	return string(body)
}
