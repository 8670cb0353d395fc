package record

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	statev1 "github.com/agentd/agentd/gen/go/agentd/state/v1"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// A paused generation's checkpoint waits in the checkpoint store for its
// resume. A resume claims it before anything runs: the claim records the
// resume's answers in the checkpoint and fences every later write by the
// claimed version, so that of two resumes of one pause only one goes on,
// and a resume that another took over (it stalled past
// generation.resume_stale_after) changes nothing. A claim left behind by
// a resume that died tells the next one what may have run.

// LoadPaused reads tenant's paused generation id and decodes its
// checkpoint, refusing one this agentd cannot read (consistent). Without
// a checkpoint store nothing is paused.
func LoadPaused(ctx context.Context, cps store.Checkpoints, tenant, id string) (store.Record, *statev1.Checkpoint, error) {
	if cps == nil {
		return store.Record{}, nil, fault.New(fault.NotFound, "no paused generation %q", id)
	}
	rec, err := cps.Get(ctx, tenant, id)
	if err != nil {
		return store.Record{}, nil, err
	}
	cp := &statev1.Checkpoint{}
	if err := proto.Unmarshal(rec.Data, cp); err != nil || !consistent(cp, id) {
		return store.Record{}, nil, fault.New(fault.FailedPrecondition, "the paused generation %q cannot be read by this agentd", id)
	}
	return rec, cp, nil
}

// Interrupted refuses a paused generation that another resume holds
// (its claim is younger than staleAfter), or whose earlier resume went
// past its paused turn. It returns what an earlier resume, since stopped,
// may have run: the approval requests it approved, and the calls it ran
// again with the authorizations or input it had answers to.
func Interrupted(rec store.Record, cp *statev1.Checkpoint, staleAfter time.Duration) (map[string]bool, error) {
	id := cp.GetGenerationId()
	if rec.Claimed && rec.ClaimedAt.After(time.Now().Add(-staleAfter)) {
		return nil, fault.New(fault.Conflict, "the paused generation %q is being resumed by another request", id).
			WithInfo("GENERATION_CLAIMED", map[string]string{"generation_id": id})
	}
	// A claim still recorded is an earlier resume's that stopped (it died,
	// or failed and was itself a takeover).
	interrupted := map[string]bool{}
	c := cp.GetClaim()
	if c == nil {
		return interrupted, nil
	}
	if c.GetProgressed() {
		return nil, fault.New(fault.FailedPrecondition,
			"the resume of generation %q stopped after it had gone past its paused turn; resuming it again could repeat the tool calls made since, so it cannot be resumed", id).
			WithInfo("GENERATION_PROGRESSED", map[string]string{"generation_id": id})
	}
	for _, d := range c.GetApprovalDecisions() {
		if d.GetApproved() {
			interrupted[d.GetRequestId()] = true
		}
	}
	for _, reqID := range c.GetMayHaveRun() {
		interrupted[reqID] = true
	}
	for _, st := range cp.GetTurn().GetStates() {
		if a := st.GetAuthorization(); a != nil && len(c.GetAuthorized()) > 0 {
			interrupted[a.GetToolCallId()] = true
		}
		if in := st.GetInput(); in != nil && len(c.GetAnsweredInputs()) > 0 {
			interrupted[in.GetToolCallId()] = true
		}
	}
	return interrupted, nil
}

// Claim is a resume's hold on a paused generation's checkpoint.
type Claim struct {
	cps      store.Checkpoints
	tenant   string
	id       string
	version  int64  // the claimed record's version; 0 once the claim is no longer held
	original []byte // the checkpoint as stored before the claim
	expires  time.Time
	claimed  *statev1.Checkpoint
	stop     func() // stops Keep; a no-op before it starts
}

// ClaimPaused records answers (the resume's, with what may have run) in
// the paused checkpoint cp, read as rec, and claims it, if nobody changed
// it since (or the claim that did is older than staleAfter).
func ClaimPaused(ctx context.Context, cps store.Checkpoints, tenant string, rec store.Record, cp *statev1.Checkpoint, answers *statev1.Claim, staleAfter time.Duration) (*Claim, error) {
	claimed := proto.CloneOf(cp)
	claimed.Claim = proto.CloneOf(answers)
	claimed.Claim.ClaimedAt = timestamppb.Now()
	data, err := proto.Marshal(claimed)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "encoding the checkpoint")
	}
	now := time.Now()
	id := cp.GetGenerationId()
	if err := cps.Claim(ctx, tenant, id, rec.Version, data, now, now.Add(-staleAfter)); err != nil {
		return nil, err
	}
	return &Claim{cps: cps, tenant: tenant, id: id, version: rec.Version + 1, original: rec.Data,
		expires: cp.GetExpiresAt().AsTime(), claimed: claimed, stop: func() {}}, nil
}

// Fence is the version that fences a write over the claim; 0 once the
// claim is no longer held.
func (c *Claim) Fence() int64 { return c.version }

// Held reports whether the resume still holds the claim: it has not
// paused again over it, nor settled it.
func (c *Claim) Held() bool { return c.version != 0 }

// Let records that the claim is no longer the resume's: it paused again,
// writing over it. It stops Keep first.
func (c *Claim) Let() {
	c.Stop()
	c.version = 0
}

