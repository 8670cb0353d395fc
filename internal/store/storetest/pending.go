package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// The pending requests' and decisions' tests: a generation's requests as
// its owner replaces them under its lease, listed across a tenant's
// generations newest first, filtered and paged; decisions recorded once
// per request, all of a Decide or none, whoever decides first.

// pendingReq is a request of kind asked at t0+asked, of server and tool.
func pendingReq(id, kind string, state store.State, server, tool string, asked time.Duration) store.PendingRequest {
	return store.PendingRequest{RequestID: id, Kind: kind, State: state, ServerName: server, ToolName: tool,
		RequestedAt: at(asked), ExpiresAt: at(asked + time.Hour), Data: []byte("request " + id)}
}

// createFor creates tenant's running generation id under owner "r",
// started by alice for endUser on script/m.
func createFor(t *testing.T, g store.Generations, tenant, id, endUser string) {
	t.Helper()
	check(t, errOf(g.Create(t.Context(), store.NewGeneration{Tenant: tenant, ID: id, Owner: "r", Expires: at(time.Hour),
		Checkpoint: []byte("c0"), Now: t0, Origin: store.Origin{StartedBy: "alice", EndUser: endUser, Provider: "script", Model: "m"}})))

}

// setPending replaces the pending requests of tenant's id under epoch 1.
func setPending(t *testing.T, g store.Generations, tenant, id string, state store.State, reqs ...store.PendingRequest) {
	t.Helper()
	check(t, errOf(g.Checkpoint(t.Context(), tenant, id, 1, store.Checkpoint{State: state, ReplacePending: true, Pending: reqs, Now: at(time.Second)})))
}

// listPending lists every page of tenant's requests selected by o, and
// returns them with the number of pages.
func listPending(t *testing.T, g store.Generations, tenant string, o store.PendingOptions) (out []store.PendingRequest, pages int) {
	t.Helper()
	for {
		page, next, err := g.ListPending(t.Context(), tenant, o)
		if err != nil {
			t.Fatalf("ListPending %+v: %v", o, err)
		}
		pages++
		if len(page) > max(o.PageSize, 0) && o.PageSize > 0 {
			t.Errorf("a page of %d; want at most %d", len(page), o.PageSize)
		}
		out = append(out, page...)
		if next == "" {
			return out, pages
		}
		o.PageToken = next
	}
}

// keysOf names requests as generation/request.
func keysOf(reqs []store.PendingRequest) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.GenerationID + "/" + r.RequestID
	}
	return out
}

// testPendingRequests: a Checkpoint replaces a generation's pending
// requests, ListPending lists a tenant's newest first with each
// generation's origin, narrowed by generation, kind, server, tool and
// end user, in pages; a lost lease writes none; Finish and ExpirePaused
// drop them; another tenant sees none.
func testPendingRequests(t *testing.T, db DB) {
	s := open(t, db, 0)
	g := s.Generations()
	createFor(t, g, "acme", "g1", "bob")
	createFor(t, g, "acme", "g2", "carol")
	createFor(t, g, "bravo", "g1", "bob")
	setPending(t, g, "acme", "g1", store.Waiting,
		pendingReq("approval_a", store.KindApproval, store.Waiting, "files", "delete", 1*time.Second),
		pendingReq("f1", store.KindFunctionCall, store.Waiting, "", "", 2*time.Second))
	setPending(t, g, "acme", "g2", store.Paused,
		pendingReq("approval_b", store.KindApproval, store.Paused, "files", "read", 3*time.Second),
		pendingReq("authorization_7", store.KindAuthorization, store.Paused, "crm", "", 3*time.Second),
		pendingReq("input_9", store.KindInput, store.Paused, "crm", "", 4*time.Second))
	setPending(t, g, "bravo", "g1", store.Waiting, pendingReq("approval_c", store.KindApproval, store.Waiting, "files", "delete", 5*time.Second))

	all, _ := listPending(t, g, "acme", store.PendingOptions{})
	want := []string{"g2/input_9", "g2/authorization_7", "g2/approval_b", "g1/f1", "g1/approval_a"}
	if diff := cmp.Diff(want, keysOf(all)); diff != "" {
		t.Errorf("acme's pending requests, newest first (-want +got):\n%s", diff)
	}
	wantRequest := pendingReq("approval_b", store.KindApproval, store.Paused, "files", "read", 3*time.Second)
	wantRequest.GenerationID, wantRequest.Origin = "g2", store.Origin{StartedBy: "alice", EndUser: "carol", Provider: "script", Model: "m"}
	if diff := cmp.Diff(wantRequest, all[2], equateEmpty); len(all) == 5 && diff != "" {
		t.Errorf("a listed request (-want +got):\n%s", diff)
	}
	checkPendingFilters(t, g)
	checkPendingPages(t, g, want)
	checkPendingFenced(t, g)
	checkPendingDropped(t, s)
}

