package bridge

import (
	"context"
	"runtime"
	"sync"
	"testing"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/fault"
)

// TestAsksBounded: a session's servers may have at most maxAsks requests
// waiting for agentd at once (each may become a person's question); one
// more is refused at once, ResourceExhausted, and the waiting ones end
// with the session.
func TestAsksBounded(t *testing.T) {
	s := &session{asks: make(chan *bridgev1.ServerRequest), waiting: make(map[uint64]chan *bridgev1.AnswerServerRequestRequest), done: make(chan struct{})}
	var wg sync.WaitGroup
	for range maxAsks {
		wg.Go(func() {
			if _, err := s.ask(context.Background(), &bridgev1.ServerRequest{ServerName: "asker"}); err != errSessionClosed {
				t.Errorf("a waiting question ended with %v, want the session's close", err)
			}
		})
	}
	// The questions register before they are sent, and nobody reads
	// them: wait until all are registered.
	for {
		s.askMu.Lock()
		n := len(s.waiting)
		s.askMu.Unlock()
		if n == maxAsks {
			break
		}
		runtime.Gosched()
	}
	if _, err := s.ask(context.Background(), &bridgev1.ServerRequest{ServerName: "asker"}); fault.KindOf(err) != fault.Exhausted {
		t.Errorf("question %d: %v, want ResourceExhausted", maxAsks+1, err)
	}
	close(s.done)
	wg.Wait()
}
