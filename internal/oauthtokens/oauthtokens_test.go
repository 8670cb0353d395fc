package oauthtokens_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/oauthtokens"
	"github.com/agentd/agentd/internal/sealer"
	"github.com/agentd/agentd/internal/sealer/sealertest"
	"github.com/agentd/agentd/internal/store"
)

// X-M3: a server's key is the hash of its URL's canonical form: the
// spellings of one URL share it, other URLs (another path, query, port,
// scheme or host) do not, and no part of the URL is in it.
func TestServerKey(t *testing.T) {
	t.Parallel()
	same := [][]string{
		{"https://mcp.example.com/v1/cnry-path-secret?x=1", "HTTPS://MCP.Example.COM:443/v1/cnry-path-secret?x=1", "https://user:pw@mcp.example.com/v1/cnry-path-secret?x=1#frag"},
		{"https://mcp.example.com", "https://mcp.example.com/", "https://MCP.EXAMPLE.COM:443"},
		{"http://127.0.0.1:8080/mcp", "HTTP://127.0.0.1:8080/mcp#x"},
		{"http://[::1]/mcp", "http://[::1]:80/mcp"},
		{"http://[::1]:8080/mcp"},
		{"http://mcp.example.com/mcp"},
		{"https://mcp.example.com:8443/mcp"},
		{"https://mcp.example.com/MCP"},
		{"https://mcp.example.com/mcp?tenant=a"},
		{"https://mcp.example.com/mcp"},
		{"https://mcp.example.com/mcp/"},
		{"https://other.example.com/mcp"},
		{"not a url at all"},
	}
	seen := map[string]string{}
	for _, group := range same {
		key := oauthtokens.ServerKey(group[0])
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(key) {
			t.Errorf("ServerKey(%q) = %q; want 64 hex digits", group[0], key)
		}
		for _, u := range group[1:] {
			if got := oauthtokens.ServerKey(u); got != key {
				t.Errorf("ServerKey(%q) = %s; want %s, the key of %q", u, got, key, group[0])
			}
		}
		if other, ok := seen[key]; ok {
			t.Errorf("%q and %q share a key", group[0], other)
		}
		seen[key] = group[0]
	}
}

// keyring is a ring of the keys made of bytes b (current) and previous.
func keyring(t *testing.T, b byte, previous ...byte) *sealer.Keyring {
	return sealertest.Keyring(t, b, previous...)
}

