package server

import (
	"context"
	"errors"
	"time"
)

// The answers a running tool call waits for on the stream: to an
// authorization request (X-M2) or an input request (X-M4). Unlike
// approval decisions and function results, which the loop takes between
// turns, they come while calls run, each to the call that asked, so the
// mailbox keeps them by request id and wakes every waiter.

var (
	errUnanswered    = errors.New("the client answers nothing more")
	errAnswerTimeout = errors.New("the client did not answer in time")
)

// keep stores the answer to request id for its waiter. An answer that no
// request waits for (it ended meanwhile) stays untaken; the map is
// bounded, so a client cannot grow it without end.
func (m *mailbox) keep(id string, answer any) {
	m.update(func() {
		if _, ok := m.keyed[id]; ok || len(m.keyed) < maxKeyed {
			m.keyed[id] = answer
		}
	})
}

// await waits for the client's answer to request id. It fails with
// errUnanswered once the client answers nothing more, errAnswerTimeout
// after timeout, or ctx's cause.
func (m *mailbox) await(ctx context.Context, id string, timeout time.Duration) (any, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		m.mu.Lock()
		answer, ok := m.keyed[id]
		delete(m.keyed, id)
		ended, changed := m.ended, m.changed
		m.mu.Unlock()
		switch {
		case ok:
			return answer, nil
		case ended:
			return nil, errUnanswered
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, errAnswerTimeout
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}
