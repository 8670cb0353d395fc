package record

import (
	"context"

	"google.golang.org/protobuf/proto"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/store"
)

// Since is what a running generation's log says happened after its last
// checkpoint, for the replica that adopts it: the checkpoint says where
// the generation was, the log what it did since.
type Since struct {
	// WithdrawFrom is the first event of a model turn that may have been
	// cut short: at a turn boundary, its first event logged; otherwise
	// (none logged, or inside a tool turn, which the dead replica may have
	// finished and gone on from) the number after the log's end, since
	// its text may have been shown before it was stored.
	WithdrawFrom int64
	// Started holds the calls of the checkpoint's tool turn whose start
	// the checkpoint lists or the log holds after it: an MCP call among
	// them may have run.
	Started map[string]bool
}

// ReadSince reads what rec's log holds after its checkpoint, cp.
func ReadSince(ctx context.Context, gens store.Generations, rec store.Generation, cp *statev1.Checkpoint) (Since, error) {
	turn := cp.GetTurn()
	s := Since{Started: make(map[string]bool)}
	// Inside a tool turn, the starts the checkpoint covers (another call's
	// result, written with a later checkpoint, covers every event before
	// it) are listed in it; the log after it has the later ones.
	for _, id := range turn.GetStarted() {
		s.Started[id] = true
	}
	for after := rec.CheckpointSeq; after < rec.LastSeq; {
		evs, err := gens.Read(ctx, rec.Tenant, rec.ID, after, 0)
		if err != nil {
			return s, err
		}
		if len(evs) == 0 {
			break
		}
		for _, e := range evs {
			s.note(e, turn)
		}
		after = evs[len(evs)-1].Seq
	}
	if s.WithdrawFrom == 0 {
		s.WithdrawFrom = rec.LastSeq + 1
	}
	return s, nil
}

// note takes in one logged event.
func (s *Since) note(e store.Event, turn *statev1.PausedTurn) {
	ev := &agentdv1.GenerateResponse{}
	if proto.Unmarshal(e.Data, ev) != nil {
		return
	}
	switch k := ev.GetEvent().(type) {
	case *agentdv1.GenerateResponse_TextDelta, *agentdv1.GenerateResponse_ProviderToolCall, *agentdv1.GenerateResponse_Usage:
		if turn == nil && s.WithdrawFrom == 0 {
			s.WithdrawFrom = e.Seq
		}
	case *agentdv1.GenerateResponse_ToolCallStarted:
		if turn != nil && k.ToolCallStarted.GetTurn() == turn.GetTurn() {
			s.Started[k.ToolCallStarted.GetCallId()] = true
		}
	}
}
