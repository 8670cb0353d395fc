package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"google.golang.org/grpc/codes"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
)

// runStats is what one run of a generation (from its start, its resume or
// its adoption to its end on this replica) used, for the line its end
// logs (X-O4). A resumed generation's line counts only what the resume
// used, so that adding up the lines of a generation counts nothing twice.
type runStats struct {
	began                time.Time
	input, output, cache int64 // tokens; cache: cache reads
	turns                int   // model turns asked
	// toolCalls counts the calls that got a result (finishCall): MCP
	// calls, function results, calls to unknown tools, adopted calls of
	// unknown outcome; a call declined by approval ran nothing and is not
	// counted. MCP calls finish on goroutines of their own.
	toolCalls atomic.Int64
}

// modelTurn notes one model turn and its usage.
func (s *runStats) modelTurn(u *agentdv1.Usage) {
	s.input += u.GetInputTokens()
	s.output += u.GetOutputTokens()
	s.cache += u.GetCacheReadInputTokens()
}

// logEnd writes the one line of a generation's end (X-O4), after run
// returned err and its record was settled: "generation ended" with its
// id, tenant, provider, model, this run's tokens, tool calls, model turns
// and duration, and its outcome, with the gRPC code of a failure or a
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
	if outcome == outcomeReleased {
		if fault.KindOf(err) == fault.Conflict {
			g.s.log.InfoContext(ctx, "generation taken over: another replica holds its lease", "generation", g.id, "tenant", g.tenant)
		} else {
			g.s.log.InfoContext(ctx, "generation handed over: agentd is stopping", "generation", g.id, "tenant", g.tenant)
		}
		return
	}
	if outcome == outcomePaused && err != nil {
		// A resume that failed (or was cancelled) within its paused
		// turn: the pause stays, and this run ended so.
		outcome = outcomeFailed
		if errors.Is(err, errClientCancelled) || g.link.gone() != nil || fault.KindOf(err) == fault.Canceled {
			outcome = outcomeCancelled
		}
	}
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
	}
	level := slog.LevelInfo
	attrs = append(attrs, slog.String("outcome", outcome))
	switch outcome {
	case outcomeCancelled:
		attrs = append(attrs, slog.String("code", codeName(codes.Canceled)))
	case outcomeFailed:
		code := fault.Status(err).Code()
		level = slog.LevelWarn
		if code == codes.Internal {
			level = slog.LevelError
		}
		attrs = append(attrs, slog.String("code", codeName(code)), slog.String("err", err.Error()))
	}
	g.s.log.LogAttrs(ctx, level, "generation ended", attrs...)
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