// Keep renews the claim every every while the generation runs, so that
// no other resume takes over a live one; if another did (this one was
// stalled past resume_stale_after), it calls takenOver with the error
// that stops the generation, and renews no more. warn logs a renewal that
// failed otherwise. Stop (or any settling of the claim) ends it.
func (c *Claim) Keep(ctx context.Context, every time.Duration, takenOver func(error), warn func(error)) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			sctx, cancel := store.WriteContext(ctx)
			err := c.cps.Renew(sctx, c.tenant, c.id, c.version, nil, time.Now())
			cancel()
			switch {
			case fault.KindOf(err) == fault.Conflict:
				takenOver(fault.New(fault.Conflict, "another resume took the paused generation %q over while this one was stalled; this one stops", c.id).
					WithInfo("GENERATION_TAKEN_OVER", map[string]string{"generation_id": c.id}))
				return
			case err != nil:
				warn(err)
			}
		}
	})
	var once sync.Once
	c.stop = func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

// Stop stops renewing the claim and joins the renewals. Idempotent.
func (c *Claim) Stop() { c.stop() }

// Progress records that the resumed generation finished its paused turn
// and goes on: from now on its checkpoint is never resumed again.
func (c *Claim) Progress(ctx context.Context) error {
	cp := proto.CloneOf(c.claimed)
	cp.Claim.Progressed = true
	data, err := proto.Marshal(cp)
	if err != nil {
		return fault.Wrap(fault.Internal, err, "encoding the checkpoint")
	}
	sctx, cancel := store.WriteContext(ctx)
	defer cancel()
	return c.cps.Renew(sctx, c.tenant, c.id, c.version, data, time.Now())
}

// Remove removes the paused checkpoint: the resumed generation completed,
// or failed past its paused turn (replaying it would repeat the calls
// made since).
func (c *Claim) Remove(ctx context.Context) error {
	c.Stop()
	sctx, cancel := store.WriteContext(ctx)
	defer cancel()
	err := c.cps.Delete(sctx, c.tenant, c.id, c.version)
	c.version = 0
	return err
}

// GiveBack puts the paused checkpoint back as it was before the claim:
// the resume failed with nothing run, and the client may resume again.
func (c *Claim) GiveBack(ctx context.Context) error {
	c.Stop()
	sctx, cancel := store.WriteContext(ctx)
	defer cancel()
	return c.cps.Save(sctx, c.tenant, c.id, c.original, c.expires, c.version)
}

// consistent reports whether a decoded checkpoint can be resumed as the
// generation id: this version, that id, and a paused turn whose every
// call has exactly one state that belongs to it. A checkpoint that is
// not (written by another version, or damaged) is refused before anything
// runs, never half-trusted.
func consistent(cp *statev1.Checkpoint, id string) bool {
	t := cp.GetTurn()
	switch {
	case cp.GetVersion() != Version || cp.GetGenerationId() != id || t == nil || len(t.GetStates()) != len(t.GetCalls()):
		return false
	case t.GetLimit() != nil:
		return limitConsistent(t)
	case len(t.GetCalls()) == 0 && len(t.GetAuthorizations()) == 0:
		return false // a turn with nothing to wait for
	}
	return callsConsistent(t)
}

// callsConsistent reports whether each call of paused turn t has exactly
// one state that belongs to it, each id once.
func callsConsistent(t *statev1.PausedTurn) bool {
	ids := make(map[string]bool, 2*len(t.GetCalls()))
	unique := func(id string) bool {
		if id == "" || ids[id] {
			return false
		}
		ids[id] = true
		return true
	}
	authorizations := make(map[string]bool)
	for _, pa := range t.GetAuthorizations() {
		if !unique(pa.GetRequestId()) {
			return false
		}
		authorizations[pa.GetRequestId()] = true
	}
	for i, c := range t.GetCalls() {
		if !unique(c.GetId()) || !stateBelongs(t.GetStates()[i], c.GetId(), unique, authorizations) {
			return false
		}
	}
	return true
}

// limitConsistent reports whether t, a turn paused at a limit, waits
// for that limit's approval alone: none of its calls ran or waits for
// anything.
func limitConsistent(t *statev1.PausedTurn) bool {
	l := t.GetLimit()
	if l.GetId() == "" || l.GetLimit().GetName() == "" || len(t.GetAuthorizations()) > 0 {
		return false
	}
	ids := map[string]bool{l.GetId(): true}
	for i, c := range t.GetCalls() {
		if c.GetId() == "" || ids[c.GetId()] || t.GetStates()[i].GetState() != nil {
			return false
		}
		ids[c.GetId()] = true
	}
	return true
}

// stateBelongs reports whether a paused call's state belongs to the call
// callID, with ids of its own.
func stateBelongs(st *statev1.CallState, callID string, unique func(string) bool, authorizations map[string]bool) bool {
	switch st := st.GetState().(type) {
	case *statev1.CallState_Result:
		return st.Result.GetToolCallId() == callID
	case *statev1.CallState_Approval:
		return st.Approval.GetToolCallId() == callID && st.Approval.GetId() != callID && unique(st.Approval.GetId())
	case *statev1.CallState_FunctionCall:
		return st.FunctionCall.GetCallId() == callID
	case *statev1.CallState_Authorization:
		return st.Authorization.GetToolCallId() == callID && authorizations[st.Authorization.GetRequestId()]
	case *statev1.CallState_Input:
		if st.Input.GetToolCallId() != callID || len(st.Input.GetInputs()) == 0 {
			return false
		}
		for _, in := range st.Input.GetInputs() {
			if in.GetKey() == "" || !unique(in.GetRequest().GetId()) {
				return false
			}
		}
		return true
	}
	return false
}
