package bridge

import (
	"sync"
	"time"

	"github.com/agentd/agentd/bridge/internal/mcpconn"
	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
)

// progressInterval is the least time between two progress responses of
// one call: at most ten a second go to the client, whatever the
// server sends.
const progressInterval = 100 * time.Millisecond

// progressRelay passes a streamed call's progress reports to its stream,
// at most one per progressInterval: a report that comes sooner waits, and
// a later one replaces it (the latest is what matters). The reports reach
// it on the connection's reader, which must not wait on the client, so a
// goroutine of its own, started at the first report and joined by close,
// does the sending.
type progressRelay struct {
	send func(*bridgev1.ToolProgress) // blocks until the stream takes it
	wake chan struct{}                // a report is pending
	end  chan struct{}                // closed by close
	done chan struct{}                // closed when the goroutine returns

	mu      sync.Mutex
	latest  *bridgev1.ToolProgress // not sent yet
	started bool
	ended   bool
}

func newProgressRelay(send func(*bridgev1.ToolProgress)) *progressRelay {
	return &progressRelay{send: send, wake: make(chan struct{}, 1), end: make(chan struct{}), done: make(chan struct{})}
}

// note takes one report; it never blocks. Reports after close are
// dropped: the call's answer has gone, or is going.
func (r *progressRelay) note(p mcpconn.Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	r.latest = &bridgev1.ToolProgress{Progress: p.Progress, Total: p.Total, Message: p.Message}
	if !r.started {
		r.started = true
		go r.run()
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *progressRelay) run() {
	defer close(r.done)
	var last time.Time // of the last send; zero: none yet
	for {
		select {
		case <-r.wake:
		case <-r.end:
			r.flush()
			return
		}
		if !last.IsZero() {
			if wait := progressInterval - time.Since(last); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-r.end:
					t.Stop()
					r.flush()
					return
				}
			}
		}
		r.flush()
		last = time.Now()
	}
}

// flush sends the pending report, if any.
func (r *progressRelay) flush() {
	r.mu.Lock()
	p := r.latest
	r.latest = nil
	r.mu.Unlock()
	if p != nil {
		r.send(p)
	}
}

// close ends the relay once the call has returned: the pending report,
// the call's last state, is sent at once, whatever the rate, so that it
// comes before the answer. It returns once it is sent.
func (r *progressRelay) close() {
	r.mu.Lock()
	r.ended = true
	started := r.started
	r.mu.Unlock()
	close(r.end)
	if started {
		<-r.done
	}
}
