package httpc

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/providers"
	"github.com/agentd/agentd/providers/internal/ndjson"
	"github.com/agentd/agentd/providers/internal/sse"
)

// NewHTTPClient returns the HTTP client of an adapter configured by s:
// s.HTTP when set; otherwise one whose response must begin within
// s.Timeout and whose streamed response may not go silent for longer
// (keep-alive comments count as data, so a provider that queues a request
// while sending them is waited for), connecting through s.Dial when set.
func NewHTTPClient(s providers.Settings) *http.Client {
	if s.HTTP != nil {
		return s.HTTP
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = timeout
	// As many idle connections to the provider as concurrent generations
	// keep streams open: the default 2 per host makes a third concurrent
	// stream dial anew and a finished one close.
	t.MaxIdleConns, t.MaxIdleConnsPerHost = maxIdleConns, maxIdleConns
	if s.Dial != nil {
		t.DialContext = s.Dial
		t.Proxy = nil // connections go where Dial takes them
	}
	return &http.Client{Transport: idleTransport{base: t, idle: timeout}}
}

// idleTransport fails a response body read that waits longer than idle.
type idleTransport struct {
	base http.RoundTripper
	idle time.Duration
}

func (t idleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &idleBody{ReadCloser: resp.Body, cancel: cancel, idle: t.idle}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// wrapped transport.
func (t idleTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// idleBody cancels its request when a read waits longer than idle. Once
// it has, every failed read reports the silence (errIdle), whichever read
// the cancellation reached.
type idleBody struct {
	io.ReadCloser
	cancel  context.CancelFunc
	idle    time.Duration
	expired atomic.Bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	timer := time.AfterFunc(b.idle, func() {
		b.expired.Store(true)
		b.cancel()
	})
	n, err := b.ReadCloser.Read(p)
	timer.Stop()
	if err != nil && b.expired.Load() {
		return n, &idleError{idle: b.idle}
	}
	return n, err
}

// maxIdleConns bounds the idle connections an adapter keeps to its
// provider.
const maxIdleConns = 64

// Drain bounds: what Finish reads of a response past its terminal event,
// at most, for its connection to be reused.
const (
	drainBytes = 64 << 10
	drainTime  = time.Second
)

// Finish closes a streamed response's body. While ctx lives, it first
// reads what is left of it, at most drainBytes for at most drainTime:
// an adapter returns at the turn's terminal event, a moment before the
// body's end, and a body closed before its end takes its connection
// with it, so that the next turn dials anew. A body of a client the
// adapter was given (providers.Settings.HTTP) is only closed: its reads
// have no bound.
func Finish(ctx context.Context, body io.ReadCloser) {
	if b, ok := body.(*idleBody); ok && ctx.Err() == nil {
		timer := time.AfterFunc(drainTime, b.cancel)
		_, _ = io.CopyN(io.Discard, b.ReadCloser, drainBytes)
		timer.Stop()
	}
	_ = body.Close()
}

func (b *idleBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// idleError is the failure of a read that waited longer than idle.
type idleError struct{ idle time.Duration }

func (e *idleError) Error() string { return "the provider sent nothing for " + e.idle.String() }

// Timeout marks the error as a timeout, as net.Error does.
func (e *idleError) Timeout() bool { return true }

// StreamError classifies the failure to read a response stream after it
// began, the one rule every adapter follows:
//
//   - the caller's context ended: its error, as is;
//   - the stream went silent for longer than the adapter's timeout (or
//     another read deadline passed): Timeout, "<provider>: the response
//     stream sent nothing for <timeout>";
//   - an event or line too large to read: Unavailable, saying so;
//   - anything else, the stream cut short (it ended before the turn's
//     terminal event, or the connection was reset): Unavailable,
//     "<provider>: the response stream ended before it was complete".
//
// An adapter whose stream reaches io.EOF before its terminal event passes
// io.EOF (or io.ErrUnexpectedEOF). The idle and cut-short faults carry an
// ErrorInfo (PROVIDER_STREAM_IDLE, PROVIDER_STREAM_TRUNCATED) naming the
// provider. The cause's text, which may name addresses, is never shown.
func StreamError(ctx context.Context, provider string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	info := map[string]string{"provider": provider}
	var idle *idleError
	var timeout interface{ Timeout() bool }
	switch {
	case errors.As(err, &idle):
		return fault.Hide(fault.Timeout, err, "%s: the response stream sent nothing for %s", provider, idle.idle).
			WithInfo("PROVIDER_STREAM_IDLE", info)
	case errors.As(err, &timeout) && timeout.Timeout():
		return fault.Hide(fault.Timeout, err, "%s: the response stream sent nothing before its read deadline", provider).
			WithInfo("PROVIDER_STREAM_IDLE", info)
	case errors.Is(err, sse.ErrEventTooLarge), errors.Is(err, ndjson.ErrLineTooLarge):
		return fault.Wrap(fault.Unavailable, err, "%s", provider)
	}
	return fault.Hide(fault.Unavailable, err, "%s: the response stream ended before it was complete", provider).
		WithInfo("PROVIDER_STREAM_TRUNCATED", info)
}
