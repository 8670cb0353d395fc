package server

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/quota"
	"github.com/agentd/agentd/internal/record"
	"github.com/agentd/agentd/internal/store"
)

// The bounds of a thread's metadata.
const (
	maxMetadataEntries    = 64
	maxMetadataKeyBytes   = 128
	maxMetadataValueBytes = 1024
)

// CreateThread creates a thread of the caller's tenant, empty or with the
// messages given, within the tenant's max_threads and max_thread_items.
func (s *Service) CreateThread(ctx context.Context, req *agentdv1.CreateThreadRequest) (*agentdv1.CreateThreadResponse, error) {
	t, err := s.createThread(ctx, req)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return &agentdv1.CreateThreadResponse{Thread: t}, nil
}

func (s *Service) createThread(ctx context.Context, req *agentdv1.CreateThreadRequest) (*agentdv1.Thread, error) {
	var v violations
	checkMetadata(&v, "metadata", req.GetMetadata(), false)
	for i, m := range req.GetMessages() {
		validateMessage(&v, fmt.Sprintf("messages[%d]", i), m)
	}
	expires := checkExpiry(&v, "expires_at", req.GetExpiresAt())
	if len(v) > 0 {
		return nil, fault.InvalidRequest(v)
	}
	tenant, limits, err := s.threadsOf(ctx)
	if err != nil {
		return nil, err
	}
	return s.newThread(ctx, tenant, limits, req.GetMetadata(), expires, req.GetMessages())
}

// newThread records a new thread of tenant holding msgs.
func (s *Service) newThread(ctx context.Context, tenant string, limits threadLimits, metadata map[string]string, expires time.Time, msgs []*agentdv1.Message) (*agentdv1.Thread, error) {
	ctx, cancel := store.WriteContext(ctx)
	defer cancel()
	now := time.Now()
	t, err := s.threads.CreateThread(ctx, store.NewThread{
		Tenant: tenant, ID: newThreadID(), Metadata: metadata, ExpiresAt: expires, Now: now,
		Items:      record.ThreadItems(s.sealer, tenant, "", msgs, now),
		MaxThreads: int64(limits.threads.N), MaxItems: int64(limits.items.N),
	})
	if err != nil {
		return nil, limits.named(err)
	}
	return threadOf(t), nil
}

// GetThread returns one of the caller's tenant's threads.
func (s *Service) GetThread(ctx context.Context, req *agentdv1.GetThreadRequest) (*agentdv1.GetThreadResponse, error) {
	t, err := s.getThread(ctx, req.GetThreadId())
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return &agentdv1.GetThreadResponse{Thread: t}, nil
}

