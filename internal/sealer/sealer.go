// Package sealer seals data at rest with AES-256-GCM under a key read from
// a file (store.encryption_key_file): what agentd keeps in its store that
// holds secrets, such as a running generation's agent declaration, which
// another replica needs whole to adopt the generation, and the OAuth
// tokens of MCP servers.
//
// A Keyring rotates the key: the current key seals, and the keys it
// replaced (store.previous_encryption_key_files) still open what they
// sealed, saying so, for the caller to seal it again under the current
// one.
package sealer

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
)

// KeySize is the key's length: AES-256.
const KeySize = 32

// Sealer seals and opens data under one key. Safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
	id   string
}

// Load reads the key file at path: 32 bytes, raw, or written as hex (64
// characters) or base64 (standard or URL alphabet), surrounding white space
// ignored. Errors never quote the file's content.
func Load(path string) (*Sealer, error) {
	return load(path, "store.encryption_key_file")
}

// load is Load, its errors naming setting.
func load(path, setting string) (*Sealer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	key, err := parseKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", setting, err)
	}
	return New(key)
}

func parseKey(b []byte) ([]byte, error) {
	if len(b) == KeySize {
		return b, nil
	}
	s := string(bytes.TrimSpace(b))
	if k, err := hex.DecodeString(s); err == nil && len(k) == KeySize {
		return k, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == KeySize {
			return k, nil
		}
	}
	return nil, errors.New("the file must hold a 32-byte key: raw, or as 64 hex digits, or in base64 (for example: openssl rand -hex 32)")
}

// New returns a Sealer for a 32-byte key.
func New(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("an encryption key has %d bytes, not %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("agentd key id\x00"), key...))
	return &Sealer{aead: aead, id: hex.EncodeToString(sum[:4])}, nil
}

// ID identifies the key without revealing it: a replica that finds data
// sealed under another key can say which, rather than only that it cannot
// open it.
func (s *Sealer) ID() string { return s.id }

// Seal encrypts and authenticates plain, bound to aad (which is not
// stored): a fresh random nonce, then the ciphertext.
func (s *Sealer) Seal(plain, aad []byte) []byte {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	_, _ = rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, plain, aad)
}

// ErrOpen is why Open fails: the data was sealed under another key or for
// other additional data, or it was altered.
var ErrOpen = errors.New("sealed data cannot be opened with this key")

// Open decrypts what Seal returned for the same aad.
func (s *Sealer) Open(sealed, aad []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n+s.aead.Overhead() {
		return nil, ErrOpen
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}
