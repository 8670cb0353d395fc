package sealer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func key(t *testing.T, b byte) *Sealer {
	t.Helper()
	s, err := New(bytes.Repeat([]byte{b}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// X-M3: a rotation: the current key seals; what the previous keys sealed
// opens, reported stale; what a key the ring lacks sealed, or what was
// sealed for other data, does not open.
func TestKeyringRotation(t *testing.T) {
	t.Parallel()
	k1, k2, k3, k4 := key(t, 1), key(t, 2), key(t, 3), key(t, 4)
	ring, err := NewKeyring(k3, k2, k1)
	if err != nil {
		t.Fatal(err)
	}
	if ring.ID() != k3.ID() {
		t.Errorf("ID = %s; want the current key's, %s", ring.ID(), k3.ID())
	}
	if diff := cmp.Diff([]string{k3.ID(), k2.ID(), k1.ID()}, ring.IDs()); diff != "" {
		t.Errorf("IDs (-want +got):\n%s", diff)
	}
	aad := []byte("acme\x00gen_1")
	if got, err := k3.Open(ring.Seal([]byte("new"), aad), aad); err != nil || string(got) != "new" {
		t.Errorf("the ring does not seal under its current key: %q, %v", got, err)
	}
	tests := []struct {
		name      string
		sealed    []byte
		aad       []byte
		want      string
		wantStale bool
		wantErr   error
	}{
		{name: "current key", sealed: ring.Seal([]byte("p"), aad), aad: aad, want: "p"},
		{name: "previous key", sealed: k2.Seal([]byte("p"), aad), aad: aad, want: "p", wantStale: true},
		{name: "older previous key", sealed: k1.Seal([]byte("p"), aad), aad: aad, want: "p", wantStale: true},
		{name: "a key not in the ring", sealed: k4.Seal([]byte("p"), aad), aad: aad, wantErr: ErrOpen},
		{name: "previous key, other aad", sealed: k2.Seal([]byte("p"), aad), aad: []byte("acme\x00gen_2"), wantErr: ErrOpen},
		{name: "truncated", sealed: []byte{1, 2, 3}, aad: aad, wantErr: ErrOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, stale, err := ring.Open(tt.sealed, tt.aad)
			if !errors.Is(err, tt.wantErr) || string(got) != tt.want || stale != tt.wantStale {
				t.Errorf("Open = %q, stale %v, %v; want %q, stale %v, %v", got, stale, err, tt.want, tt.wantStale, tt.wantErr)
			}
		})
	}

	// A ring of the current key alone is the Sealer.
	alone, err := NewKeyring(k4)
	if err != nil {
		t.Fatal(err)
	}
	if got, stale, err := alone.Open(k4.Seal([]byte("p"), nil), nil); err != nil || stale || string(got) != "p" {
		t.Errorf("a one-key ring: %q, %v, %v", got, stale, err)
	}
}

// X-M3: a previous key that repeats the current one or another previous
// one is refused (a rotation that left the old key current), as is a ring
// without a current key.
func TestKeyringRefusesRepeats(t *testing.T) {
	t.Parallel()
	for name, prev := range map[string][]*Sealer{
		"the current key":  {key(t, 1)},
		"a previous twice": {key(t, 2), key(t, 2)},
	} {
		if _, err := NewKeyring(key(t, 1), prev...); err == nil {
			t.Errorf("%s as a previous key: accepted", name)
		}
	}
	if _, err := NewKeyring(nil); err == nil {
		t.Error("a ring without a current key: accepted")
	}
}

// X-M3: LoadKeyring reads the current and previous key files; a bad
// previous file is named by its setting and index, its content never
// quoted.
func TestLoadKeyring(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, content []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cur := write("new.key", bytes.Repeat([]byte{5}, KeySize))
	old := write("old.key", bytes.Repeat([]byte{6}, KeySize))
	bad := write("bad.key", []byte("hunter2-not-a-key"))

	ring, err := LoadKeyring(cur, []string{old})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{key(t, 5).ID(), key(t, 6).ID()}, ring.IDs()); diff != "" {
		t.Errorf("IDs (-want +got):\n%s", diff)
	}

	_, err = LoadKeyring(cur, []string{old, bad})
	if err == nil || !strings.Contains(err.Error(), "store.previous_encryption_key_files[1]") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a bad previous key file: %v", err)
	}
	if _, err := LoadKeyring(cur, []string{cur}); err == nil || !strings.Contains(err.Error(), "store.previous_encryption_key_files") {
		t.Errorf("the current key file as a previous one: %v", err)
	}
	if _, err := LoadKeyring(bad, nil); err == nil || !strings.Contains(err.Error(), "store.encryption_key_file") {
		t.Errorf("a bad current key file: %v", err)
	}
}
