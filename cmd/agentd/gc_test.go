package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/logtest"
)

// gogc is the GOGC in force.
func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestServePacesTheCollector: `agentd serve` paces the garbage collector to
// gc_heap_floor_mib while it runs (GOGC above Go's default once a
// collection has measured the small live heap), says so in its log, and
// gives the default back when it stops.
func TestServePacesTheCollector(t *testing.T) {
	t.Setenv("GOGC", "") // restored after the test
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	if gogc() != 100 {
		t.Skipf("GOGC is %d in this process; the test needs Go's default", gogc())
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "agentd.yaml")
	cfg := fmt.Sprintf("listen: 127.0.0.1:0\nshutdown_drain: 0s\nstate_dir: %s\nbridge: {pool: {warm: 0}}\ngc_heap_floor_mib: 1024\n", filepath.Join(dir, "state"))
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs logtest.Logs
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- serveReloading(ctx, []string{"--config", path}, &logs, make(chan os.Signal)) }()
	stop := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	deadline := time.Now().Add(time.Minute) // a margin a loaded machine keeps (X-H6)
	for !strings.Contains(logs.String(), "agentd serving") || gogc() <= 100 {
		select {
		case err := <-done:
			t.Fatalf("serve = %v; log:\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("GOGC %d while serving with a floor of 1 GiB; want more than 100. Log:\n%s", gogc(), logs.String())
		}
		runtime.GC() // the pace is set after a collection
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "gc_heap_floor_mib=1024") {
		t.Errorf("the log does not name the floor:\n%s", logs.String())
	}
	stop()
	if got := gogc(); got != 100 {
		t.Errorf("GOGC after serve returned: %d; want Go's default, 100", got)
	}
}