// openDB opens an SQLite store in t's directory.
func openDB(t *testing.T) store.Store {
	t.Helper()
	db, err := store.OpenSQLite(filepath.Join(t.TempDir(), "agentd.db"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// X-M3: both stores keep one token per tenant, end user and server: none
// is nil, nil; a put replaces; another tenant, end user or server never
// sees it; a delete takes a tenant's tokens, narrowed by end user and
// server, and says how many; what the caller passes or gets may be reused.
func TestStores(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) oauthtokens.Store{
		"memory": func(*testing.T) oauthtokens.Store { return oauthtokens.NewMemory() },
		"sealed": func(t *testing.T) oauthtokens.Store { return oauthtokens.NewSealed(openDB(t).Tokens(), keyring(t, 1)) },
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			ctx := t.Context()
			ann := oauthtokens.Key{Tenant: "acme", EndUser: "ann", Server: oauthtokens.ServerKey("https://mcp.example.com/a")}
			if tok, err := s.Get(ctx, ann); tok != nil || err != nil {
				t.Fatalf("Get of nothing = %q, %v; want nil, nil", tok, err)
			}
			buf := []byte("first")
			if err := s.Put(ctx, ann, buf); err != nil {
				t.Fatal(err)
			}
			copy(buf, "reuse") // the caller reuses its buffer
			got, err := s.Get(ctx, ann)
			if err != nil || string(got) != "first" {
				t.Fatalf("Get = %q, %v; want first", got, err)
			}
			got[0] = 'Y' // and what it got
			if err := s.Put(ctx, ann, []byte("second")); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get(ctx, ann); err != nil || string(got) != "second" {
				t.Fatalf("after a second Put, Get = %q, %v; want second", got, err)
			}
			for _, k := range []oauthtokens.Key{
				{Tenant: "globex", EndUser: ann.EndUser, Server: ann.Server},
				{Tenant: ann.Tenant, EndUser: "bob", Server: ann.Server},
				{Tenant: ann.Tenant, EndUser: "", Server: ann.Server},
				{Tenant: ann.Tenant, EndUser: ann.EndUser, Server: oauthtokens.ServerKey("https://mcp.example.com/b")},
			} {
				if tok, err := s.Get(ctx, k); tok != nil || err != nil {
					t.Errorf("Get(%+v) = %q, %v; want nil, nil", k, tok, err)
				}
			}

			type tok struct{ tenant, user, server string }
			all := []tok{{"acme", "ann", "s1"}, {"acme", "ann", "s2"}, {"acme", "bob", "s1"}, {"acme", "", "s1"}, {"globex", "ann", "s1"}}
			for _, tt := range []struct {
				name                 string
				tenant, user, server string
				left                 []tok
			}{
				{"one end user's of one server", "acme", "ann", "s1", []tok{all[1], all[2], all[3], all[4]}},
				{"one end user", "acme", "ann", "", []tok{all[2], all[3], all[4]}},
				{"one server", "acme", "", "s1", []tok{all[1], all[4]}},
				{"the tenant", "acme", "", "", []tok{all[4]}},
				{"a tenant without tokens", "initech", "", "", all},
			} {
				if _, err := s.Delete(ctx, "acme", "", ""); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Delete(ctx, "globex", "", ""); err != nil {
					t.Fatal(err)
				}
				for _, k := range all {
					if err := s.Put(ctx, oauthtokens.Key{Tenant: k.tenant, EndUser: k.user, Server: k.server}, []byte("t")); err != nil {
						t.Fatal(err)
					}
				}
				n, err := s.Delete(ctx, tt.tenant, tt.user, tt.server)
				if err != nil || n != int64(len(all)-len(tt.left)) {
					t.Errorf("%s: Delete = %d, %v; want %d", tt.name, n, err, len(all)-len(tt.left))
				}
				var left []tok
				for _, k := range all {
					if got, err := s.Get(ctx, oauthtokens.Key{Tenant: k.tenant, EndUser: k.user, Server: k.server}); err != nil {
						t.Fatal(err)
					} else if got != nil {
						left = append(left, k)
					}
				}
				if diff := cmp.Diff(tt.left, left, cmp.AllowUnexported(tok{})); diff != "" {
					t.Errorf("%s: left (-want +got):\n%s", tt.name, diff)
				}
			}

			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					k := oauthtokens.Key{Tenant: "acme", EndUser: fmt.Sprint("user", i%2), Server: "s"}
					if err := s.Put(ctx, k, []byte(fmt.Sprint("token", i))); err != nil {
						t.Error(err)
					}
					if _, err := s.Get(ctx, k); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		})
	}
}

// X-M3: a sealed token is stored encrypted (the token's bytes are not in
// the database), with the id of the key that sealed it, and bound to its
// tenant, end user and server: moved to another's row, it does not open
// (ErrUnreadable, FailedPrecondition, naming the key but not the token).
func TestSealedAtRest(t *testing.T) {
	t.Parallel()
	db := openDB(t).Tokens()
	ring := keyring(t, 1)
	s := oauthtokens.NewSealed(db, ring)
	ctx := t.Context()
	k := oauthtokens.Key{Tenant: "acme", EndUser: "ann", Server: oauthtokens.ServerKey("https://mcp.example.com/a")}
	const secret = `{"access_token":"cnry-access-token","refresh_token":"cnry-refresh-token"}`
	if err := s.Put(ctx, k, []byte(secret)); err != nil {
		t.Fatal(err)
	}
	raw, err := db.GetToken(ctx, k.Tenant, k.EndUser, k.Server)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("cnry")) {
		t.Fatal("the stored token holds the token in the clear")
	}
	if !bytes.Contains(raw, []byte(ring.ID())) {
		t.Errorf("the stored token does not record the id of its key, %s", ring.ID())
	}
	for _, other := range []oauthtokens.Key{
		{Tenant: "globex", EndUser: k.EndUser, Server: k.Server},
		{Tenant: k.Tenant, EndUser: "bob", Server: k.Server},
		{Tenant: k.Tenant, EndUser: k.EndUser, Server: oauthtokens.ServerKey("https://mcp.example.com/b")},
	} {
		if err := db.PutToken(ctx, other.Tenant, other.EndUser, other.Server, raw); err != nil {
			t.Fatal(err)
		}
		tok, err := s.Get(ctx, other)
		if tok != nil || !errors.Is(err, oauthtokens.ErrUnreadable) || fault.KindOf(err) != fault.FailedPrecondition {
			t.Errorf("a token moved to %+v: %q, %v; want ErrUnreadable", other, tok, err)
		}
		if err != nil && strings.Contains(err.Error(), "cnry") {
			t.Errorf("the error says the token: %v", err)
		}
	}
	if err := db.PutToken(ctx, "acme", "carol", k.Server, []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, oauthtokens.Key{Tenant: "acme", EndUser: "carol", Server: k.Server}); !errors.Is(err, oauthtokens.ErrUnreadable) {
		t.Errorf("a stored token in no known format: %v; want ErrUnreadable", err)
	}
}

