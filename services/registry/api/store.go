package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// store holds the API's SQL. Every mutation runs in tx, which writes the
// audit row in the same transaction.
type store struct {
	pool     *pgxpool.Pool
	meta     *meta.Store
	accounts *auth.Store
}

// auditEntry describes the change a mutation makes.
type auditEntry struct {
	action     string
	targetType string
	targetID   string
	details    map[string]any
}

// tx runs fn in a transaction and, when fn succeeds, appends the audit row
// it describes before committing.
func (s *store) tx(ctx context.Context, p *principal, fn func(pgx.Tx) (auditEntry, error)) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("api: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	ae, err := fn(tx)
	if err != nil {
		return pgErr(err)
	}
	details := ae.details
	if details == nil {
		details = map[string]any{}
	}
	dj, err := json.Marshal(details)
	if err != nil {
		return fmt.Errorf("api: audit details: %w", err)
	}
	_, err = tx.Exec(ctx, `insert into audit_log (actor_id, actor_name, action, target_type, target_id, request_id, remote_addr, details)
		values (nullif($1, '')::uuid, $2, $3, $4, $5, $6, $7, $8)`, // no account: an operator at the command line
		p.ID, p.Name, ae.action, ae.targetType, ae.targetID, p.requestID, p.remote, dj)
	if err != nil {
		return fmt.Errorf("api: audit: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return pgErr(fmt.Errorf("api: commit: %w", err))
	}
	return nil
}

// auditDenied records a refused mutation (outcome "denied: why") outside
// the refused transaction. The refusal stands even when the record cannot
// be written.
func (s *store) auditDenied(ctx context.Context, p *principal, ae auditEntry, why string) {
	dj, err := json.Marshal(ae.details)
	if err != nil {
		return
	}
	_, _ = s.pool.Exec(context.WithoutCancel(ctx), `insert into audit_log (actor_id, actor_name, action, target_type, target_id,
		outcome, request_id, remote_addr, details) values ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9)`,
		p.ID, p.Name, ae.action, ae.targetType, ae.targetID, "denied: "+why, p.requestID, p.remote, dj)
}

// pgErr maps constraint violations to user errors and faults of the
// database to meta.ErrUnavailable; other errors pass.
func pgErr(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return meta.Unavailable(err)
	}
	switch pe.Code {
	case "23505":
		return fmt.Errorf("%w: already exists", ErrConflict)
	case "23503":
		return fmt.Errorf("%w: a referenced object does not exist", ErrInvalid)
	case "23514", "22P02", "22001":
		return fmt.Errorf("%w: a value is out of range or malformed", ErrInvalid)
	}
	return meta.Unavailable(err)
}

func noRows(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	}
	return err
}

// Accounts ----------------------------------------------------------------------

func (s *store) createAccount(ctx context.Context, p *principal, name string, role auth.Role, password string) (registryapi.Account, error) {
	var hash *string
	if password != "" {
		h, err := s.accounts.HashPassword(ctx, password)
		if err != nil {
			return registryapi.Account{}, err
		}
		hash = &h
	}
	var a registryapi.Account
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		err := tx.QueryRow(ctx, `insert into accounts (name, role, password_hash) values ($1, $2, $3)
			returning id::text, name, role, disabled, created_at`, name, string(role), hash).
			Scan(&a.ID, &a.Name, &a.Role, &a.Disabled, &a.CreatedAt)
		return auditEntry{"account.create", "account", a.ID, map[string]any{"name": name, "role": role}}, err
	})
	return a, err
}

func (s *store) listAccounts(ctx context.Context, pg pageReq, role string) ([]registryapi.Account, error) {
	t, id := after(pg)
	rows, err := s.pool.Query(ctx, `select id::text, name, role, disabled, created_at from accounts
		where ($1 = '' or role = $1) and (created_at, id) > ($2, $3::uuid)
		order by created_at, id limit $4`, role, t, id, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.Account, error) {
		var a registryapi.Account
		return a, r.Scan(&a.ID, &a.Name, &a.Role, &a.Disabled, &a.CreatedAt)
	})
}

// after returns the keyset start of a page (the minimum when none).
func after(pg pageReq) (time.Time, string) {
	if pg.after == nil {
		return time.Unix(0, 0).UTC().AddDate(-100, 0, 0), "00000000-0000-0000-0000-000000000000"
	}
	return pg.after.T, pg.after.ID
}

// Tokens ------------------------------------------------------------------------

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
	rows, err := s.pool.Query(ctx, `select id::text, name, created_at, expires_at, last_used_at, revoked_at
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

// Signing keys -------------------------------------------------------------------

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
	rows, err := s.pool.Query(ctx, `select `+keyCols+` from signing_keys
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
	err := s.pool.QueryRow(ctx, `select id::text, name from accounts where id = coalesce(
			(select owner_id from repositories where name = $1),
			(select id from accounts where role = 'isv' and name = split_part($1, '/', 1)))`, repo).Scan(new(string), &rk.ISV)
	if errors.Is(err, pgx.ErrNoRows) {
		return rk, fmt.Errorf("%w: repository %s has no ISV", ErrNotFound, repo)
	}
	if err != nil {
		return rk, err
	}
	rows, err := s.pool.Query(ctx, `select `+keyCols+` from signing_keys k
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
