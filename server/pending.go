package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentd/agentd/internal/auth"
	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/sealer"
	"github.com/agentd/agentd/internal/store"
)

// A decision answers one of a generation's pending requests that a
// person may decide: an approval, an authorization or an input. It
// comes from the generation's stream (its holder's answer, which the
// generation records before it takes it) or from DecideRequests, on this
// replica or another (recorded already). A request has one decision,
// the first recorded, whoever made it: the store's record of it
// (store.Generations.Decide) is what makes it once across replicas.
type decision struct {
	requestID     string
	kind          agentdv1.PendingRequestKind
	approval      *agentdv1.ApprovalDecision
	authorization *agentdv1.AuthorizationResponse
	input         *agentdv1.InputResponse
	// by names who decided: a principal's name, "" without
	// authentication; at is when it was recorded (or received, until it
	// is).
	by string
	at time.Time
	// recorded: the store has it already (DecideRequests, a resume);
	// otherwise it is the stream holder's, still to record.
	recorded bool
	// field names the answer in the DecideRequests that gave it, for its
	// violations; "" for another's.
	field string
}

// kindName names a kind of request in messages: "approval".
func kindName(k agentdv1.PendingRequestKind) string { return storeKinds[k] }

// principalName names the authenticated principal of ctx's call, who
// decides what it answers: "" without authentication.
func principalName(ctx context.Context) string {
	if p, ok := auth.FromContext(ctx); ok {
		return p.Name
	}
	return ""
}

// maxReasonChars bounds ApprovalDecision.reason.
const maxReasonChars = 1000

// The kinds of pending requests, as the store names them.
var storeKinds = map[agentdv1.PendingRequestKind]string{
	agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_APPROVAL:      store.KindApproval,
	agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_AUTHORIZATION: store.KindAuthorization,
	agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_INPUT:         store.KindInput,
	agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_FUNCTION_CALL: store.KindFunctionCall,
}

// apiKind is a store kind as the API names it.
func apiKind(kind string) agentdv1.PendingRequestKind {
	for k, v := range storeKinds {
		if v == kind {
			return k
		}
	}
	return agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_UNSPECIFIED
}

func approvalDecision(d *agentdv1.ApprovalDecision, by string) *decision {
	return &decision{requestID: d.GetRequestId(), kind: agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_APPROVAL, approval: d, by: by, at: time.Now()}
}

func authorizationDecision(a *agentdv1.AuthorizationResponse, by string) *decision {
	return &decision{requestID: a.GetRequestId(), kind: agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_AUTHORIZATION, authorization: a, by: by, at: time.Now()}
}

func inputDecision(in *agentdv1.InputResponse, by string) *decision {
	return &decision{requestID: in.GetRequestId(), kind: agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_INPUT, input: in, by: by, at: time.Now()}
}

// decisionsOf are a request's answers as decisions by by, in its order:
// approvals, authorizations, inputs.
func decisionsOf(approvals []*agentdv1.ApprovalDecision, authorizations []*agentdv1.AuthorizationResponse, inputs []*agentdv1.InputResponse, by string) []*decision {
	var out []*decision
	for _, a := range approvals {
		out = append(out, approvalDecision(a, by))
	}
	for _, a := range authorizations {
		out = append(out, authorizationDecision(a, by))
	}
	for _, in := range inputs {
		out = append(out, inputDecision(in, by))
	}
	return out
}

// event is d as approval_decided shows it.
func (d *decision) event() *agentdv1.ApprovalDecided {
	return &agentdv1.ApprovalDecided{
		RequestId: d.requestID,
		Kind:      d.kind,
		Approved:  d.approval.GetApproved(),
		Action:    d.input.GetAction(),
		DecidedBy: d.by,
		Reason:    d.approval.GetReason(),
		DecidedAt: timestamppb.New(d.at),
	}
}

// answer is d's answer alone, as the store keeps it.
func (d *decision) answer() *agentdv1.DecideRequestsRequest {
	a := &agentdv1.DecideRequestsRequest{}
	switch {
	case d.approval != nil:
		a.ApprovalDecisions = []*agentdv1.ApprovalDecision{d.approval}
	case d.authorization != nil:
		a.AuthorizationResponses = []*agentdv1.AuthorizationResponse{d.authorization}
	case d.input != nil:
		a.InputResponses = []*agentdv1.InputResponse{d.input}
	}
	return a
}

// stored is d as tenant's generation id records it: sealed under k. An
// authorization's redirect carries a code, which is stored only sealed:
// without a key it is left out, and only this replica's memory has it.
func (d *decision) stored(k *sealer.Keyring, tenant, id string) store.Decision {
	a := d.answer()
	if k == nil && d.authorization != nil {
		a.AuthorizationResponses = []*agentdv1.AuthorizationResponse{{RequestId: d.requestID}}
	}
	return store.Decision{RequestID: d.requestID, Kind: storeKinds[d.kind], DecidedBy: d.by, DecidedAt: d.at,
		Data: record.SealDecision(k, tenant, id, d.requestID, a)}
}