func (s *Service) getThread(ctx context.Context, id string) (*agentdv1.Thread, error) {
	if id == "" {
		return nil, fault.InvalidRequest([]fault.Violation{{Field: "thread_id", Description: "is required"}})
	}
	tenant, _, err := s.threadsOf(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, store.Timeout)
	defer cancel()
	t, err := s.threads.GetThread(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return threadOf(t), nil
}

// ListThreads returns a page of the caller's tenant's threads, newest
// first, those whose metadata has the entries asked for.
func (s *Service) ListThreads(ctx context.Context, req *agentdv1.ListThreadsRequest) (*agentdv1.ListThreadsResponse, error) {
	res, err := s.listThreads(ctx, req)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return res, nil
}

func (s *Service) listThreads(ctx context.Context, req *agentdv1.ListThreadsRequest) (*agentdv1.ListThreadsResponse, error) {
	var v violations
	checkPageSize(&v, req.GetPageSize())
	checkMetadata(&v, "metadata", req.GetMetadata(), false)
	if len(v) > 0 {
		return nil, fault.InvalidRequest(v)
	}
	tenant, _, err := s.threadsOf(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, store.Timeout)
	defer cancel()
	page, next, err := s.threads.ListThreads(ctx, tenant, store.ThreadListOptions{Metadata: req.GetMetadata(), PageSize: int(req.GetPageSize()), PageToken: req.GetPageToken()})
	if fault.KindOf(err) == fault.Invalid {
		return nil, fault.InvalidRequest([]fault.Violation{{Field: "page_token", Description: "is not a next_page_token that ListThreads returned"}})
	}
	if err != nil {
		return nil, err
	}
	res := &agentdv1.ListThreadsResponse{NextPageToken: next}
	for _, t := range page {
		res.Threads = append(res.Threads, threadOf(t))
	}
	return res, nil
}

// ListThreadItems returns a page of a thread's items, oldest or newest
// first.
func (s *Service) ListThreadItems(ctx context.Context, req *agentdv1.ListThreadItemsRequest) (*agentdv1.ListThreadItemsResponse, error) {
	res, err := s.listThreadItems(ctx, req)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return res, nil
}

func (s *Service) listThreadItems(ctx context.Context, req *agentdv1.ListThreadItemsRequest) (*agentdv1.ListThreadItemsResponse, error) {
	var v violations
	if req.GetThreadId() == "" {
		v.add("thread_id", "is required")
	}
	checkPageSize(&v, req.GetPageSize())
	r, ok := itemRange(req)
	if !ok {
		v.add("page_token", "is not a next_page_token that ListThreadItems returned")
	}
	if len(v) > 0 {
		return nil, fault.InvalidRequest(v)
	}
	tenant, _, err := s.threadsOf(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, store.Timeout)
	defer cancel()
	// The thread first: an unknown one is NotFound, not an empty page.
	if _, err := s.threads.GetThread(ctx, tenant, req.GetThreadId()); err != nil {
		return nil, err
	}
	items, err := s.threads.ThreadItems(ctx, tenant, req.GetThreadId(), r)
	if err != nil {
		return nil, err
	}
	res := &agentdv1.ListThreadItemsResponse{}
	for _, it := range items {
		m, err := record.OpenThreadItem(s.sealer, tenant, it)
		if err != nil {
			return nil, err
		}
		res.Items = append(res.Items, &agentdv1.ThreadItem{ItemId: it.ID, Position: it.N, Message: m,
			GenerationId: it.Generation, CreatedAt: timestamppb.New(it.CreatedAt)})
	}
	if len(items) == r.Limit {
		res.NextPageToken = itemToken(items[len(items)-1].N)
	}
	return res, nil
}

// itemRange is the range of the page req asks for; false for a page
// token that ListThreadItems did not return.
func itemRange(req *agentdv1.ListThreadItemsRequest) (store.ItemRange, bool) {
	r := store.ItemRange{After: -1, Limit: int(req.GetPageSize()), Desc: req.GetNewestFirst()}
	if r.Limit <= 0 {
		r.Limit = store.DefaultPageSize
	}
	if req.GetPageToken() == "" {
		return r, true
	}
	b, err := base64.RawURLEncoding.DecodeString(req.GetPageToken())
	if err != nil || len(b) < 2 || b[0] != 'i' {
		return r, false
	}
	n, err := strconv.ParseInt(string(b[1:]), 10, 64)
	if err != nil || n < 0 {
		return r, false
	}
	if r.Desc {
		r.Before = n
	} else {
		r.After = n
	}
	return r, true
}

// itemToken is the page token of the items after (or, newest first,
// before) position n.
func itemToken(n int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("i" + strconv.FormatInt(n, 10)))
}

// UpdateThread changes a thread's metadata or expiry.
func (s *Service) UpdateThread(ctx context.Context, req *agentdv1.UpdateThreadRequest) (*agentdv1.UpdateThreadResponse, error) {
	t, err := s.updateThread(ctx, req)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return &agentdv1.UpdateThreadResponse{Thread: t}, nil
}

