package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"google.golang.org/grpc/codes"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// outcome is how this replica's run of the generation ended, after run
// returned err: the state its record settles in, and the outcome of
// agentd.generations.ended.
func (g *generation) outcome(ctx context.Context, err error) (store.State, string) {
	switch {
	case err == nil && g.pausedNow:
		return store.Paused, outcomePaused
	case err == nil:
		return store.Completed, outcomeCompleted
	case g.handedOver(ctx, err):
		return store.Running, outcomeReleased
	case g.resume != nil && !g.resume.progressed:
		// A resume that failed within its paused turn leaves the pause to
		// resume again (failed): the record stays paused too.
		return store.Paused, outcomePaused
	case g.cancelled(err):
		return store.Cancelled, outcomeCancelled
	default:
		return store.Failed, outcomeFailed
	}
}

// handedOver reports whether a run that ended with err goes on elsewhere:
// its lease went to another replica, which runs it now, or agentd stops
// under it and another replica adopts it.
func (g *generation) handedOver(ctx context.Context, err error) bool {
	if fault.KindOf(err) == fault.Conflict && g.journal != nil && g.journal.Lost() {
		return true
	}
	return g.s.stopping.Load() && (errors.Is(err, errStopping) || errors.Is(context.Cause(ctx), errStopping) || g.link.gone() != nil)
}

// cancelled reports whether a run that ended with err was cancelled: by
// its client, or because its client went away.
func (g *generation) cancelled(err error) bool {
	return errors.Is(err, errClientCancelled) || g.link.gone() != nil || fault.KindOf(err) == fault.Canceled
}

// logEnd writes the one line of a generation's end, after run returned
// err and its record was settled: "generation ended" with its id, tenant,
// provider, model, this run's tokens, tool calls, model turns and
// duration, and its outcome, with the gRPC code of a failure or a
// cancellation. Completed, paused and cancelled are info; failed is warn,
// or error when the failure is INTERNAL (ours). A run that does not end
// the generation — handed to another replica as agentd stops, or whose
// lease another replica took — logs no end: the replica that continues
// it will.
//
// The line carries no secret: no request text, no credentials, no
// server URL; err is the error as the client's status says it.
func (g *generation) logEnd(ctx context.Context, err error) {
	if err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
	}
	_, outcome := g.outcome(ctx, err)
	switch {
	case outcome == outcomeReleased && fault.KindOf(err) == fault.Conflict:
		g.s.log.InfoContext(ctx, "generation taken over: another replica holds its lease", "generation", g.id, "tenant", g.tenant)
		return
	case outcome == outcomeReleased:
		g.s.log.InfoContext(ctx, "generation handed over: agentd is stopping", "generation", g.id, "tenant", g.tenant)
		return
	case outcome == outcomePaused && err != nil:
		// A resume that failed (or was cancelled) within its paused
		// turn: the pause stays, and this run ended so.
		outcome = outcomeFailed
		if g.cancelled(err) {
			outcome = outcomeCancelled
		}
	}
	level, attrs := g.endAttrs(outcome, err)
	g.s.log.LogAttrs(ctx, level, "generation ended", attrs...)
}

// endAttrs are the level and attributes of a run's end line, given its
// outcome and err.
func (g *generation) endAttrs(outcome string, err error) (slog.Level, []slog.Attr) {
	var provider, model string
	if g.plan != nil {
		provider, model = g.plan.agent.GetProvider(), g.plan.agent.GetModel()
	}
	attrs := []slog.Attr{
		slog.String("generation", g.id),
		slog.String("tenant", g.tenant),
		slog.String("provider", provider),
		slog.String("model", model),
		slog.Int64("input_tokens", g.ran.input),
		slog.Int64("output_tokens", g.ran.output),
		slog.Int64("cached_tokens", g.ran.cache),
		slog.Int64("tool_calls", g.ran.toolCalls.Load()),
		slog.Int("turns", g.ran.turns),
		slog.Int64("duration", time.Since(g.ran.began).Milliseconds()),
		slog.String("outcome", outcome),
	}
	attrs = append(attrs, costAttrs(g.ran.spent.GetCost())...)
	if lr := g.lim.reached; lr != nil {
		attrs = append(attrs, slog.String("limit", lr.GetName()))
	}
	switch outcome {
	case outcomeCancelled:
		return slog.LevelInfo, append(attrs, slog.String("code", codeName(codes.Canceled)))
	case outcomeFailed:
		code := fault.Status(err).Code()
		level := slog.LevelWarn
		if code == codes.Internal {
			level = slog.LevelError
		}
		return level, append(attrs, slog.String("code", codeName(code)), slog.String("err", err.Error()))
	}
	return slog.LevelInfo, attrs
}

// codeName is a gRPC code's canonical name: DEADLINE_EXCEEDED, not
// grpc-go's DeadlineExceeded.
func codeName(c codes.Code) string {
	if c == codes.Canceled {
		return "CANCELLED" // the protocol's spelling
	}
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}
