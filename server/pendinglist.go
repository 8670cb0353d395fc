package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"fmt"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// ListPendingRequests returns a page of the caller's tenant's pending
// requests, across its waiting and paused generations, newest first: an
// approval inbox. It is one query of the record's pending requests (by
// tenant and the time each was asked), narrowed by kind, server, tool
// and end user; a request this agentd cannot open (sealed under a key it
// lacks) is listed without its body, with a warning in the log.
func (s *Service) ListPendingRequests(ctx context.Context, req *agentdv1.ListPendingRequestsRequest) (*agentdv1.ListPendingRequestsResponse, error) {
	res, err := s.listPendingRequests(ctx, req)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return res, nil
}

func (s *Service) listPendingRequests(ctx context.Context, req *agentdv1.ListPendingRequestsRequest) (*agentdv1.ListPendingRequestsResponse, error) {
	o, err := pendingOptions(req)
	if err != nil {
		return nil, err
	}
	tenant, err := s.recordsOf(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, store.Timeout)
	defer cancel()
	rows, next, err := s.generations.ListPending(ctx, tenant, o)
	if fault.KindOf(err) == fault.Invalid && req.GetPageToken() != "" {
		return nil, fault.InvalidRequest([]fault.Violation{{Field: "page_token", Description: "is not a next_page_token that ListPendingRequests returned"}})
	}
	if err != nil {
		return nil, err
	}
	res := &agentdv1.ListPendingRequestsResponse{NextPageToken: next}
	for _, row := range rows {
		res.Requests = append(res.Requests, s.listed(ctx, tenant, row))
	}
	return res, nil
}

// pendingOptions are the store's options for req, every problem of it
// at once.
func pendingOptions(req *agentdv1.ListPendingRequestsRequest) (store.PendingOptions, error) {
	var v violations
	if n := req.GetPageSize(); n < 0 || n > store.MaxPageSize {
		v.add("page_size", "must be 0 (the default, %d) to %d, got %d", store.DefaultPageSize, store.MaxPageSize, n)
	}
	o := store.PendingOptions{ServerName: req.GetServerName(), ToolName: req.GetToolName(), EndUser: req.GetEndUser(),
		PageSize: int(req.GetPageSize()), PageToken: req.GetPageToken()}
	for i, k := range req.GetKinds() {
		kind, ok := storeKinds[k]
		if !ok {
			v.add(fmt.Sprintf("kinds[%d]", i), "must be one of APPROVAL, AUTHORIZATION, INPUT, FUNCTION_CALL, got %s", k)
		}
		o.Kinds = append(o.Kinds, kind)
	}
	if len(v) > 0 {
		return store.PendingOptions{}, fault.InvalidRequest(v)
	}
	return o, nil
}

// listed is row as ListPendingRequests shows it.
func (s *Service) listed(ctx context.Context, tenant string, row store.PendingRequest) *agentdv1.PendingRequest {
	req, err := pendingOf(s.sealer, tenant, row)
	if err != nil {
		s.log.WarnContext(ctx, "a pending request cannot be read", "generation", row.GenerationID, "request", row.RequestID, "err", err)
	}
	return req
}
