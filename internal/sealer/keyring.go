package sealer

import (
	"errors"
	"fmt"
	"slices"
)

// Keyring seals under its current key and opens what its current key or
// one of its previous keys sealed: the keys of a rotation. Rotating is
// making the current key a previous one and a new key current; what was
// sealed under the old key stays readable, and the caller seals it again
// under the new one (Open tells it when), until nothing needs the old
// key. Safe for concurrent use.
type Keyring struct {
	current  *Sealer
	previous []*Sealer
}

// NewKeyring returns a Keyring sealing under current and opening with
// current and previous too. It refuses a previous key that is the current
// key or repeats another: a rotation that forgot to put a new key in place
// would go unnoticed.
func NewKeyring(current *Sealer, previous ...*Sealer) (*Keyring, error) {
	if current == nil {
		return nil, errors.New("a keyring needs a current key")
	}
	seen := []string{current.ID()}
	for i, p := range previous {
		if slices.Contains(seen, p.ID()) {
			return nil, fmt.Errorf("previous key %d (key id %s) is the current key or another previous one", i+1, p.ID())
		}
		seen = append(seen, p.ID())
	}
	return &Keyring{current: current, previous: slices.Clone(previous)}, nil
}

// LoadKeyring reads the current key from the file at current
// (store.encryption_key_file) and the previous keys from the files at
// previous (store.previous_encryption_key_files), each as Load reads
// one. Errors name the setting, never a file's content.
func LoadKeyring(current string, previous []string) (*Keyring, error) {
	cur, err := Load(current)
	if err != nil {
		return nil, err
	}
	prev := make([]*Sealer, 0, len(previous))
	for i, path := range previous {
		s, err := load(path, fmt.Sprintf("store.previous_encryption_key_files[%d]", i))
		if err != nil {
			return nil, err
		}
		prev = append(prev, s)
	}
	k, err := NewKeyring(cur, prev...)
	if err != nil {
		return nil, fmt.Errorf("store.previous_encryption_key_files: %w", err)
	}
	return k, nil
}

// ID identifies the current key (Sealer.ID): what Seal seals under.
func (k *Keyring) ID() string { return k.current.ID() }

// IDs identifies every key of the ring, the current one first.
func (k *Keyring) IDs() []string {
	ids := []string{k.current.ID()}
	for _, p := range k.previous {
		ids = append(ids, p.ID())
	}
	return ids
}

// Seal seals plain under the current key, bound to aad (Sealer.Seal).
func (k *Keyring) Seal(plain, aad []byte) []byte { return k.current.Seal(plain, aad) }

// Open opens what one of the ring's keys sealed for the same aad. stale
// reports that it was a previous key: the caller should seal the data
// again (Seal) and store it in place of sealed, so that the previous key
// can be dropped in time. It fails with ErrOpen when no key opens it.
func (k *Keyring) Open(sealed, aad []byte) (plain []byte, stale bool, err error) {
	if plain, err := k.current.Open(sealed, aad); err == nil {
		return plain, false, nil
	}
	// GCM's tag check refuses a wrong key at once: trying each previous
	// key costs one failed authentication each, and rings are short.
	for _, p := range k.previous {
		if plain, err := p.Open(sealed, aad); err == nil {
			return plain, true, nil
		}
	}
	return nil, false, ErrOpen
}
