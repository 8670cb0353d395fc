package store

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/fault"
)

// A live generation's pending requests are what it waits for from a
// person (or its client): approvals, authorizations, inputs and function
// calls. Its owner replaces them with the write that changes them (a
// Checkpoint under its lease, so that a stale owner writes none), so
// that any replica can list them (ListPending) and decide them: a
// decision is recorded once per request (Decide), whoever decides
// first, and the owner applies it.

// The kinds of pending requests.
const (
	KindApproval      = "approval"
	KindAuthorization = "authorization"
	KindInput         = "input"
	KindFunctionCall  = "function_call"
)

// Origin is what a generation records of its start: who started it (a
// principal's name; "" without authentication), for whom (its end user),
// on which provider and model, and the W3C trace id of the call that
// started it ("" when it was not traced). ListPending's requests carry all
// but the trace id.
type Origin struct {
	StartedBy, EndUser, Provider, Model string
	TraceID                             string
}

// PendingRequest is one request a live generation waits for.
type PendingRequest struct {
	// GenerationID is its generation's id: set by ListPending (the
	// requests a Checkpoint writes are its generation's).
	GenerationID string
	// RequestID identifies it in its generation.
	RequestID string
	// Kind is one of the Kind constants.
	Kind string
	// State is Waiting (its generation waits on a live stream) or Paused.
	State State
	// ServerName and ToolName are the MCP server and the tool it
	// concerns, "" where none does.
	ServerName, ToolName string
	// RequestedAt is when it was asked; ExpiresAt, when it can no longer
	// be answered as it is (a waiting one's answer timeout, a paused
	// one's expiry).
	RequestedAt, ExpiresAt time.Time
	// Data is the request, as the caller encodes it (sealed); opaque to
	// the store.
	Data []byte
	// Origin is its generation's: set by ListPending.
	Origin Origin
}

// PendingOptions selects a page of ListPending: each field given narrows
// it.
type PendingOptions struct {
	// GenerationID keeps one generation's requests.
	GenerationID string
	// Kinds keeps the requests of these kinds (empty: all).
	Kinds []string
	// ServerName, ToolName and EndUser keep the requests with that
	// server, tool, or generation end user.
	ServerName, ToolName, EndUser string
	// PageSize is the most requests a page holds: DefaultPageSize when 0
	// or less, at most MaxPageSize.
	PageSize int
	// PageToken continues from the page that returned it ("" for the
	// first page).
	PageToken string
}

// Decision is the answer recorded for a pending request: the first, and
// the only one.
type Decision struct {
	RequestID string
	// Kind is the request's kind.
	Kind string
	// DecidedBy names who decided (a principal's name; "" without
	// authentication); DecidedAt is when.
	DecidedBy string
	DecidedAt time.Time
	// Data is the answer, as the caller encodes it (sealed); opaque to the
	// store.
	Data []byte
}

// checkPending refuses requests the contract refuses: each needs an id
// (once), a kind and a live state.
func checkPending(reqs []PendingRequest) error {
	for _, r := range reqs {
		if err := checkState(r.State, r.State == Waiting || r.State == Paused, "waiting or paused"); err != nil {
			return err
		}
	}
	return checkKeys("a pending request", len(reqs), func(i int) (string, string) { return reqs[i].RequestID, reqs[i].Kind })
}

// checkDecisions refuses decisions the contract refuses: each needs a
// request id, once, and a kind.
func checkDecisions(ds []Decision) error {
	return checkKeys("a decision", len(ds), func(i int) (string, string) { return ds[i].RequestID, ds[i].Kind })
}

// checkKeys refuses n entries, what they are, unless each has a request
// id, none twice, and a kind.
func checkKeys(what string, n int, key func(i int) (id, kind string)) error {
	seen := make(map[string]bool, n)
	for i := range n {
		id, kind := key(i)
		if id == "" || seen[id] || kind == "" {
			return fault.New(fault.Invalid, "store: %s needs a request id, once, and a kind", what)
		}
		seen[id] = true
	}
	return nil
}

// notPending is Decide's error for a request its generation does not
// wait for.
func notPending(id, request string) error {
	return fault.New(fault.NotFound, "the generation %q has no pending request %q", id, request).
		WithInfo("REQUEST_NOT_PENDING", map[string]string{"generation_id": id, "request_id": request})
}

// firstOf orders the decisions found, of requests ds named, as ds does.
func firstOf(ds, found []Decision) []Decision {
	at := make(map[string]int, len(ds))
	for i, d := range ds {
		at[d.RequestID] = i
	}
	slices.SortFunc(found, func(a, b Decision) int { return at[a.RequestID] - at[b.RequestID] })
	return found
}

// decisionIDs are the request ids of ds.
func decisionIDs(ds []Decision) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.RequestID
	}
	return ids
}

// A pending page's token is the position of its last request in
// ListPending's order: when it was asked (unix milliseconds), its
// generation and its id.
type pendingPos struct {
	requested         int64
	generation, reqID string
}

func (p pendingPos) token() string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d\x00%s\x00%s", p.requested, p.generation, p.reqID))
}

func parsePendingToken(tok string) (pos pendingPos, ok bool, err error) {
	if tok == "" {
		return pendingPos{}, false, nil
	}
	invalid := fault.New(fault.Invalid, "store: the page token is not one that ListPending returned")
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return pendingPos{}, false, invalid
	}
	parts := strings.Split(string(b), "\x00")
	if len(parts) != 3 {
		return pendingPos{}, false, invalid
	}
	ms, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return pendingPos{}, false, invalid
	}
	return pendingPos{ms, parts[1], parts[2]}, true, nil
}

// nextPendingToken is the token after page, of which the store read one
// more row than size; it trims page to size.
func nextPendingToken(page []PendingRequest, size int) ([]PendingRequest, string) {
	if len(page) <= size {
		return page, ""
	}
	page = page[:size]
	last := page[size-1]
	return page, pendingPos{last.RequestedAt.UnixMilli(), last.GenerationID, last.RequestID}.token()
}

// pendingFilters are ListPending's conditions beyond the tenant, each a
// column (of p, the request, or g, its generation) and its value, for a
// store to write in its dialect.
func pendingFilters(o PendingOptions) (cols []string, vals []any) {
	add := func(col, v string) {
		if v != "" {
			cols, vals = append(cols, col), append(vals, v)
		}
	}
	add("p.generation_id", o.GenerationID)
	add("p.server_name", o.ServerName)
	add("p.tool_name", o.ToolName)
	add("g.end_user", o.EndUser)
	return cols, vals
}

// pendingSelect is ListPending's select list and join, the same in
// both dialects.
const pendingSelect = `SELECT p.generation_id, p.request_id, p.kind, p.state, p.server_name, p.tool_name,
		p.requested_at, p.expires_at, p.data, g.started_by, g.end_user, g.provider, g.model
	FROM pending_requests p JOIN generations g ON g.tenant = p.tenant AND g.id = p.generation_id`