// checkPendingFilters: each option narrows the list.
func checkPendingFilters(t *testing.T, g store.Generations) {
	for _, tc := range []struct {
		o    store.PendingOptions
		want []string
	}{
		{store.PendingOptions{GenerationID: "g1"}, []string{"g1/f1", "g1/approval_a"}},
		{store.PendingOptions{Kinds: []string{store.KindApproval, store.KindInput}}, []string{"g2/input_9", "g2/approval_b", "g1/approval_a"}},
		{store.PendingOptions{ServerName: "crm"}, []string{"g2/input_9", "g2/authorization_7"}},
		{store.PendingOptions{ServerName: "files", ToolName: "delete"}, []string{"g1/approval_a"}},
		{store.PendingOptions{EndUser: "carol", Kinds: []string{store.KindApproval}}, []string{"g2/approval_b"}},
		{store.PendingOptions{EndUser: "nobody"}, nil},
	} {
		got, _ := listPending(t, g, "acme", tc.o)
		if diff := cmp.Diff(tc.want, keysOf(got), cmp.Comparer(func(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) })); diff != "" {
			t.Errorf("ListPending %+v (-want +got):\n%s", tc.o, diff)
		}
	}
	other, _ := listPending(t, g, "bravo", store.PendingOptions{})
	if diff := cmp.Diff([]string{"g1/approval_c"}, keysOf(other)); diff != "" {
		t.Errorf("bravo's requests: it sees its own only (-want +got):\n%s", diff)
	}
}

// checkPendingPages: pages of two hold the same requests, in order, each
// once; a token ListPending did not return is Invalid.
func checkPendingPages(t *testing.T, g store.Generations, want []string) {
	got, pages := listPending(t, g, "acme", store.PendingOptions{PageSize: 2})
	if diff := cmp.Diff(want, keysOf(got)); diff != "" || pages != 3 {
		t.Errorf("pages of 2: %d pages (-want +got):\n%s", pages, diff)
	}
	_, _, err := g.ListPending(t.Context(), "acme", store.PendingOptions{PageToken: "not a token"})
	wantKind(t, "ListPending with a made-up token", err, fault.Invalid)
}

// checkPendingFenced: a write under a lost lease replaces nothing, and a
// replacement with none leaves none.
func checkPendingFenced(t *testing.T, g store.Generations) {
	ctx := t.Context()
	_, err := g.Checkpoint(ctx, "acme", "g1", 7, store.Checkpoint{State: store.Waiting, ReplacePending: true, Now: at(time.Minute)})
	wantKind(t, "a replacement under another epoch", err, fault.Conflict)
	if got, _ := listPending(t, g, "acme", store.PendingOptions{GenerationID: "g1"}); len(got) != 2 {
		t.Errorf("after a fenced replacement: %v; want g1's two requests", keysOf(got))
	}
	bad := pendingReq("x", store.KindApproval, store.Running, "", "", 0)
	_, err = g.Checkpoint(ctx, "acme", "g1", 1, store.Checkpoint{State: store.Waiting, ReplacePending: true, Pending: []store.PendingRequest{bad}, Now: at(time.Minute)})
	wantKind(t, "a pending request in the running state", err, fault.Invalid)
	check(t, errOf(g.Checkpoint(ctx, "acme", "g1", 1, store.Checkpoint{State: store.Running, Data: []byte("c2"), Now: at(time.Minute)})))
	if got, _ := listPending(t, g, "acme", store.PendingOptions{GenerationID: "g1"}); len(got) != 2 {
		t.Errorf("after a checkpoint that leaves them: %v; want g1's two requests", keysOf(got))
	}
	setPending(t, g, "acme", "g1", store.Running)
	if got, _ := listPending(t, g, "acme", store.PendingOptions{GenerationID: "g1"}); len(got) != 0 {
		t.Errorf("after replacing them with none: %v", keysOf(got))
	}
}

