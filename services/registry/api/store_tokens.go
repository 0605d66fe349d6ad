package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/jackc/pgx/v5"
)

func (s *store) issueToken(ctx context.Context, p *principal, name string, expires *time.Time) (registryapi.Token, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return registryapi.Token{}, fmt.Errorf("api: token: %w", err)
	}
	t := registryapi.Token{Name: name, Secret: auth.TokenPrefix + base64.RawURLEncoding.EncodeToString(raw), ExpiresAt: expires}
	sum := sha256.Sum256([]byte(t.Secret))
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		err := tx.QueryRow(ctx, `insert into api_tokens (account_id, name, token_hash, expires_at)
			values ($1::uuid, $2, $3, $4) returning id::text, created_at`, p.ID, name, sum[:], expires).
			Scan(&t.ID, &t.CreatedAt)
		return auditEntry{"token.create", "api_token", t.ID, map[string]any{"name": name}}, err
	})
	return t, err
}

func (s *store) listTokens(ctx context.Context, accountID string, pg pageReq) ([]registryapi.Token, error) {
	t, id := after(pg)
	rows, err := s.db.Query(ctx, `select id::text, name, created_at, expires_at, last_used_at, revoked_at
		from api_tokens where account_id = $1::uuid and (created_at, id) > ($2, $3::uuid)
		order by created_at, id limit $4`, accountID, t, id, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.Token, error) {
		var k registryapi.Token
		return k, r.Scan(&k.ID, &k.Name, &k.CreatedAt, &k.ExpiresAt, &k.LastUsedAt, &k.RevokedAt)
	})
}

func (s *store) revokeToken(ctx context.Context, p *principal, tokenID string) error {
	return s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		var id string
		err := tx.QueryRow(ctx, `update api_tokens set revoked_at = coalesce(revoked_at, now())
			where id = $1::uuid and account_id = $2::uuid returning id::text`, tokenID, p.ID).Scan(&id)
		return auditEntry{"token.revoke", "api_token", tokenID, nil}, noRows(err, "token")
	})
}
