package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
)

// GetGeneration returns one of the caller's tenant's generations
// from its durable record: live, or finished and not yet swept
// (generation.retention). A paused one shows what it waits for, from its
// paused checkpoint, and a waiting one from the pending requests its
// record lists; a finished one its usage, why it failed, and, once
// completed, its final message. Another tenant's generation is NOT_FOUND
// with the same message as an id that exists nowhere. Without a durable
// record of generations, FAILED_PRECONDITION.
func (s *Service) GetGeneration(ctx context.Context, req *agentdv1.GetGenerationRequest) (*agentdv1.GetGenerationResponse, error) {
	g, err := s.getGeneration(ctx, req)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return &agentdv1.GetGenerationResponse{Generation: g}, nil
}

func (s *Service) getGeneration(ctx context.Context, req *agentdv1.GetGenerationRequest) (*agentdv1.Generation, error) {
	if req.GetGenerationId() == "" {
		return nil, fault.InvalidRequest([]fault.Violation{{Field: "generation_id", Description: "is required"}})
	}
	tenant, err := s.recordsOf(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, store.Timeout)
	defer cancel()
	rec, err := s.generations.Get(ctx, tenant, req.GetGenerationId())
	if err != nil {
		return nil, err
	}
	g := s.generationOf(ctx, rec, true)
	switch {
	case rec.State == store.Paused:
		err = s.addPending(ctx, tenant, g)
	case !rec.State.Finished():
		err = s.addWaiting(ctx, tenant, g)
	}
	if err != nil {
		return nil, err
	}
	return g, nil
}

// ListGenerations returns a page of the caller's tenant's generations, newest
// first, optionally only those in the given states, of a provider, model,
// end user or thread, created in a time range. Each is as GetGeneration
// shows it, without the final message; a waiting or paused one with the
// requests it waits for, as its record lists them. A page token is
// refused with other filters than its list's.
func (s *Service) ListGenerations(ctx context.Context, req *agentdv1.ListGenerationsRequest) (*agentdv1.ListGenerationsResponse, error) {
	res, err := s.listGenerations(ctx, req)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return res, nil
}

func (s *Service) listGenerations(ctx context.Context, req *agentdv1.ListGenerationsRequest) (*agentdv1.ListGenerationsResponse, error) {
	o, err := listOptions(req)
	if err != nil {
		return nil, err
	}
	tenant, err := s.recordsOf(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, store.Timeout)
	defer cancel()
	page, next, err := s.generations.List(ctx, tenant, o)
	if fault.KindOf(err) == fault.Invalid && req.GetPageToken() != "" {
		// The filters were checked above: only the token is left to refuse.
		return nil, fault.InvalidRequest([]fault.Violation{{Field: "page_token", Description: "is not a next_page_token that ListGenerations returned for these filters"}})
	}
	if err != nil {
		return nil, err
	}
	res := &agentdv1.ListGenerationsResponse{NextPageToken: next}
	for _, rec := range page {
		g := s.generationOf(ctx, rec, false)
		if rec.State == store.Waiting || rec.State == store.Paused {
			if err := s.addWaiting(ctx, tenant, g); err != nil {
				return nil, err
			}
		}
		res.Generations = append(res.Generations, g)
	}
	return res, nil
}

// listOptions are the store's options for req, or why req is invalid.
func listOptions(req *agentdv1.ListGenerationsRequest) (store.ListOptions, error) {
	var v violations
	if n := req.GetPageSize(); n < 0 || n > store.MaxPageSize {
		v.add("page_size", "must be 0 (the default, %d) to %d, got %d", store.DefaultPageSize, store.MaxPageSize, n)
	}
	o := store.ListOptions{
		States: make([]store.State, len(req.GetStates())), PageSize: int(req.GetPageSize()), PageToken: req.GetPageToken(),
		Provider: req.GetProvider(), Model: req.GetModel(), EndUser: req.GetEndUser(), Thread: req.GetThreadId(),
	}
	for i, st := range req.GetStates() {
		var ok bool
		if o.States[i], ok = storeStates[st]; !ok {
			v.add(fmt.Sprintf("states[%d]", i), "must be one of RUNNING, WAITING, PAUSED, COMPLETED, FAILED, CANCELLED, QUEUED, got %s", stateName(st))
		}
	}
	o.CreatedAfter = v.time("created_after", req.GetCreatedAfter())
	o.CreatedBefore = v.time("created_before", req.GetCreatedBefore())
	if !o.CreatedAfter.IsZero() && !o.CreatedBefore.IsZero() && !o.CreatedBefore.After(o.CreatedAfter) {
		v.add("created_before", "must be after created_after")
	}
	if len(v) > 0 {
		return store.ListOptions{}, fault.InvalidRequest(v)
	}
	return o, nil
}

// time is ts as a time (the zero time when it is not set), adding a
// violation at field when it is not a valid timestamp.
func (v *violations) time(field string, ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	if err := ts.CheckValid(); err != nil {
		v.add(field, "is not a valid timestamp: %v", err)
		return time.Time{}
	}
	return ts.AsTime()
}

// recordsOf returns the caller's tenant, whose records it may read, or
// FailedPrecondition when this agentd keeps no record of generations.
func (s *Service) recordsOf(ctx context.Context) (string, error) {
	tenant, _, err := s.tenant(ctx)
	if err != nil {
		return "", err
	}
	if s.generations == nil {
		return "", fault.New(fault.FailedPrecondition, "this agentd keeps no record of its generations (it has no state store), so it cannot look them up")
	}
	return tenant, nil
}

