package store

import (
	"context"

	"github.com/agentd/agentd/internal/fault"
)

// Tokens stores the OAuth tokens that agentd holds for MCP servers:
// one per tenant, end user and server. The store keeps them as
// given: the caller seals them (internal/oauthtokens), and server is an
// opaque key of the caller's (a hash of the server's URL, whose path may
// carry a secret), never a URL. An empty endUser is an end user like
// any other (the one of callers that name none). All methods are safe
// for concurrent use, by this process and by other replicas sharing the
// database.
type Tokens interface {
	// GetToken returns the sealed token of (tenant, endUser, server), or
	// NotFound when there is none.
	GetToken(ctx context.Context, tenant, endUser, server string) ([]byte, error)

	// PutToken stores data as the token of (tenant, endUser, server),
	// replacing any earlier one. Of concurrent puts, the last to commit
	// stays.
	PutToken(ctx context.Context, tenant, endUser, server string, data []byte) error

	// DeleteTokens deletes tenant's tokens, only endUser's when it is not
	// empty and only server's when it is not empty, and returns how many
	// it deleted. Deleting none is no error.
	DeleteTokens(ctx context.Context, tenant, endUser, server string) (int64, error)
}

func noToken() error {
	// The key names no server (a hash would say nothing) and no end user
	// (an application's id for a person).
	return fault.New(fault.NotFound, "no OAuth token stored for this end user and server")
}