// decisionFrom is the decision tenant's generation id recorded as sd.
func decisionFrom(k *sealer.Keyring, tenant, id string, sd store.Decision) (*decision, error) {
	a := &agentdv1.DecideRequestsRequest{}
	if err := record.OpenDecision(k, tenant, id, sd.RequestID, sd.Data, a); err != nil {
		return nil, err
	}
	d := &decision{requestID: sd.RequestID, kind: apiKind(sd.Kind), by: sd.DecidedBy, at: sd.DecidedAt, recorded: true}
	switch {
	case len(a.GetApprovalDecisions()) == 1:
		d.approval = a.GetApprovalDecisions()[0]
	case len(a.GetAuthorizationResponses()) == 1:
		d.authorization = a.GetAuthorizationResponses()[0]
	case len(a.GetInputResponses()) == 1:
		d.input = a.GetInputResponses()[0]
	default:
		return nil, fault.New(fault.FailedPrecondition, "the decision of %q in generation %q cannot be read by this agentd", sd.RequestID, id)
	}
	return d, nil
}

// same reports whether d and o answer alike: the same approval (reasons
// aside), redirect, or input.
func (d *decision) same(o *decision) bool {
	switch {
	case d.approval != nil:
		return o.approval != nil && d.approval.GetApproved() == o.approval.GetApproved()
	case d.authorization != nil:
		return o.authorization != nil && d.authorization.GetRedirectUrl() == o.authorization.GetRedirectUrl()
	}
	return o.input != nil && proto.Equal(d.input, o.input)
}

// who names the decider of d in messages.
func (d *decision) who() string {
	if d.by == "" {
		return "a caller without authentication"
	}
	return fmt.Sprintf("%q", d.by)
}

// decidedAlready refuses a decision of a request that first decided: it
// names who decided it, and when.
func decidedAlready(id string, first *decision) error {
	at := first.at.UTC().Format(time.RFC3339Nano)
	return fault.New(fault.FailedPrecondition, "the request %q of generation %q was decided already, by %s at %s; nothing was changed",
		first.requestID, id, first.who(), at).
		WithInfo("REQUEST_DECIDED", map[string]string{"generation_id": id, "request_id": first.requestID, "decided_by": first.by, "decided_at": at})
}

// A generation's pending requests are what it waits for from whoever may
// answer: approvals, authorizations and inputs (a person, on its stream
// or through DecideRequests) and function calls (its client). Its record
// keeps them, replaced with each change (record.Journal.SetPending), so
// that any replica can list and decide them; the replica running it
// watches the record for the decisions made on others.

// pendingSet is a generation's pending requests, by id. Safe for
// concurrent use: requests come and go on tool calls' goroutines.
type pendingSet struct {
	mu      sync.Mutex
	entries map[string]*pendingEntry
	// poll looks for the recorded decisions of the requests ids; nil
	// without a durable record, which nobody else can decide through.
	poll func(ctx context.Context, ids []string)
	// stopWatch stops the watch that runs while a decidable request
	// waits; watchers joins them.
	stopWatch context.CancelFunc
	watchers  sync.WaitGroup
}

// pendingEntry is one pending request: as the API shows it, and as the
// record keeps it (sealed once).
type pendingEntry struct {
	req *agentdv1.PendingRequest
	row store.PendingRequest
}

// decisionPollEvery is how often the replica running a generation that
// waits for a decision reads its record for decisions made on other
// replicas; one made on this replica reaches it at once. It bounds how
// long a decision made elsewhere waits to be applied, and the store's
// reads while a person takes their time.
const decisionPollEvery = 250 * time.Millisecond

// newEntry is req, tenant's generation id's request in state, about
// server and tool, for its record, sealed under k.
func newEntry(k *sealer.Keyring, tenant, id string, state store.State, req *agentdv1.PendingRequest, server, tool string) *pendingEntry {
	rid := requestIDOf(req)
	body := &agentdv1.PendingRequest{Kind: req.GetKind(), Request: req.GetRequest()}
	return &pendingEntry{req: req, row: store.PendingRequest{
		RequestID: rid, Kind: storeKinds[req.GetKind()], State: state, ServerName: server, ToolName: tool,
		RequestedAt: req.GetRequestedAt().AsTime(), ExpiresAt: req.GetExpiresAt().AsTime(),
		Data: record.SealRequest(k, tenant, id, rid, body),
	}}
}

// requestIDOf is the id of the request req holds.
func requestIDOf(req *agentdv1.PendingRequest) string {
	switch r := req.GetRequest().(type) {
	case *agentdv1.PendingRequest_Approval:
		return r.Approval.GetId()
	case *agentdv1.PendingRequest_Authorization:
		return r.Authorization.GetId()
	case *agentdv1.PendingRequest_Input:
		return r.Input.GetId()
	case *agentdv1.PendingRequest_FunctionCall:
		return r.FunctionCall.GetCallId()
	}
	return ""
}

