// Package sealertest makes sealer keyrings for tests.
package sealertest

import (
	"bytes"
	"testing"

	"github.com/agentd/agentd/internal/sealer"
)

// Keyring is a ring of the keys made of the bytes b (current) and
// previous, each repeated to a key's length: the same byte always makes
// the same key, so tests can rotate keys and name them.
func Keyring(tb testing.TB, b byte, previous ...byte) *sealer.Keyring {
	tb.Helper()
	key := func(b byte) *sealer.Sealer {
		k, err := sealer.New(bytes.Repeat([]byte{b}, sealer.KeySize))
		if err != nil {
			tb.Fatal(err)
		}
		return k
	}
	var prev []*sealer.Sealer
	for _, p := range previous {
		prev = append(prev, key(p))
	}
	ring, err := sealer.NewKeyring(key(b), prev...)
	if err != nil {
		tb.Fatal(err)
	}
	return ring
}
