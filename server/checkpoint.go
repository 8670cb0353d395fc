package server

import (
	"maps"
	"slices"
	"sync"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
)

// conversation is the part of a checkpoint, paused or running, that says
// where the generation is: its conversation, usage and tool turns, the
// turn it is in, and the answers it has had.
func (g *generation) conversation(turn *statev1.PausedTurn) *statev1.Checkpoint {
	cp := &statev1.Checkpoint{
		Version:      record.Version,
		GenerationId: g.id,
		Provider:     g.plan.agent.GetProvider(),
		Model:        g.plan.agent.GetModel(),
		Messages:     g.messages,
		Added:        g.added,
		Usage:        g.total,
		ToolTurns:    int32(g.toolTurns),
		Turn:         turn,
		Answered:     g.answered.list(),
		EndUser:      g.endUser,
	}
	// The start's span context, for the later runs' links.
	record.SetOrigin(cp, g.origin)
	return cp
}

// snapshot encodes the generation's running checkpoint: its conversation
// and, inside a tool turn, the turn (its calls, and the results of those
// that finished), with its agent.
func (g *generation) snapshot(turn *statev1.PausedTurn) []byte {
	cp := g.conversation(turn)
	g.agent.Put(cp)
	cp.Detached = g.detached
	cp.Resuming = g.resume != nil && !g.resume.progressed
	return record.Encode(cp)
}

// checkpoint queues the generation's checkpoint, covering every event
// numbered so far, for its record; a no-op without one.
func (g *generation) checkpoint(turn *statev1.PausedTurn) {
	if g.journal == nil {
		return
	}
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	g.journal.Checkpoint(g.snapshot(turn))
}

// setState records that the generation, in tool turn r, waits on its
// client or runs again, with the turn's checkpoint.
func (g *generation) setState(st store.State, r *turnRun) {
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	g.journal.SetState(st, g.snapshot(r.runningState()))
}

// runningState is a tool turn's calls and the results it has, for a
// running generation's checkpoint: a call without a result has no state.
func (r *turnRun) runningState() *statev1.PausedTurn {
	t := &statev1.PausedTurn{Turn: int32(r.turn), Calls: r.calls, States: make([]*statev1.CallState, len(r.calls))}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range r.calls {
		st := &statev1.CallState{}
		if res := r.results[i]; res != nil {
			st.State = &statev1.CallState_Result{Result: res}
		} else if r.begun[c.GetId()] {
			t.Started = append(t.Started, c.GetId())
		}
		t.States[i] = st
	}
	return t
}

// answerSet holds the approval and function-call ids a generation has had
// answered: a repeated answer is ignored. Safe for concurrent use (a
// checkpoint lists them while a call's goroutine finishes).
type answerSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (a *answerSet) add(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ids == nil {
		a.ids = make(map[string]bool)
	}
	a.ids[id] = true
}

func (a *answerSet) has(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ids[id]
}

// list returns the ids, sorted.
func (a *answerSet) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(maps.Keys(a.ids))
}
