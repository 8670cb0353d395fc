package oauthtokens

import (
	"context"
	"slices"
	"sync"
)

// memory is the Store of NewMemory.
type memory struct {
	mu     sync.Mutex
	tokens map[Key][]byte
}

// NewMemory returns a Store in the process's memory, for an agentd
// without store.encryption_key_file: its tokens are never written
// anywhere, so they are lost on restart and not shared between replicas
// (each end user authorizes again on each). It keeps copies: the caller
// may reuse what it passes and what it gets.
func NewMemory() Store { return &memory{tokens: make(map[Key][]byte)} }

func (m *memory) Get(_ context.Context, k Key) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.tokens[k]), nil
}

func (m *memory) Put(_ context.Context, k Key, token []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tokens[k] = slices.Clone(token)
	return nil
}

func (m *memory) Delete(_ context.Context, tenant, endUser, server string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for k := range m.tokens {
		if k.Tenant == tenant && (endUser == "" || k.EndUser == endUser) && (server == "" || k.Server == server) {
			delete(m.tokens, k)
			n++
		}
	}
	return n, nil
}
