package record_test

import (
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/testwait"
)

func newStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.OpenSQLite(filepath.Join(t.TempDir(), "agentd.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// pause stores a paused checkpoint of generation id that waits for one
// approval, and returns it as the store holds it.
func pause(t *testing.T, cps store.Checkpoints, id string) (store.Record, *statev1.Checkpoint) {
	t.Helper()
	call := &agentdv1.ToolCall{Id: "call_1", Name: "echo"}
	cp := &statev1.Checkpoint{Version: record.Version, GenerationId: id, ExpiresAt: timestamppb.New(time.Now().Add(time.Hour)),
		Turn: &statev1.PausedTurn{Turn: 1, Calls: []*agentdv1.ToolCall{call}, States: []*statev1.CallState{{
			State: &statev1.CallState_Approval{Approval: &agentdv1.ApprovalRequest{Id: "approval_call_1", ToolCallId: "call_1"}},
		}}}}
	data, err := proto.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	if err := cps.Save(t.Context(), "t", id, data, time.Now().Add(time.Hour), 0); err != nil {
		t.Fatal(err)
	}
	rec, got, err := record.LoadPaused(t.Context(), cps, "t", id)
	if err != nil {
		t.Fatal(err)
	}
	return rec, got
}

var approved = &statev1.Claim{ApprovalDecisions: []*agentdv1.ApprovalDecision{{RequestId: "approval_call_1", Approved: true}}}

// R-A8: of two resumes of one pause, one claims it; the claim of the
// other, made on the same version, is a Conflict, and so is a resume
// that finds the pause claimed by a live resume.
func TestClaimOnce(t *testing.T) {
	t.Parallel()
	cps := store.Checkpoints(newStore(t))
	rec, cp := pause(t, cps, "gen_1")
	if _, err := record.ClaimPaused(t.Context(), cps, "t", rec, cp, approved, time.Hour); err != nil {
		t.Fatalf("the first claim: %v", err)
	}
	if _, err := record.ClaimPaused(t.Context(), cps, "t", rec, cp, approved, time.Hour); fault.KindOf(err) != fault.Conflict {
		t.Fatalf("the second claim of the same version: %v; want a Conflict", err)
	}
	rec, cp, err := record.LoadPaused(t.Context(), cps, "t", "gen_1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := record.Interrupted(rec, cp, time.Hour); fault.KindOf(err) != fault.Conflict {
		t.Fatalf("a resume of a pause that a live resume holds: %v; want a Conflict", err)
	}
}

// R-A8: a claim left by a resume that died says what may have run: the
// next resume, once it is stale, learns that the approved call may have
// run.
func TestInterruptedAfterAStaleClaim(t *testing.T) {
	t.Parallel()
	cps := store.Checkpoints(newStore(t))
	rec, cp := pause(t, cps, "gen_1")
	if _, err := record.ClaimPaused(t.Context(), cps, "t", rec, cp, approved, time.Hour); err != nil {
		t.Fatal(err)
	}
	rec, cp, err := record.LoadPaused(t.Context(), cps, "t", "gen_1")
	if err != nil {
		t.Fatal(err)
	}
	interrupted, err := record.Interrupted(rec, cp, 0)
	if err != nil {
		t.Fatalf("a stale claim: %v", err)
	}
	if !interrupted["approval_call_1"] || len(interrupted) != 1 {
		t.Errorf("may have run: %v; want the approved request alone", interrupted)
	}
}

// R-A8: a resume that failed with nothing run gives the pause back as it
// was; one that went past its paused turn can never be resumed again.
func TestGiveBackAndProgress(t *testing.T) {
	t.Parallel()
	cps := store.Checkpoints(newStore(t))
	rec, cp := pause(t, cps, "gen_1")
	c, err := record.ClaimPaused(t.Context(), cps, "t", rec, cp, approved, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.GiveBack(t.Context()); err != nil {
		t.Fatalf("GiveBack: %v", err)
	}
	rec, cp, err = record.LoadPaused(t.Context(), cps, "t", "gen_1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Claimed || cp.GetClaim() != nil {
		t.Fatalf("given back: claimed %v, claim %v; want the pause as it was", rec.Claimed, cp.GetClaim())
	}
	c, err = record.ClaimPaused(t.Context(), cps, "t", rec, cp, approved, time.Hour)
	if err != nil {
		t.Fatalf("claiming again after GiveBack: %v", err)
	}
	if err := c.Progress(t.Context()); err != nil {
		t.Fatalf("Progress: %v", err)
	}
	rec, cp, err = record.LoadPaused(t.Context(), cps, "t", "gen_1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := record.Interrupted(rec, cp, 0); fault.KindOf(err) != fault.FailedPrecondition {
		t.Fatalf("a pause whose resume went past its turn: %v; want FailedPrecondition", err)
	}
	if err := c.Remove(t.Context()); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if c.Held() {
		t.Error("the claim is still held after Remove")
	}
	if _, _, err := record.LoadPaused(t.Context(), cps, "t", "gen_1"); fault.KindOf(err) != fault.NotFound {
		t.Fatalf("after Remove: %v; want NotFound", err)
	}
}

// R-A8: a resume that stalled past resume_stale_after and was taken over
// learns it from its claim's renewal, and stops.
func TestKeepNoticesATakeover(t *testing.T) {
	t.Parallel()
	cps := store.Checkpoints(newStore(t))
	rec, cp := pause(t, cps, "gen_1")
	first, err := record.ClaimPaused(t.Context(), cps, "t", rec, cp, approved, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	first.Keep(t.Context(), 10*time.Millisecond, func(err error) { stopped <- err }, func(err error) { t.Errorf("renewal: %v", err) })
	defer first.Stop()
	// The takeover: a claim stale at once. A renewal in the same instant
	// (the store's clock has a resolution) keeps the claim fresh for it:
	// it tries again.
	testwait.Until(t, func() error {
		rec, cp, err := record.LoadPaused(t.Context(), cps, "t", "gen_1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = record.ClaimPaused(t.Context(), cps, "t", rec, cp, approved, 0)
		return err
	})
	select {
	case err := <-stopped:
		if fault.KindOf(err) != fault.Conflict {
			t.Errorf("the first resume stops with %v; want a Conflict", err)
		}
	case <-t.Context().Done():
		t.Fatal("the first resume never learnt of the takeover")
	}
}

// R-A7: a paused checkpoint this agentd cannot read is refused before
// anything runs: another version's, or one whose turn has a call without a state.
func TestLoadPausedRefusesWhatItCannotRead(t *testing.T) {
	t.Parallel()
	cps := store.Checkpoints(newStore(t))
	for _, cp := range []*statev1.Checkpoint{
		{Version: record.Version + 1, GenerationId: "gen_1", Turn: &statev1.PausedTurn{Calls: []*agentdv1.ToolCall{{Id: "c"}}, States: []*statev1.CallState{{}}}},
		{Version: record.Version, GenerationId: "gen_1", Turn: &statev1.PausedTurn{Calls: []*agentdv1.ToolCall{{Id: "c"}}}},
		{Version: record.Version, GenerationId: "gen_2", Turn: &statev1.PausedTurn{Calls: []*agentdv1.ToolCall{{Id: "c"}}, States: []*statev1.CallState{{}}}},
	} {
		data, _ := proto.Marshal(cp)
		if err := cps.Save(t.Context(), "t", "gen_1", data, time.Now().Add(time.Hour), 0); err != nil {
			t.Fatal(err)
		}
		if _, _, err := record.LoadPaused(t.Context(), cps, "t", "gen_1"); fault.KindOf(err) != fault.FailedPrecondition {
			t.Errorf("%v: %v; want FailedPrecondition", cp, err)
		}
	}
}
