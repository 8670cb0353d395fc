package oauthtokens

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/sealer"
	"github.com/agentd/agentd/internal/store"
)

// ErrUnreadable is what Get's error matches for a stored token that
// cannot be opened.
var ErrUnreadable = errors.New("the stored OAuth token cannot be opened")

// sealed is the Store of NewSealed.
type sealed struct {
	db   store.Tokens
	keys *sealer.Keyring
}

// NewSealed returns a Store that keeps tokens in db, sealed under keys'
// current key (AES-256-GCM) and bound to their Key, with the id of the key
// that sealed them. Get opens a token sealed under one of keys' previous
// keys too, and stores it again sealed under the current one, so that a
// rotation completes as tokens are used. db's errors are returned as db
// classified them.
func NewSealed(db store.Tokens, keys *sealer.Keyring) Store {
	return &sealed{db: db, keys: keys}
}

// A stored token is: the format's version (1), the length of the id of
// the key that sealed it, that id, and the sealed token.
const formatV1 = 1

// aad binds a sealed token to its Key: each part with its length, so that
// no two keys give the same bytes.
func aad(k Key) []byte {
	b := []byte("agentd oauth token v1")
	for _, part := range []string{k.Tenant, k.EndUser, k.Server} {
		b = binary.AppendUvarint(b, uint64(len(part)))
		b = append(b, part...)
	}
	return b
}

func (s *sealed) seal(k Key, token []byte) []byte {
	id := s.keys.ID()
	out := append([]byte{formatV1, byte(len(id))}, id...)
	return append(out, s.keys.Seal(token, aad(k))...)
}

// open opens a stored token; stale reports that a previous key sealed it.
func (s *sealed) open(k Key, data []byte) (token []byte, stale bool, err error) {
	if len(data) < 2 || data[0] != formatV1 || len(data) < 2+int(data[1]) {
		return nil, false, unreadable("it is not in a format this agentd reads")
	}
	id, box := string(data[2:2+int(data[1])]), data[2+int(data[1]):]
	token, stale, err = s.keys.Open(box, aad(k))
	if err != nil {
		return nil, false, unreadable("it is sealed under the key " + id + ", which is not among this agentd's (" +
			strings.Join(s.keys.IDs(), ", ") + ": store.encryption_key_file, store.previous_encryption_key_files), or it was altered")
	}
	return token, stale, nil
}

func unreadable(why string) error {
	return fault.Hide(fault.FailedPrecondition, ErrUnreadable, "%s: %s", ErrUnreadable, why)
}

func (s *sealed) Get(ctx context.Context, k Key) ([]byte, error) {
	data, err := s.db.GetToken(ctx, k.Tenant, k.EndUser, k.Server)
	if fault.KindOf(err) == fault.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	token, stale, err := s.open(k, data)
	if err != nil {
		return nil, err
	}
	if stale {
		// Sealed again under the current key, unless it was replaced
		// meanwhile (a refresh on another replica): the newer token must
		// not be overwritten with this older one. A replacement between
		// this read and the put would still be lost; that needs a refresh
		// racing a rotation's first use of the token, and costs the end
		// user an authorization at worst. A failure leaves it for the next
		// read: the token is good either way.
		if again, err := s.db.GetToken(ctx, k.Tenant, k.EndUser, k.Server); err == nil && bytes.Equal(again, data) {
			_ = s.db.PutToken(ctx, k.Tenant, k.EndUser, k.Server, s.seal(k, token))
		}
	}
	return token, nil
}

func (s *sealed) Put(ctx context.Context, k Key, token []byte) error {
	return s.db.PutToken(ctx, k.Tenant, k.EndUser, k.Server, s.seal(k, token))
}

func (s *sealed) Delete(ctx context.Context, tenant, endUser, server string) (int64, error) {
	return s.db.DeleteTokens(ctx, tenant, endUser, server)
}