// The states of a record as the API names them, and back.
var (
	apiStates = map[store.State]agentdv1.GenerationState{
		store.Running:   agentdv1.GenerationState_GENERATION_STATE_RUNNING,
		store.Waiting:   agentdv1.GenerationState_GENERATION_STATE_WAITING,
		store.Paused:    agentdv1.GenerationState_GENERATION_STATE_PAUSED,
		store.Completed: agentdv1.GenerationState_GENERATION_STATE_COMPLETED,
		store.Failed:    agentdv1.GenerationState_GENERATION_STATE_FAILED,
		store.Cancelled: agentdv1.GenerationState_GENERATION_STATE_CANCELLED,
		store.Queued:    agentdv1.GenerationState_GENERATION_STATE_QUEUED,
	}
	storeStates = func() map[agentdv1.GenerationState]store.State {
		m := make(map[agentdv1.GenerationState]store.State, len(apiStates))
		for s, api := range apiStates {
			m[api] = s
		}
		return m
	}()
)

// stateName names a requested state, known or not.
func stateName(st agentdv1.GenerationState) string {
	if name, ok := agentdv1.GenerationState_name[int32(st)]; ok {
		return name
	}
	return fmt.Sprint(int32(st))
}

// generationOf shows a record as the API does; withMessage adds a
// completed generation's final message. A result this agentd cannot read
// (one a later version wrote, say) is left out, with a warning: the rest
// of the record still shows.
func (s *Service) generationOf(ctx context.Context, rec store.Generation, withMessage bool) *agentdv1.Generation {
	g := &agentdv1.Generation{
		GenerationId: rec.ID,
		State:        apiStates[rec.State],
		CreatedAt:    timestamppb.New(rec.CreatedAt),
		UpdatedAt:    timestamppb.New(rec.UpdatedAt),
		LastSequence: rec.LastSeq,
		ThreadId:     rec.Thread,
		StartedBy:    rec.Origin.StartedBy,
		EndUser:      rec.Origin.EndUser,
		Provider:     rec.Origin.Provider,
		Model:        rec.Origin.Model,
		TraceId:      rec.Origin.TraceID,
	}
	if !rec.FinishedAt.IsZero() {
		g.FinishedAt = timestamppb.New(rec.FinishedAt)
	}
	if len(rec.Result) == 0 {
		return g
	}
	r, err := record.DecodeResult(rec.Result)
	if err != nil {
		s.log.WarnContext(ctx, "a generation's stored result cannot be read", "generation", rec.ID, "err", err)
		return g
	}
	g.ErrorCode, g.ErrorMessage = int32(r.Code), r.Error
	lenient := protojson.UnmarshalOptions{DiscardUnknown: true}
	if len(r.Usage) > 0 {
		u := &agentdv1.Usage{}
		if err := lenient.Unmarshal(r.Usage, u); err != nil {
			s.log.WarnContext(ctx, "a generation's stored usage cannot be read", "generation", rec.ID, "err", err)
		} else {
			g.Usage = u
		}
	}
	if len(r.Limit) > 0 {
		l := &agentdv1.LimitReached{}
		if err := lenient.Unmarshal(r.Limit, l); err != nil {
			s.log.WarnContext(ctx, "a generation's stored limit cannot be read", "generation", rec.ID, "err", err)
		} else {
			g.Limit = l
		}
	}
	if withMessage && rec.State == store.Completed && len(r.Structured) > 0 {
		v := &structpb.Value{}
		if err := lenient.Unmarshal(r.Structured, v); err == nil {
			g.Structured = v
		}
	}
	if withMessage && rec.State == store.Completed && len(r.Message) > 0 {
		m := &agentdv1.Message{}
		if err := lenient.Unmarshal(r.Message, m); err != nil {
			s.log.WarnContext(ctx, "a generation's stored final message cannot be read", "generation", rec.ID, "err", err)
		} else {
			g.Message = m
		}
	}
	return g
}

// addPending adds to a paused generation what it waits for and when the
// pause expires, from its paused checkpoint (its authorizations, sealed
// there, as far as this agentd can open them). A pause that expired (or was
// resumed since the record was read) has none: the generation shows
// without them.
func (s *Service) addPending(ctx context.Context, tenant string, g *agentdv1.Generation) error {
	_, cp, err := record.LoadPaused(ctx, s.checkpoints, tenant, g.GetGenerationId())
	switch {
	case fault.KindOf(err) == fault.NotFound:
		return nil
	case err != nil:
		return err
	}
	a := askedOf(cp.GetTurn())
	g.ApprovalRequests, g.FunctionCalls, g.InputRequests = a.approvals, a.functions, a.inputs
	for _, pa := range cp.GetTurn().GetAuthorizations() {
		if d, err := s.openAuthorization(tenant, g.GetGenerationId(), pa); err == nil {
			g.AuthorizationRequests = append(g.AuthorizationRequests, d.request)
		}
	}
	g.ExpiresAt = cp.GetExpiresAt()
	return nil
}

// addWaiting adds to a live generation that is not paused what it waits
// for on its stream: the requests its record lists, in the order they
// were asked.
func (s *Service) addWaiting(ctx context.Context, tenant string, g *agentdv1.Generation) error {
	reqs, err := pendingRequests(ctx, s.generations, s.sealer, tenant, g.GetGenerationId())
	if err != nil {
		return err
	}
	for _, r := range reqs {
		switch x := r.GetRequest().(type) {
		case *agentdv1.PendingRequest_Approval:
			g.ApprovalRequests = append(g.ApprovalRequests, x.Approval)
		case *agentdv1.PendingRequest_FunctionCall:
			g.FunctionCalls = append(g.FunctionCalls, x.FunctionCall)
		case *agentdv1.PendingRequest_Authorization:
			g.AuthorizationRequests = append(g.AuthorizationRequests, x.Authorization)
		case *agentdv1.PendingRequest_Input:
			g.InputRequests = append(g.InputRequests, x.Input)
		}
	}
	return nil
}
