package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/proctable"
)

// snapshot is this process's state at one moment.
type snapshot struct {
	RSS        int64 `json:"rss_bytes"` // VmRSS
	Goroutines int   `json:"goroutines"`
	Children   int   `json:"children"` // live (not zombie) child processes
	// LiveHeap is the heap the last GC found live; the baseline and settled
	// snapshots force a GC first. 0 where not measured.
	LiveHeap int64 `json:"live_heap_bytes,omitempty"`
}

// take reads the process's state; withGC forces collections first, so
// LiveHeap is exact: two, since the first only moves sync.Pool caches to
// their victim caches, which stay live until the second.
func take(withGC bool) snapshot {
	s := snapshot{Goroutines: runtime.NumGoroutine(), Children: len(proctable.Children())}
	if withGC {
		runtime.GC()
		runtime.GC()
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			s.LiveHeap = int64(sample[0].Value.Uint64())
		}
	}
	s.RSS, _ = statusBytes("VmRSS")
	return s
}

// max keeps the higher of each figure.
func (s snapshot) max(o snapshot) snapshot {
	return snapshot{RSS: max(s.RSS, o.RSS), Goroutines: max(s.Goroutines, o.Goroutines), Children: max(s.Children, o.Children)}
}

// statusBytes reads a "kB" field of /proc/self/status (VmRSS, VmHWM).
func statusBytes(field string) (int64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/self/status %s: %w", field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/self/status has no %s", field)
}
