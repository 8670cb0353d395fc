package server

import (
	"context"
	"errors"
	"time"
)

// The answers a running tool call waits for on the stream: to an
// authorization request (X-M2), an input request (X-M4) or a sampling
// approval request (X-M5). Unlike
// approval decisions and function results, which the loop takes between
// turns, they come while calls run, each to the call that asked, so the
// mailbox keeps them by request id and wakes every waiter.

var (
	errUnanswered    = errors.New("the client answers nothing more")
	errAnswerTimeout = errors.New("the client did not answer in time")
)

// expect registers request id as waiting for its answer; call it before
// the request goes to the client.
func (m *mailbox) expect(id string) {
	m.mu.Lock()
	m.expected[id] = true
	m.mu.Unlock()
}

// keep stores the answer to request id for its waiter. An answer that no
// request waits for (unknown, or its request ended meanwhile) is
// dropped, so a client cannot fill the mailbox.
func (m *mailbox) keep(id string, answer any) {
	m.update(func() {
		if m.expected[id] {
			m.keyed[id] = answer
		}
	})
}

// await waits for the client's answer to request id, which expect
// registered. It fails with errUnanswered once the client answers nothing
// more, errAnswerTimeout after timeout, or ctx's cause; the request then
// waits no more.
func (m *mailbox) await(ctx context.Context, id string, timeout time.Duration) (any, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	defer func() {
		m.mu.Lock()
		delete(m.expected, id)
		delete(m.keyed, id)
		m.mu.Unlock()
	}()
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