// X-M3: a key rotation. Tokens sealed under the key that was replaced
// open with it among the previous keys, and reading one seals it again
// under the current key, so that once it has been read the previous key
// is no longer needed; a token nobody read before the previous key was
// dropped is unreadable, the error naming the key it was sealed under.
func TestSealedRotation(t *testing.T) {
	t.Parallel()
	db := openDB(t).Tokens()
	ctx := t.Context()
	read, unread := oauthtokens.Key{Tenant: "acme", EndUser: "ann", Server: "s"}, oauthtokens.Key{Tenant: "acme", EndUser: "bob", Server: "s"}
	before := oauthtokens.NewSealed(db, keyring(t, 1))
	for _, k := range []oauthtokens.Key{read, unread} {
		if err := before.Put(ctx, k, []byte("token of "+k.EndUser)); err != nil {
			t.Fatal(err)
		}
	}

	rotated := oauthtokens.NewSealed(db, keyring(t, 2, 1))
	if got, err := rotated.Get(ctx, read); err != nil || string(got) != "token of ann" {
		t.Fatalf("after the rotation, Get = %q, %v", got, err)
	}
	raw, _ := db.GetToken(ctx, read.Tenant, read.EndUser, read.Server)
	if !bytes.Contains(raw, []byte(keyring(t, 2).ID())) {
		t.Errorf("the token read after the rotation is not stored under the new key %s", keyring(t, 2).ID())
	}

	dropped := oauthtokens.NewSealed(db, keyring(t, 2))
	if got, err := dropped.Get(ctx, read); err != nil || string(got) != "token of ann" {
		t.Errorf("the token read during the rotation, without the previous key: %q, %v", got, err)
	}
	_, err := dropped.Get(ctx, unread)
	if !errors.Is(err, oauthtokens.ErrUnreadable) || !strings.Contains(err.Error(), keyring(t, 1).ID()) {
		t.Errorf("a token sealed under a dropped key: %v; want ErrUnreadable naming key %s", err, keyring(t, 1).ID())
	}
	// Authorizing again replaces it.
	if err := dropped.Put(ctx, unread, []byte("new token of bob")); err != nil {
		t.Fatal(err)
	}
	if got, err := dropped.Get(ctx, unread); err != nil || string(got) != "new token of bob" {
		t.Errorf("after a new Put: %q, %v", got, err)
	}
}

// racingTokens is a store.Tokens whose token is replaced (by another
// replica's refresh) right after the first read.
type racingTokens struct {
	store.Tokens
	once  sync.Once
	fresh []byte
}

func (r *racingTokens) GetToken(ctx context.Context, tenant, endUser, server string) ([]byte, error) {
	data, err := r.Tokens.GetToken(ctx, tenant, endUser, server)
	r.once.Do(func() { err = errors.Join(err, r.Tokens.PutToken(ctx, tenant, endUser, server, r.fresh)) })
	return data, err
}

// X-M3: a token sealed under a previous key that another replica replaces
// while it is read is not overwritten with the older token.
func TestSealedRotationKeepsANewerToken(t *testing.T) {
	t.Parallel()
	db := openDB(t).Tokens()
	ctx := t.Context()
	k := oauthtokens.Key{Tenant: "acme", EndUser: "ann", Server: "s"}
	if err := oauthtokens.NewSealed(db, keyring(t, 1)).Put(ctx, k, []byte("old")); err != nil {
		t.Fatal(err)
	}
	// The newer token, as the other replica (rotated too) sealed it.
	other := &racingTokens{Tokens: db}
	var capture captured
	if err := oauthtokens.NewSealed(&capture, keyring(t, 2, 1)).Put(ctx, k, []byte("refreshed")); err != nil {
		t.Fatal(err)
	}
	other.fresh = capture.data

	if got, err := oauthtokens.NewSealed(other, keyring(t, 2, 1)).Get(ctx, k); err != nil || string(got) != "old" {
		t.Fatalf("Get = %q, %v; want the token it read", got, err)
	}
	if got, err := oauthtokens.NewSealed(db, keyring(t, 2)).Get(ctx, k); err != nil || string(got) != "refreshed" {
		t.Errorf("after the read: %q, %v; want the newer token kept", got, err)
	}
}

// captured is a store.Tokens that keeps the last token put.
type captured struct {
	store.Tokens
	data []byte
}

func (c *captured) PutToken(_ context.Context, _, _, _ string, data []byte) error {
	c.data = data
	return nil
}
