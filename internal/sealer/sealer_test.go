package sealer

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadForms(t *testing.T) {
	key := bytes.Repeat([]byte{7}, KeySize)
	forms := map[string][]byte{
		"raw":    key,
		"hex":    []byte(hex.EncodeToString(key) + "\n"),
		"base64": []byte(base64.StdEncoding.EncodeToString(key)),
		"url64":  []byte(base64.RawURLEncoding.EncodeToString(key) + "\n"),
	}
	want, _ := New(key)
	for name, content := range forms {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "key")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if s.ID() != want.ID() {
				t.Fatalf("key id %s, want %s", s.ID(), want.ID())
			}
		})
	}
}

func TestLoadRefusesWithoutQuoting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte("hunter2-not-a-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Load: %v", err)
	}
}

func TestSealOpen(t *testing.T) {
	a, _ := New(bytes.Repeat([]byte{1}, KeySize))
	b, _ := New(bytes.Repeat([]byte{2}, KeySize))
	sealed := a.Seal([]byte("secret agent"), []byte("tenant\x00gen_1"))
	if bytes.Contains(sealed, []byte("secret")) {
		t.Fatal("sealed data holds the plain text")
	}
	if got, err := a.Open(sealed, []byte("tenant\x00gen_1")); err != nil || string(got) != "secret agent" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	for name, open := range map[string]func() ([]byte, error){
		"other key": func() ([]byte, error) { return b.Open(sealed, []byte("tenant\x00gen_1")) },
		"other aad": func() ([]byte, error) { return a.Open(sealed, []byte("tenant\x00gen_2")) },
		"truncated": func() ([]byte, error) { return a.Open(sealed[:5], nil) },
		"tampered": func() ([]byte, error) {
			s := bytes.Clone(sealed)
			s[len(s)-1] ^= 1
			return a.Open(s, []byte("tenant\x00gen_1"))
		},
	} {
		if _, err := open(); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: %v, want ErrOpen", name, err)
		}
	}
	if a.ID() == b.ID() {
		t.Fatal("two keys share an id")
	}
}
