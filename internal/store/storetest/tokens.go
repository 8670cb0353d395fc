package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/store"
)

// The tokens' tests: the store keeps one token per tenant, end user
// and server, as given, and never lets one tenant's reach another's.

// testTokens: a put stores a token and a later one replaces it; another
// tenant, end user or server does not see it; the tokens outlive a
// reopen, and another replica sees them; of concurrent puts one stays
// whole.
func testTokens(t *testing.T, db DB) {
	s := open(t, db, 0)
	tok := s.Tokens()
	ctx := t.Context()
	if _, err := tok.GetToken(ctx, "acme", "ann", "srv1"); fault.KindOf(err) != fault.NotFound || err == nil {
		t.Fatalf("GetToken of nothing: %v; want NotFound", err)
	}
	for _, p := range []struct{ tenant, user, server, data string }{
		{"acme", "ann", "srv1", "first"},
		{"acme", "ann", "srv1", "second"},
		{"acme", "", "srv1", "nobody's"}, // the end user of callers that name none
		{"globex", "ann", "srv1", "globex's"},
		{"acme", "bob", "srv1", "bob's"},
		{"acme", "ann", "srv2", "srv2's"},
	} {
		fatalIf(t, fmt.Sprintf("PutToken(%s, %s, %s)", p.tenant, p.user, p.server), tok.PutToken(ctx, p.tenant, p.user, p.server, []byte(p.data)))
	}
	other := open(t, db, 0).Tokens() // another replica
	checkTokensSeen(t, tok, other)

	// Binary data, as sealed tokens are, comes back byte for byte.
	sealed := []byte{0, 1, 2, 0xff, 0, 'x'}
	check(t, tok.PutToken(ctx, "acme", "carol", "srv1", sealed))
	if got, err := other.GetToken(ctx, "acme", "carol", "srv1"); err != nil || !slices.Equal(got, sealed) {
		t.Errorf("binary token read back as %v, %v", got, err)
	}
	checkConcurrentPuts(t, db, tok)
}

// checkTokensSeen checks what this replica (tok) and another see of the
// tokens testTokens put: the last put of each tenant, end user and
// server, and nothing of the others.
func checkTokensSeen(t *testing.T, tok, other store.Tokens) {
	for _, tt := range []struct{ tenant, user, server, want string }{
		{"acme", "ann", "srv1", "second"},
		{"acme", "", "srv1", "nobody's"},
		{"globex", "ann", "srv1", "globex's"},
		{"acme", "bob", "srv1", "bob's"},
		{"acme", "ann", "srv2", "srv2's"},
		{"globex", "bob", "srv1", ""},
		{"initech", "ann", "srv1", ""},
		{"acme", "ann", "srv3", ""},
	} {
		for name, r := range map[string]store.Tokens{"this replica": tok, "another": other} {
			got, err := r.GetToken(t.Context(), tt.tenant, tt.user, tt.server)
			if tt.want == "" {
				wantKind(t, fmt.Sprintf("%s: GetToken(%s, %s, %s)", name, tt.tenant, tt.user, tt.server), err, fault.NotFound)
				continue
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("%s: GetToken(%s, %s, %s) = %q, %v; want %q", name, tt.tenant, tt.user, tt.server, got, err, tt.want)
			}
		}
	}
}

// checkConcurrentPuts: of concurrent puts of one token, on replicas of
// their own, one stays whole.
func checkConcurrentPuts(t *testing.T, db DB, tok store.Tokens) {
	var wg sync.WaitGroup
	datas := []string{"aaaa", "bbbb", "cccc", "dddd"}
	for _, d := range datas {
		wg.Go(func() {
			errorIf(t, "concurrent PutToken", open(t, db, 0).Tokens().PutToken(t.Context(), "acme", "dan", "srv1", []byte(d)))
		})
	}
	wg.Wait()
	if got, err := tok.GetToken(t.Context(), "acme", "dan", "srv1"); err != nil || !slices.Contains(datas, string(got)) {
		t.Errorf("after concurrent puts: %q, %v; want one of them whole", got, err)
	}
}

// testDeleteTokens: DeleteTokens deletes a tenant's tokens, all of them or
// only an end user's, a server's, or an end user's of one server, and says how
// many; another tenant's are never touched; deleting none is no error.
func testDeleteTokens(t *testing.T, db DB) {
	type key struct{ tenant, user, server string }
	all := []key{
		{"acme", "ann", "s1"}, {"acme", "ann", "s2"}, {"acme", "bob", "s1"}, {"acme", "", "s1"},
		{"globex", "ann", "s1"}, {"globex", "bob", "s2"},
	}
	tests := []struct {
		name                 string
		tenant, user, server string
		deleted              []key
	}{
		{"the whole tenant", "acme", "", "", []key{all[0], all[1], all[2], all[3]}},
		{"one end user", "acme", "ann", "", []key{all[0], all[1]}},
		{"one server", "acme", "", "s1", []key{all[0], all[2], all[3]}},
		{"one end user's of one server", "acme", "bob", "s1", []key{all[2]}},
		{"nothing matches", "acme", "zed", "", nil},
		{"a tenant without tokens", "initech", "", "", nil},
		{"the other tenant", "globex", "", "", []key{all[4], all[5]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, db, 0).Tokens()
			ctx := t.Context()
			for _, k := range all {
				check(t, s.PutToken(ctx, k.tenant, k.user, k.server, []byte("tok")))
			}
			n, err := s.DeleteTokens(ctx, tt.tenant, tt.user, tt.server)
			if err != nil || n != int64(len(tt.deleted)) {
				t.Errorf("DeleteTokens(%q, %q, %q) = %d, %v; want %d", tt.tenant, tt.user, tt.server, n, err, len(tt.deleted))
			}
			var gone []key
			for _, k := range all {
				if !hasToken(t, s, k.tenant, k.user, k.server) {
					gone = append(gone, k)
				}
			}
			if diff := cmp.Diff(tt.deleted, gone, cmp.AllowUnexported(key{})); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
		})
	}
}

// hasToken reports whether s holds tenant's token of user at server.
func hasToken(t *testing.T, s store.Tokens, tenant, user, server string) bool {
	t.Helper()
	_, err := s.GetToken(t.Context(), tenant, user, server)
	if err != nil && fault.KindOf(err) != fault.NotFound {
		t.Fatal(err)
	}
	return err == nil
}