// pendingStates are the states of a pending request as the API names
// them.
var pendingStates = map[store.State]agentdv1.GenerationState{
	store.Waiting: agentdv1.GenerationState_GENERATION_STATE_WAITING,
	store.Paused:  agentdv1.GenerationState_GENERATION_STATE_PAUSED,
}

// pendingOf is the request row of tenant's generation records, opened
// with k, as the API shows it; without its request when that cannot be
// opened (err says why).
func pendingOf(k *sealer.Keyring, tenant string, row store.PendingRequest) (*agentdv1.PendingRequest, error) {
	req := &agentdv1.PendingRequest{
		GenerationId: row.GenerationID, Kind: apiKind(row.Kind), State: pendingStates[row.State],
		RequestedAt: timestamppb.New(row.RequestedAt), ExpiresAt: timestamppb.New(row.ExpiresAt),
		EndUser: row.Origin.EndUser, StartedBy: row.Origin.StartedBy, Provider: row.Origin.Provider, Model: row.Origin.Model,
	}
	body := &agentdv1.PendingRequest{}
	if err := record.OpenRequest(k, tenant, row.GenerationID, row.RequestID, row.Data, body); err != nil {
		return req, err
	}
	req.Request = body.GetRequest()
	return req, nil
}

// pendingRequests are the requests tenant's generation id waits for, as
// its record lists them, in the order they were asked, opened with k.
func pendingRequests(ctx context.Context, gens store.Generations, k *sealer.Keyring, tenant, id string) ([]*agentdv1.PendingRequest, error) {
	rows, _, err := gens.ListPending(ctx, tenant, store.PendingOptions{GenerationID: id, PageSize: store.MaxPageSize})
	if err != nil {
		return nil, err
	}
	out := make([]*agentdv1.PendingRequest, len(rows))
	for i, row := range rows {
		req, err := pendingOf(k, tenant, row)
		if err != nil {
			return nil, err
		}
		out[len(rows)-1-i] = req // listed newest first
	}
	return out, nil
}

// add adds e and returns the set's rows. A decidable request starts the
// watch for decisions made elsewhere, unless it runs.
func (p *pendingSet) add(ctx context.Context, e *pendingEntry) []store.PendingRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.entries == nil {
		p.entries = make(map[string]*pendingEntry)
	}
	p.entries[e.row.RequestID] = e
	if p.poll != nil && p.stopWatch == nil && len(p.decidableLocked()) > 0 {
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		p.stopWatch = cancel
		p.watchers.Go(func() { p.watch(wctx) })
	}
	return p.rowsLocked()
}

// remove removes request id; ok is false when the set had none. It
// returns the set's rows, and stops the watch once nothing decidable
// waits.
func (p *pendingSet) remove(id string) (rows []store.PendingRequest, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok = p.entries[id]; !ok {
		return nil, false
	}
	delete(p.entries, id)
	if p.stopWatch != nil && len(p.decidableLocked()) == 0 {
		p.stopWatch()
		p.stopWatch = nil
	}
	return p.rowsLocked(), true
}

// rows are the set's rows, for the record.
func (p *pendingSet) rows() []store.PendingRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rowsLocked()
}

// get returns request id's entry; nil when it does not wait.
func (p *pendingSet) get(id string) *pendingEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.entries[id]
}

// clear empties the set, stops its watch and joins it. It returns
// whether the set had any request.
func (p *pendingSet) clear() bool {
	p.mu.Lock()
	had := len(p.entries) > 0
	p.entries = nil
	stop := p.stopWatch
	p.stopWatch = nil
	p.mu.Unlock()
	if stop != nil {
		stop()
	}
	p.watchers.Wait()
	return had
}

// watch polls for the decisions of the decidable requests until ctx
// ends.
func (p *pendingSet) watch(ctx context.Context) {
	tick := time.NewTicker(decisionPollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p.mu.Lock()
		ids := p.decidableLocked()
		p.mu.Unlock()
		if len(ids) > 0 {
			p.poll(ctx, ids)
		}
	}
}

// decidableLocked are the ids of the requests a decision answers (all
// but function calls), sorted; p.mu is held.
func (p *pendingSet) decidableLocked() []string {
	var ids []string
	for id, e := range p.entries {
		if e.req.GetKind() != agentdv1.PendingRequestKind_PENDING_REQUEST_KIND_FUNCTION_CALL {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// rowsLocked are the set's rows, for the record; p.mu is held.
func (p *pendingSet) rowsLocked() []store.PendingRequest {
	rows := make([]store.PendingRequest, 0, len(p.entries))
	for _, e := range p.entries {
		rows = append(rows, e.row)
	}
	return rows
}
