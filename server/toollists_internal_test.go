package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
)

// TestToolListsKeeping: toolLists names a revision only for a list it
// holds, per tenant and server name; a server's new revision forgets the
// list of its old one; and what it keeps stays within its bounds.
func TestToolListsKeeping(t *testing.T) {
	t.Parallel()
	l := newToolLists()
	specs := []*bridgev1.ServerSpec{{Name: "a"}, {Name: "b"}}
	listed := func(server string, revision uint64, unchanged bool, tools ...string) *bridgev1.ServerTools {
		st := &bridgev1.ServerTools{ServerName: server, Revision: revision, Unchanged: unchanged}
		for _, name := range tools {
			st.Tools = append(st.Tools, &bridgev1.Tool{Name: name})
		}
		return st
	}
	names := func(lists []offeredList) [][]string {
		var out [][]string
		for _, list := range lists {
			var n []string
			for _, tool := range list {
				n = append(n, tool.name)
			}
			out = append(out, n)
		}
		return out
	}

	if got := l.known("t1", specs); got != nil {
		t.Errorf("an empty toolLists named revisions %v", got)
	}
	lists, ok := l.offered("t1", []*bridgev1.ServerTools{listed("a", 5, false, "x"), listed("b", 0, false, "y")})
	if !ok || !cmp.Equal([][]string{{"x"}, {"y"}}, names(lists)) {
		t.Errorf("offered full lists: %v, %t", names(lists), ok)
	}
	if got := l.known("t1", specs); !cmp.Equal([]uint64{5, 0}, got) {
		t.Errorf("known after a cached and an uncached list: %v; want [5 0]", got)
	}
	if got := l.known("t2", specs); got != nil {
		t.Errorf("another tenant was named t1's revisions: %v", got)
	}
	if _, ok := l.offered("t2", []*bridgev1.ServerTools{listed("a", 5, true)}); ok {
		t.Error("another tenant was given t1's list for an unchanged answer")
	}
	if lists, ok := l.offered("t1", []*bridgev1.ServerTools{listed("a", 5, true), listed("b", 0, false, "y")}); !ok || !cmp.Equal([][]string{{"x"}, {"y"}}, names(lists)) {
		t.Errorf("offered with a unchanged: %v, %t", names(lists), ok)
	}

	l.offered("t1", []*bridgev1.ServerTools{listed("a", 6, false, "z")})
	if got := l.known("t1", specs); !cmp.Equal([]uint64{6, 0}, got) {
		t.Errorf("known after a's list changed: %v; want [6 0]", got)
	}
	if _, ok := l.offered("t1", []*bridgev1.ServerTools{listed("a", 5, true)}); ok {
		t.Error("a's old list was kept after its new revision came")
	}

	for i := range maxListHints + 10 {
		l.offered(fmt.Sprint("tenant-", i), []*bridgev1.ServerTools{listed("a", uint64(100+i), false, "x")})
	}
	l.mu.Lock()
	if len(l.hints) > maxListHints || len(l.lists) > maxOfferedLists {
		t.Errorf("toolLists holds %d hints and %d lists; want at most %d and %d", len(l.hints), len(l.lists), maxListHints, maxOfferedLists)
	}
	l.mu.Unlock()

	// The bytes kept stay within the budget (maxOfferedBytes, here a
	// small one), and a list larger than that alone is offered but not
	// kept.
	l = newToolLists()
	l.maxBytes = 3000
	large := func(revision uint64, n int) *bridgev1.ServerTools {
		return &bridgev1.ServerTools{ServerName: "big", Revision: revision, Tools: []*bridgev1.Tool{{Name: "t", Description: strings.Repeat("d", n)}}}
	}
	for i := range 8 {
		l.offered(fmt.Sprint("big-", i), []*bridgev1.ServerTools{large(uint64(1000+i), l.maxBytes/3)})
	}
	if lists, ok := l.offered("huge", []*bridgev1.ServerTools{large(2000, l.maxBytes+1)}); !ok || len(lists[0]) != 1 {
		t.Errorf("a list larger than the budget was not offered: %v", ok)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	sum := 0
	for _, list := range l.lists {
		sum += list.size()
	}
	if sum != l.bytes || l.bytes > l.maxBytes || len(l.lists) < 2 {
		t.Errorf("toolLists counts %d bytes and holds %d in %d lists; want them equal, at most %d, in two lists or more", l.bytes, sum, len(l.lists), l.maxBytes)
	}
	if _, kept := l.lists[revisionKey{listKey{"huge", "big"}, 2000}]; kept {
		t.Error("a list larger than the budget was kept")
	}
}
