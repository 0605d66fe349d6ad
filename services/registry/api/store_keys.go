package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/jackc/pgx/v5"
)

const keyCols = `id::text, account_id::text, key_id, algorithm, public_key, created_at, revoked_at`

func scanKey(r pgx.Row) (registryapi.SigningKey, error) {
	var k registryapi.SigningKey
	return k, r.Scan(&k.ID, &k.AccountID, &k.KeyID, &k.Algorithm, &k.PublicKey, &k.CreatedAt, &k.RevokedAt)
}

func (s *store) addKey(ctx context.Context, p *principal, keyID, alg, pemText string) (registryapi.SigningKey, error) {
	var k registryapi.SigningKey
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		var err error
		k, err = scanKey(tx.QueryRow(ctx, `insert into signing_keys (account_id, key_id, algorithm, public_key)
			values ($1::uuid, $2, $3, $4) returning `+keyCols, p.ID, keyID, alg, pemText))
		return auditEntry{"key.create", "signing_key", k.ID, map[string]any{"key_id": keyID}}, err
	})
	return k, err
}

// listKeys lists the keys of account (all accounts when "").
func (s *store) listKeys(ctx context.Context, account string, pg pageReq) ([]registryapi.SigningKey, error) {
	t, id := after(pg)
	rows, err := s.db.Query(ctx, `select `+keyCols+` from signing_keys
		where ($1 = '' or account_id::text = $1) and (created_at, id) > ($2, $3::uuid)
		order by created_at, id limit $4`, account, t, id, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.SigningKey, error) { return scanKey(r) })
}

// repositoryKeys returns the unrevoked keys of the ISV owning repo: the
// repository's owner, else the isv account named like its namespace (the
// same rule validation applies).
func (s *store) repositoryKeys(ctx context.Context, repo string) (registryapi.RepositoryKeys, error) {
	rk := registryapi.RepositoryKeys{Repository: repo, Keys: []registryapi.SigningKey{}}
	err := s.db.QueryRow(ctx, `select id::text, name from accounts where id = coalesce(
			(select owner_id from repositories where name = $1),
			(select id from accounts where role = 'isv' and name = split_part($1, '/', 1)))`, repo).Scan(new(string), &rk.ISV)
	if errors.Is(err, pgx.ErrNoRows) {
		return rk, fmt.Errorf("%w: repository %s has no ISV", ErrNotFound, repo)
	}
	if err != nil {
		return rk, err
	}
	rows, err := s.db.Query(ctx, `select `+keyCols+` from signing_keys k
		where revoked_at is null and account_id = (select id from accounts where name = $1)
		order by created_at, id limit 100`, rk.ISV)
	if err != nil {
		return rk, err
	}
	rk.Keys, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.SigningKey, error) { return scanKey(r) })
	return rk, err
}

// revokeKey revokes key id; unless p is an admin it must be p's.
func (s *store) revokeKey(ctx context.Context, p *principal, id string) (registryapi.SigningKey, error) {
	var k registryapi.SigningKey
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		var err error
		k, err = scanKey(tx.QueryRow(ctx, `update signing_keys set revoked_at = coalesce(revoked_at, now())
			where id = $1::uuid and ($2 or account_id = $3::uuid) returning `+keyCols,
			id, p.is(auth.RoleAdmin), p.ID))
		return auditEntry{"key.revoke", "signing_key", id, nil}, noRows(err, "signing key")
	})
	return k, err
}
