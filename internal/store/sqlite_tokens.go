package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// sqliteTokens is the Tokens of an SQLite database.
type sqliteTokens struct{ db *sql.DB }

// Tokens returns the store's OAuth tokens.
func (s *SQLite) Tokens() Tokens { return sqliteTokens{s.db} }

func (s sqliteTokens) GetToken(ctx context.Context, tenant, endUser, server string) ([]byte, error) {
	var data []byte
	err := s.db.QueryRowContext(ctx, `SELECT data FROM oauth_tokens WHERE tenant = ? AND end_user = ? AND server = ?`,
		tenant, endUser, server).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, noToken()
	}
	if err != nil {
		return nil, unavailable(err)
	}
	return data, nil
}

func (s sqliteTokens) PutToken(ctx context.Context, tenant, endUser, server string, data []byte) error {
	_, err := s.db.ExecContext(ctx, `
		INSERT INTO oauth_tokens (tenant, end_user, server, data, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, end_user, server) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`,
		tenant, endUser, server, data, time.Now().UnixMilli())
	if err != nil {
		return unavailable(err)
	}
	return nil
}

func (s sqliteTokens) DeleteTokens(ctx context.Context, tenant, endUser, server string) (int64, error) {
	res, err := s.db.ExecContext(ctx, `
		DELETE FROM oauth_tokens
		WHERE tenant = ? AND (? = '' OR end_user = ?) AND (? = '' OR server = ?)`,
		tenant, endUser, endUser, server, server)
	if err != nil {
		return 0, unavailable(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, unavailable(err)
	}
	return n, nil
}
