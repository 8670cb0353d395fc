package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgTokens is the Tokens of a PostgreSQL database.
type pgTokens struct{ pool *pgxpool.Pool }

// Tokens returns the store's OAuth tokens.
func (p *Postgres) Tokens() Tokens { return pgTokens{p.pool} }

func (p pgTokens) GetToken(ctx context.Context, tenant, endUser, server string) ([]byte, error) {
	var data []byte
	err := p.pool.QueryRow(ctx, `SELECT data FROM oauth_tokens WHERE tenant = $1 AND end_user = $2 AND server = $3`,
		tenant, endUser, server).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, noToken()
	}
	if err != nil {
		return nil, classify(err)
	}
	return data, nil
}

func (p pgTokens) PutToken(ctx context.Context, tenant, endUser, server string, data []byte) error {
	_, err := p.pool.Exec(ctx, `
		INSERT INTO oauth_tokens (tenant, end_user, server, data, updated_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant, end_user, server) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`,
		tenant, endUser, server, data, ms(time.Now()))
	if err != nil {
		return classify(err)
	}
	return nil
}

func (p pgTokens) DeleteTokens(ctx context.Context, tenant, endUser, server string) (int64, error) {
	tag, err := p.pool.Exec(ctx, `
		DELETE FROM oauth_tokens
		WHERE tenant = $1 AND ($2 = '' OR end_user = $2) AND ($3 = '' OR server = $3)`,
		tenant, endUser, server)
	if err != nil {
		return 0, classify(err)
	}
	return tag.RowsAffected(), nil
}
