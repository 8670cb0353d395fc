//go:build stress

package faultsuite

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// TestConcurrentFaults runs, on one agentd, rounds of generations side by
// side that each meet a different fault: a crash, a hang, a flood, an
// over-large result, and a well-behaved call. Each gets its own outcome,
// all but the hangs complete (a crash is data for the model, X-L8), and
// nothing leaks once they are done.
func TestConcurrentFaults(t *testing.T) {
	s := newStack(t)
	type kind struct {
		name  string
		turns []map[string]any
		srv   string
		code  codes.Code
		wait  time.Duration // read_timeout
	}
	// A hang holds its process until read_timeout; a call that cannot get
	// one of the pool's processes within its own read_timeout is refused
	// as ResourceExhausted, which a hang may meet too.
	busy := codes.ResourceExhausted
	kinds := []kind{
		{"crash", []map[string]any{call("crash", nil), say}, "tools", codes.OK, time.Minute}, // X-L8: data for the model
		{"hang", []map[string]any{call("hang", nil), say}, "tools", codes.DeadlineExceeded, time.Second},
		{"flood", []map[string]any{call("flood", map[string]any{"lines": 2000}), say}, "noisy", codes.OK, time.Minute},
		{"big", []map[string]any{call("big", map[string]any{"size": 4 << 20}), say}, "tools", codes.OK, time.Minute},
		{"echo", []map[string]any{call("echo", map[string]any{"text": "fine"}), say}, "tools", codes.OK, time.Minute},
	}
	const rounds, each = 5, 4
	for round := range rounds {
		var wg sync.WaitGroup
		for _, k := range kinds {
			for range each {
				wg.Add(1)
				go func() {
					defer wg.Done()
					o := s.run(t, t.Context(), scripted(t, k.turns, ref(k.srv, k.wait)))
					if got := o.status.Code(); got != k.code && !(k.name == "hang" && got == busy) {
						t.Errorf("round %d, %s: %v %q; want %v", round, k.name, o.status.Code(), o.status.Message(), k.code)
					}
				}()
			}
		}
		wg.Wait()
	}
}
