package server

import (
	"context"
	"sync"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	"github.com/agentd/agentd/internal/bridgeclient"
	"github.com/agentd/agentd/internal/fault"
)

// sessionLife is a generation's bridge session as the generation holds it:
// the context the session lives in, and the gate its servers' requests
// pass on their way to the generation.
//
// Stopping a session's processes takes time that is the servers', not the
// generation's: a stdio server gets terminate_grace to exit after its
// stdin closes, and some take hundreds of milliseconds (server-everything
// waits out a 350 ms timer). So a generation does not wait for it: once
// the generation is over, its session is closed on a goroutine the
// Service owns, while the generation's stream ends. The processes stay
// counted in their pools until they have stopped, and the Service's Close
// waits for every such close, so that none outlives agentd's shutdown.
type sessionLife struct {
	s *Service
	// ctx is the session's lifetime: the generation's while it runs (a
	// cancelled generation's session is cut at once), then its own until
	// its close is done, so that the close ends the session's streams with
	// OK rather than as cancelled.
	ctx    context.Context
	cancel context.CancelFunc
	detach func() bool // stops the generation's end from reaching ctx

	// The servers' requests (X-M1, X-M4, X-M5) reach the generation only
	// while it runs: its end cancels those under way (asking) and refuses
	// later ones, which find its stream already closed.
	g      *generation
	mu     sync.Mutex
	over   bool
	asking sync.WaitGroup
	stop   context.CancelFunc // ends the requests under way
	asked  context.Context
}

// newSessionLife returns the life of a session that g, running in ctx,
// is about to open.
func (g *generation) newSessionLife(ctx context.Context) *sessionLife {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	asked, stop := context.WithCancel(context.Background())
	return &sessionLife{s: g.s, g: g, ctx: sctx, cancel: cancel, detach: context.AfterFunc(ctx, cancel), asked: asked, stop: stop}
}

// Answer hands r to the generation while it runs.
func (l *sessionLife) Answer(ctx context.Context, r *bridgev1.ServerRequest) *bridgev1.AnswerServerRequestRequest {
	l.mu.Lock()
	if l.over {
		l.mu.Unlock()
		return bridgeclient.Refusal(fault.New(fault.Canceled, "the generation is over"))
	}
	l.asking.Add(1)
	l.mu.Unlock()
	defer l.asking.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.asked, cancel)()
	return l.g.Answer(ctx, r)
}

// end is called once the generation is over, with the session it opened
// (nil if none opened). It returns once no server request touches the
// generation any more, and closes the session without waiting for it,
// unless the Service is closing.
func (l *sessionLife) end(sess bridgeclient.Session) {
	l.mu.Lock()
	l.over = true
	l.mu.Unlock()
	l.stop()
	l.asking.Wait()
	l.detach()
	if sess == nil {
		l.cancel()
		return
	}
	closeSession := func() {
		sess.Close(l.ctx)
		l.cancel()
	}
	if !l.s.goBackground(closeSession) {
		closeSession()
	}
}