// checkPendingDropped: Finish drops a generation's requests, and so does
// ExpirePaused for a pause that expired.
func checkPendingDropped(t *testing.T, s store.Store) {
	ctx, g := t.Context(), s.Generations()
	check(t, errOf(g.Finish(ctx, "bravo", "g1", 1, store.Outcome{State: store.Cancelled, Now: at(time.Minute)})))
	if got, _ := listPending(t, g, "bravo", store.PendingOptions{}); len(got) != 0 {
		t.Errorf("a finished generation's requests: %v; want none", keysOf(got))
	}
	check(t, s.Save(ctx, "acme", "g2", []byte("pause"), at(time.Minute), 0))
	check(t, g.Release(ctx, "acme", "g2", 1, at(time.Minute)))
	if n := must[int](t, "ExpirePaused")(g.ExpirePaused(ctx, at(2*time.Hour), []byte("expired"))); n != 1 {
		t.Errorf("ExpirePaused ended %d; want g2", n)
	}
	if got, _ := listPending(t, g, "acme", store.PendingOptions{}); len(got) != 0 {
		t.Errorf("an expired pause's requests: %v; want none", keysOf(got))
	}
}

// decision is a decision of request id by who at t0+when.
func decision(id, kind, who string, when time.Duration) store.Decision {
	return store.Decision{RequestID: id, Kind: kind, DecidedBy: who, DecidedAt: at(when), Data: []byte(who + " on " + id)}
}

// testDecide: Decide records decisions of pending requests only, all or
// none; a second decision of a request records nothing and returns the
// first; a withdrawn decision (Undecide) may be made again; decisions stay
// once their request is no longer pending, and go with the generation's
// sweep; another tenant decides nothing of it.
func testDecide(t *testing.T, db DB) {
	s := open(t, db, 0)
	g := s.Generations()
	ctx := t.Context()
	createFor(t, g, "acme", "g1", "bob")
	setPending(t, g, "acme", "g1", store.Waiting,
		pendingReq("a1", store.KindApproval, store.Waiting, "files", "delete", 0),
		pendingReq("a2", store.KindApproval, store.Waiting, "files", "delete", 0),
		pendingReq("i1", store.KindInput, store.Waiting, "crm", "", 0))

	_, err := g.Decide(ctx, "acme", "g1", []store.Decision{decision("a1", store.KindApproval, "ann", time.Second), decision("nope", store.KindApproval, "ann", time.Second)})
	wantKind(t, "Decide of a request not pending", err, fault.NotFound)
	_, err = g.Decide(ctx, "bravo", "g1", []store.Decision{decision("a1", store.KindApproval, "ann", time.Second)})
	wantKind(t, "Decide of another tenant's", err, fault.NotFound)
	wantDecisions(t, g, "after refused Decides", nil)

	first := []store.Decision{decision("a1", store.KindApproval, "ann", time.Second), decision("i1", store.KindInput, "ann", time.Second)}
	if got := must[[]store.Decision](t, "Decide")(g.Decide(ctx, "acme", "g1", first)); len(got) != 0 {
		t.Errorf("the first Decide found %v decided", got)
	}
	late := []store.Decision{decision("a2", store.KindApproval, "ben", 2*time.Second), decision("a1", store.KindApproval, "ben", 2*time.Second)}
	got := must[[]store.Decision](t, "Decide again")(g.Decide(ctx, "acme", "g1", late))
	if diff := cmp.Diff(first[:1], got, equateEmpty); diff != "" {
		t.Errorf("a second decision of a1 returns the first (-want +got):\n%s", diff)
	}
	wantDecisions(t, g, "after a Decide that found one decided (a2 is not recorded either)", first)

	check(t, g.Undecide(ctx, "acme", "g1", []string{"i1"}))
	wantDecisions(t, g, "after i1's was withdrawn", first[:1])
	refirst := decision("i1", store.KindInput, "ben", 3*time.Second)
	if got := must[[]store.Decision](t, "Decide a withdrawn one again")(g.Decide(ctx, "acme", "g1", []store.Decision{refirst})); len(got) != 0 {
		t.Errorf("deciding a withdrawn decision's request again found %v", got)
	}
	first[1] = refirst
	check(t, g.Undecide(ctx, "acme", "g1", nil))
	setPending(t, g, "acme", "g1", store.Running)
	wantDecisions(t, g, "once the requests are no longer pending", first)
	_, err = g.Decide(ctx, "acme", "g1", []store.Decision{decision("a2", store.KindApproval, "ben", 3*time.Second)})
	wantKind(t, "Decide once the request is no longer pending", err, fault.NotFound)
	if got := must[[]store.Decision](t, "Decisions of some")(g.Decisions(ctx, "acme", "g1", []string{"i1", "a2"})); len(got) != 1 || got[0].RequestID != "i1" {
		t.Errorf("Decisions of i1 and a2: %v; want i1's", got)
	}
	if got := must[[]store.Decision](t, "Decisions of none")(g.Decisions(ctx, "acme", "g1", []string{})); len(got) != 0 {
		t.Errorf("Decisions of no request: %v", got)
	}

	check(t, errOf(g.Finish(ctx, "acme", "g1", 1, store.Outcome{State: store.Completed, Now: at(time.Minute)})))
	must[int](t, "Sweep")(g.Sweep(ctx, at(2*time.Minute)))
	wantDecisions(t, g, "after the sweep", nil)
}

