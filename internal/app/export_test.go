package app

import "github.com/agentd/agentd/internal/store"

// WithGenerations returns o whose AgentService records its generations in
// wrap(the store's record) instead of the store's own; a wrap that returns
// nil turns the record off (server.Options.Generations nil). For the
// benchmarks of durability's cost.
func WithGenerations(o Options, wrap func(store.Generations) store.Generations) Options {
	o.generations = wrap
	return o
}

// NewEmbeddedBridge is the bridge as agentd embeds it (newBridge for an
// in-memory listener): no TLS or peer checks, and the server tuned for
// in-memory connections (grpcserver.Options.InMemory).
func NewEmbeddedBridge(o Options) (*Bridge, error) { return newBridge(o, true) }
