// Package gctune paces the garbage collector of a server whose live heap
// is small next to the memory it may use.
//
// Go's default pace (GOGC=100) starts a collection each time the heap has
// grown by as much as survived the last one. agentd keeps a few MiB alive
// while each generation allocates about half a MiB and throws it away, so
// under load that default collects many times a second, and the
// collector, with the write barriers and mark assists it imposes while it
// runs, becomes a large share of agentd's CPU.
//
// A Tuner, after every collection, sets GOGC so that the next one starts
// when the heap reaches a floor (64 MiB by default) if the live heap is
// small, and at Go's default pace once the live heap is half the floor or
// more: the heap target is max(floor, 2 × live). It trades at most the
// floor's bytes of memory for fewer collections. GOMEMLIMIT, when set,
// still bounds the heap. A GOGC set in the environment is the operator's
// choice, and a Tuner then changes nothing.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultPercent is Go's default GOGC.
const DefaultPercent = 100

// Percent is the GOGC that makes a heap with live bytes alive after a
// collection start the next one at floor bytes, and never less than
// DefaultPercent. A live heap of 0 (nothing measured yet) gets
// DefaultPercent.
func Percent(live, floor uint64) int {
	if live == 0 || floor <= 2*live {
		return DefaultPercent
	}
	// floor = live × (1 + p/100)
	p := (floor - live) * 100 / live
	return int(min(p, 1<<20))
}

// Tuner sets GOGC after each collection (Percent) until Stop.
type Tuner struct {
	floor uint64

	mu      sync.Mutex
	stopped bool
	percent int    // the GOGC set last
	live    uint64 // the live heap it was set for
	samples []metrics.Sample
}

// Start starts a Tuner keeping the heap target at floor bytes or more. It
// returns nil, and changes nothing, when floor is 0 or the environment
// sets GOGC.
func Start(floor uint64) *Tuner {
	if floor == 0 {
		return nil
	}
	if _, set := os.LookupEnv("GOGC"); set {
		return nil
	}
	t := &Tuner{floor: floor, percent: DefaultPercent, samples: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.tune()
	t.arm()
	return t
}

// sentinel is a heap object whose only use is to become unreachable: its
// cleanup runs once the collection that found it so has ended. It is 16
// bytes or more: smaller objects without pointers share blocks (Go's tiny
// allocator), and a cleanup on one may never run.
type sentinel struct{ _ [16]byte }

// arm registers the cleanup that tunes after the next collection, and
// arms again. The runtime runs cleanups on its own goroutine, so a Tuner
// has none to join.
func (t *Tuner) arm() {
	runtime.AddCleanup(&sentinel{}, func(t *Tuner) {
		if t.tune() {
			t.arm()
		}
	}, t)
}

// tune sets GOGC for the live heap the last collection measured; false
// once stopped.
func (t *Tuner) tune() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.samples)
	var live uint64
	if v := t.samples[0].Value; v.Kind() == metrics.KindUint64 {
		live = v.Uint64()
	}
	t.live = live
	if p := Percent(live, t.floor); p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
	return true
}

// Stop stops tuning and restores Go's default pace. A nil Tuner's Stop
// does nothing.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	if t.percent != DefaultPercent {
		debug.SetGCPercent(DefaultPercent)
	}
}