// wantDecisions checks acme's g1's decisions.
func wantDecisions(t *testing.T, g store.Generations, when string, want []store.Decision) {
	t.Helper()
	got := must[[]store.Decision](t, "Decisions")(g.Decisions(t.Context(), "acme", "g1", nil))
	if diff := cmp.Diff(want, got, equateEmpty, cmp.FilterValues(func(a, b []store.Decision) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())); diff != "" {
		t.Errorf("%s: decisions (-want +got):\n%s", when, diff)
	}
}

// testConcurrentDecide: replicas deciding one request at once, each on
// its own handle: exactly one records it, and every other is told its
// decision.
func testConcurrentDecide(t *testing.T, db DB) {
	g := generations(t, db)
	createFor(t, g, "acme", "g1", "bob")
	setPending(t, g, "acme", "g1", store.Waiting, pendingReq("a1", store.KindApproval, store.Waiting, "files", "delete", 0))
	const n = 8
	handles := make([]store.Generations, n)
	for i := range handles {
		handles[i] = generations(t, db)
	}
	firsts := make([][]store.Decision, n)
	var wg sync.WaitGroup
	for i, h := range handles {
		wg.Go(func() {
			var err error
			firsts[i], err = h.Decide(t.Context(), "acme", "g1", []store.Decision{decision("a1", store.KindApproval, fmt.Sprint("p", i), time.Second)})
			errorIf(t, "Decide", err)
		})
	}
	wg.Wait()
	stored := must[[]store.Decision](t, "Decisions")(g.Decisions(t.Context(), "acme", "g1", nil))
	if len(stored) != 1 {
		t.Fatalf("decisions stored: %v; want one", stored)
	}
	won := 0
	for i, f := range firsts {
		switch {
		case len(f) == 0:
			won++
			if stored[0].DecidedBy != fmt.Sprint("p", i) {
				t.Errorf("p%d recorded, but %s's decision is stored", i, stored[0].DecidedBy)
			}
		case f[0].DecidedBy != stored[0].DecidedBy:
			t.Errorf("p%d was told %s decided first; %s's is stored", i, f[0].DecidedBy, stored[0].DecidedBy)
		}
	}
	if won != 1 {
		t.Errorf("%d of %d concurrent Decides recorded; want exactly one", won, n)
	}
}