func (s *Service) updateThread(ctx context.Context, req *agentdv1.UpdateThreadRequest) (*agentdv1.Thread, error) {
	var v violations
	if req.GetThreadId() == "" {
		v.add("thread_id", "is required")
	}
	checkMetadata(&v, "metadata", req.GetMetadata(), !req.GetReplaceMetadata())
	expires := checkExpiry(&v, "expires_at", req.GetExpiresAt())
	if req.GetExpiresAt() != nil && req.GetClearExpiresAt() {
		v.add("clear_expires_at", "cannot be set with expires_at")
	}
	if len(v) > 0 {
		return nil, fault.InvalidRequest(v)
	}
	tenant, _, err := s.threadsOf(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := store.WriteContext(ctx)
	defer cancel()
	t, err := s.threads.UpdateThread(ctx, tenant, req.GetThreadId(), store.ThreadUpdate{
		Metadata: req.GetMetadata(), Replace: req.GetReplaceMetadata(),
		ExpiresAt: expires, SetExpiry: req.GetExpiresAt() != nil || req.GetClearExpiresAt(), Now: time.Now(),
	})
	if err != nil {
		return nil, err
	}
	return threadOf(t), nil
}

// DeleteThread deletes a thread for good, with its generations; one of
// them running here is cancelled first (one running elsewhere stops at
// its next write, which the store refuses).
func (s *Service) DeleteThread(ctx context.Context, req *agentdv1.DeleteThreadRequest) (*agentdv1.DeleteThreadResponse, error) {
	res, err := s.deleteThread(ctx, req.GetThreadId())
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return res, nil
}

func (s *Service) deleteThread(ctx context.Context, id string) (*agentdv1.DeleteThreadResponse, error) {
	if id == "" {
		return nil, fault.InvalidRequest([]fault.Violation{{Field: "thread_id", Description: "is required"}})
	}
	tenant, _, err := s.threadsOf(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := store.WriteContext(ctx)
	defer cancel()
	t, err := s.threads.GetThread(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if g := s.decidingHere(tenant, t.Active); g != nil {
		g.link.cancel(errThreadDeleted)
	}
	items, gens, err := s.threads.DeleteThread(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "thread deleted", "audit", true, "principal", principalName(ctx), "tenant", tenant, "thread", id,
		"items", items, "generations", gens)
	return &agentdv1.DeleteThreadResponse{ItemsDeleted: items, GenerationsDeleted: gens}, nil
}

// errThreadDeleted cancels a generation whose thread is deleted.
var errThreadDeleted = fault.New(fault.Canceled, "the generation's thread was deleted")

// ForkThread creates a new thread with a thread's items up to one of
// them.
func (s *Service) ForkThread(ctx context.Context, req *agentdv1.ForkThreadRequest) (*agentdv1.ForkThreadResponse, error) {
	t, err := s.forkThread(ctx, req)
	if err != nil {
		return nil, fault.GRPC(err)
	}
	return &agentdv1.ForkThreadResponse{Thread: t}, nil
}

func (s *Service) forkThread(ctx context.Context, req *agentdv1.ForkThreadRequest) (*agentdv1.Thread, error) {
	var v violations
	if req.GetThreadId() == "" {
		v.add("thread_id", "is required")
	}
	checkMetadata(&v, "metadata", req.GetMetadata(), false)
	if len(v) > 0 {
		return nil, fault.InvalidRequest(v)
	}
	tenant, limits, err := s.threadsOf(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := store.WriteContext(ctx)
	defer cancel()
	src, err := s.threads.GetThread(ctx, tenant, req.GetThreadId())
	if err != nil {
		return nil, err
	}
	upTo, err := s.itemPosition(ctx, tenant, src, req.GetUpToItemId())
	if err != nil {
		return nil, err
	}
	metadata := req.GetMetadata()
	if len(metadata) == 0 {
		metadata = src.Metadata
	}
	t, err := s.threads.ForkThread(ctx, tenant, src.ID, newThreadID(), upTo, metadata, int64(limits.threads.N), time.Now())
	if err != nil {
		return nil, limits.named(err)
	}
	return threadOf(t), nil
}

// itemPosition is the position of thread t's item id; -1 (all of them)
// for "". An item the thread does not hold is InvalidArgument.
func (s *Service) itemPosition(ctx context.Context, tenant string, t store.Thread, id string) (int64, error) {
	if id == "" {
		return -1, nil
	}
	for after := int64(-1); after < t.ItemCount-1; {
		items, err := s.threads.ThreadItems(ctx, tenant, t.ID, store.ItemRange{After: after, Limit: store.MaxReadEvents})
		if err != nil || len(items) == 0 {
			break
		}
		if i := slices.IndexFunc(items, func(it store.ThreadItem) bool { return it.ID == id }); i >= 0 {
			return items[i].N, nil
		}
		after = items[len(items)-1].N
	}
	return 0, fault.InvalidRequest([]fault.Violation{{Field: "up_to_item_id", Description: fmt.Sprintf("the thread has no item %q", id)}})
}

// threadLimits are a tenant's limits on threads and their items; 0 is
// none.
type threadLimits struct{ threads, items quota.Limit }

// named is err with the QuotaFailure of a limit the store refused with
// naming its setting as the tenant's configuration does
// ("tenants.acme.limits.max_threads").
func (l threadLimits) named(err error) error {
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Kind != fault.Exhausted {
		return err
	}
	for i, q := range fe.Quota {
		for _, lim := range []quota.Limit{l.threads, l.items} {
			if lim.Setting != "" && strings.HasSuffix(lim.Setting, q.Description) {
				fe.Quota[i].Description = lim.Setting
			}
		}
	}
	return err
}

// threadsOf returns the caller's tenant and its limits on threads, or
// FailedPrecondition when this agentd keeps no records.
func (s *Service) threadsOf(ctx context.Context) (string, threadLimits, error) {
	name, tenant, err := s.tenant(ctx)
	if err != nil {
		return "", threadLimits{}, err
	}
	if s.threads == nil {
		return "", threadLimits{}, fault.New(fault.FailedPrecondition, "this agentd keeps no records (it has no state store), so it keeps no threads")
	}
	return name, threadLimits{tenant.Limits.Threads, tenant.Limits.ThreadItems}, nil
}

func checkPageSize(v *violations, n int32) {
	if n < 0 || n > store.MaxPageSize {
		v.add("page_size", "must be 0 (the default, %d) to %d, got %d", store.DefaultPageSize, store.MaxPageSize, n)
	}
}

// checkMetadata checks a thread's metadata; merging, an empty value
// removes its key and is allowed.
func checkMetadata(v *violations, f string, md map[string]string, merging bool) {
	if len(md) > maxMetadataEntries {
		v.add(f, "must have at most %d entries, got %d", maxMetadataEntries, len(md))
	}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		switch {
		case k == "" || len(k) > maxMetadataKeyBytes:
			v.add(f, "keys must be 1 to %d bytes", maxMetadataKeyBytes)
		case len(md[k]) > maxMetadataValueBytes:
			v.add(f+"["+strconv.Quote(k)+"]", "must be at most %d bytes", maxMetadataValueBytes)
		case md[k] == "" && !merging:
			v.add(f+"["+strconv.Quote(k)+"]", "must not be empty")
		}
	}
}

// checkExpiry checks an expiry that must be in the future; zero when
// ts is absent.
func checkExpiry(v *violations, f string, ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	if ts.CheckValid() != nil || !ts.AsTime().After(time.Now()) {
		v.add(f, "must be a time in the future")
		return time.Time{}
	}
	return ts.AsTime()
}

// threadOf is t as the API shows it.
func threadOf(t store.Thread) *agentdv1.Thread {
	out := &agentdv1.Thread{
		ThreadId: t.ID, Metadata: t.Metadata, CreatedAt: timestamppb.New(t.CreatedAt), UpdatedAt: timestamppb.New(t.UpdatedAt),
		ItemCount: t.ItemCount, ActiveGenerationId: t.Active, QueuedGenerationIds: t.Queued,
	}
	if !t.ExpiresAt.IsZero() {
		out.ExpiresAt = timestamppb.New(t.ExpiresAt)
	}
	return out
}

// newThreadID is "thr_" and 32 hex digits, made as generation ids are.
func newThreadID() string { return timeOrderedID("thr_", time.Now()) }
