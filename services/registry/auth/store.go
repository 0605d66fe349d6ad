package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/services/registry/clientip"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// Role is an account's role; the database checks the same set.
type Role string

const (
	RoleISV    Role = "isv"    // publishes IP; owns the repository namespace of its name
	RoleTenant Role = "tenant" // runs images it is entitled to
	RoleAdmin  Role = "admin"  // operates the marketplace
	RoleNode   Role = "node"   // a registered node agent
)

// Valid reports whether r is one of the four roles.
func (r Role) Valid() bool {
	switch r {
	case RoleISV, RoleTenant, RoleAdmin, RoleNode:
		return true
	}
	return false
}

// Account is a row of the accounts table, without its password hash.
type Account struct {
	ID        string // uuid
	Name      string
	Role      Role
	Disabled  bool
	CreatedAt time.Time
}

// APIToken describes an issued API token; the secret itself is never stored.
type APIToken struct {
	ID         string // uuid
	AccountID  string
	Name       string
	CreatedAt  time.Time
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// TokenPrefix starts every API token secret, so that leaked tokens are easy to
// recognise (secret scanners) and tell apart from passwords.
const TokenPrefix = "faas_"

const tokenBytes = 32

var tokenLen = len(TokenPrefix) + base64.RawURLEncoding.EncodedLen(tokenBytes)

// Same rule as the accounts.name check constraint.
var nameRE = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*$`)

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// MaxPasswordLen bounds passwords (bytes) to keep hashing cost predictable.
const MaxPasswordLen = 1024

// Store keeps accounts and API tokens in PostgreSQL.
type Store struct {
	pool   *pgxpool.Pool
	params Params
	dummy  string // a hash under params, verified when the account is missing
	limits Limits
	guard  *guard
}

// Option configures a Store.
type Option func(*Store)

// WithParams sets the argon2id costs for new password hashes (and the dummy
// hash). Tests use small ones; production keeps DefaultParams.
func WithParams(p Params) Option { return func(s *Store) { s.params = p } }

// WithLimits sets the guards on password checks; without it every field of
// Limits takes its default.
func WithLimits(l Limits) Option { return func(s *Store) { s.limits = l } }

// NewStore returns a Store over pool, whose schema must be migrated
// (migrations.ApplyPool).
func NewStore(pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	s := &Store{pool: pool, params: DefaultParams}
	for _, o := range opts {
		o(s)
	}
	dummy, err := HashPassword("dummy password for unknown accounts", s.params)
	if err != nil {
		return nil, err
	}
	s.dummy = dummy
	s.guard = newGuard(s.limits)
	s.guard.shared = &sharedLockouts{pool: pool}
	return s, nil
}

// Create adds an account. An empty password creates an account without
// password login (API tokens only). Passwords may not start with TokenPrefix.
func (s *Store) Create(ctx context.Context, name string, role Role, password string) (Account, error) {
	if len(name) > 64 || !nameRE.MatchString(name) {
		return Account{}, fmt.Errorf("%w: account name %q", ErrInvalid, name)
	}
	if !role.Valid() {
		return Account{}, fmt.Errorf("%w: role %q", ErrInvalid, role)
	}
	if len(password) > MaxPasswordLen {
		return Account{}, fmt.Errorf("%w: password longer than %d bytes", ErrInvalid, MaxPasswordLen)
	}
	if strings.HasPrefix(password, TokenPrefix) {
		return Account{}, fmt.Errorf("%w: password may not start with %q", ErrInvalid, TokenPrefix)
	}
	var hash *string
	if password != "" {
		h, err := s.HashPassword(ctx, password)
		if err != nil {
			return Account{}, err
		}
		hash = &h
	}
	a := Account{Name: name, Role: role}
	err := s.pool.QueryRow(ctx,
		`insert into accounts (name, role, password_hash) values ($1, $2, $3) returning id::text, created_at`,
		name, string(role), hash).Scan(&a.ID, &a.CreatedAt)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return Account{}, fmt.Errorf("%w: account %q", ErrExists, name)
		}
		return Account{}, fmt.Errorf("auth: create account: %w", meta.Unavailable(err))
	}
	return a, nil
}

// SetPassword replaces an account's password (empty: disable password login).
func (s *Store) SetPassword(ctx context.Context, name, password string) error {
	if len(password) > MaxPasswordLen || strings.HasPrefix(password, TokenPrefix) {
		return fmt.Errorf("%w: password", ErrInvalid)
	}
	var hash *string
	if password != "" {
		h, err := s.HashPassword(ctx, password)
		if err != nil {
			return err
		}
		hash = &h
	}
	tag, err := s.pool.Exec(ctx, `update accounts set password_hash = $2, updated_at = now() where name = $1`, name, hash)
	if err != nil {
		return fmt.Errorf("auth: set password: %w", meta.Unavailable(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: account %q", ErrNotFound, name)
	}
	return nil
}

// Lookup returns the account called name.
func (s *Store) Lookup(ctx context.Context, name string) (Account, error) {
	var a Account
	var role string
	err := s.pool.QueryRow(ctx,
		`select id::text, name, role, disabled, created_at from accounts where name = $1`, name).
		Scan(&a.ID, &a.Name, &role, &a.Disabled, &a.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Account{}, fmt.Errorf("%w: account %q", ErrNotFound, name)
	}
	if err != nil {
		return Account{}, fmt.Errorf("auth: lookup account: %w", meta.Unavailable(err))
	}
	a.Role = Role(role)
	return a, nil
}

// HashPassword hashes password under the Store's costs (WithParams) within
// the hashing memory budget of its Limits; it may fail with a *RetryError
// wrapping ErrBusy.
func (s *Store) HashPassword(ctx context.Context, password string) (string, error) {
	var h string
	var err error
	if gerr := s.guard.hash(ctx, s.params.Memory, func() { h, err = HashPassword(password, s.params) }); gerr != nil {
		return "", gerr
	}
	return h, err
}

// Authenticate checks name and password. Unknown account, disabled account,
// account without password, unreadable hash and wrong password all cost one
// argon2id verification and return ErrUnauthenticated itself, so callers
// cannot tell them apart (no account enumeration). Database failures are
// returned as other errors.
//
// Every check passes the Store's Limits first: a *RetryError wrapping
// ErrRateLimited when the account name or the client address of ctx
// (clientip.FromContext) failed too often lately, whether or not the
// password is right, or wrapping ErrBusy when hashing memory stays short.
func (s *Store) Authenticate(ctx context.Context, name, password string) (Account, error) {
	src, _ := clientip.FromContext(ctx)
	att, err := s.guard.begin(ctx, name, src)
	if err != nil {
		return Account{}, err
	}
	defer att.abandoned() // unless it ended before

	var a Account
	var role string
	var hash *string
	err = s.pool.QueryRow(ctx,
		`select id::text, name, role, disabled, created_at, password_hash from accounts where name = $1`, name).
		Scan(&a.ID, &a.Name, &role, &a.Disabled, &a.CreatedAt, &hash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Account{}, fmt.Errorf("auth: authenticate: %w", meta.Unavailable(err))
	}
	a.Role = Role(role)
	if len(password) > MaxPasswordLen {
		password = password[:MaxPasswordLen] // still spend the same work; cannot match a stored hash's input
		hash = nil
	}
	encoded := s.dummy
	usable := err == nil && hash != nil && !a.Disabled
	var p Params
	var salt, key []byte
	if usable {
		if p, salt, key, err = ParseHash(*hash); err == nil {
			encoded = *hash
		} else {
			usable = false
		}
	}
	if !usable {
		p, salt, key, _ = ParseHash(encoded)
	}
	var match bool
	if err := s.guard.hash(ctx, p.Memory, func() { match = verify(password, p, salt, key) }); err != nil {
		return Account{}, err
	}
	if !match || !usable {
		att.failed()
		return Account{}, ErrUnauthenticated
	}
	att.succeeded()
	return a, nil
}

// IssueToken creates an API token named name for the account with id
// accountID and returns its secret, which is shown once and stored only as
// its SHA-256.
func (s *Store) IssueToken(ctx context.Context, accountID, name string) (string, error) {
	if !uuidRE.MatchString(accountID) {
		return "", fmt.Errorf("%w: account %q", ErrNotFound, accountID)
	}
	if len(name) > 128 {
		return "", fmt.Errorf("%w: token name too long", ErrInvalid)
	}
	raw := make([]byte, tokenBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("auth: token: %w", err)
	}
	secret := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(secret))
	tag, err := s.pool.Exec(ctx,
		`insert into api_tokens (account_id, name, token_hash)
		 select id, $2, $3 from accounts where id = $1::uuid`, accountID, name, sum[:])
	if err != nil {
		return "", fmt.Errorf("auth: issue token: %w", meta.Unavailable(err))
	}
	if tag.RowsAffected() == 0 {
		return "", fmt.Errorf("%w: account %s", ErrNotFound, accountID)
	}
	return secret, nil
}

// CheckTokenFormat reports whether secret looks like an API token.
func CheckTokenFormat(secret string) error {
	_, err := base64.RawURLEncoding.Strict().DecodeString(strings.TrimPrefix(secret, TokenPrefix))
	if len(secret) != tokenLen || !strings.HasPrefix(secret, TokenPrefix) || err != nil {
		return fmt.Errorf("%w: an API token is %q and %d base64url characters", ErrInvalid, TokenPrefix, tokenLen-len(TokenPrefix))
	}
	return nil
}

// ImportToken records secret, which the caller chose, as an API token named
// name of the account with id accountID: for bootstrap steps that must
// know a token before the registry runs, such as a development cluster's
// published ones (deploy/k8s/overlays/dev). The secret must look like one
// IssueToken makes.
func (s *Store) ImportToken(ctx context.Context, accountID, name, secret string) error {
	if err := CheckTokenFormat(secret); err != nil {
		return err
	}
	if !uuidRE.MatchString(accountID) {
		return fmt.Errorf("%w: account %q", ErrNotFound, accountID)
	}
	sum := sha256.Sum256([]byte(secret))
	tag, err := s.pool.Exec(ctx,
		`insert into api_tokens (account_id, name, token_hash)
		 select id, $2, $3 from accounts where id = $1::uuid`, accountID, name, sum[:])
	if err != nil {
		return fmt.Errorf("auth: import token: %w", meta.Unavailable(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: account %s", ErrNotFound, accountID)
	}
	return nil
}

// AuthenticateToken returns the account an API token secret belongs to, if
// the token is well-formed, known, unrevoked and unexpired, and the account is
// not disabled; otherwise ErrUnauthenticated. The secret is looked up by its
// SHA-256, so no comparison ever runs on the secret itself (timing reveals at
// most a prefix of a hash, useless for guessing).
func (s *Store) AuthenticateToken(ctx context.Context, secret string) (Account, error) {
	if len(secret) != tokenLen || !strings.HasPrefix(secret, TokenPrefix) {
		return Account{}, ErrUnauthenticated
	}
	if _, err := base64.RawURLEncoding.Strict().DecodeString(secret[len(TokenPrefix):]); err != nil {
		return Account{}, ErrUnauthenticated
	}
	sum := sha256.Sum256([]byte(secret))
	var a Account
	var role string
	err := s.pool.QueryRow(ctx,
		`update api_tokens t set last_used_at = now()
		 from accounts a
		 where t.token_hash = $1 and a.id = t.account_id
		   and t.revoked_at is null and (t.expires_at is null or t.expires_at > now())
		   and not a.disabled
		 returning a.id::text, a.name, a.role, a.disabled, a.created_at`, sum[:]).
		Scan(&a.ID, &a.Name, &role, &a.Disabled, &a.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Account{}, ErrUnauthenticated
	}
	if err != nil {
		return Account{}, fmt.Errorf("auth: authenticate token: %w", meta.Unavailable(err))
	}
	a.Role = Role(role)
	return a, nil
}

// Tokens lists the account's API tokens, newest first, revoked ones included.
func (s *Store) Tokens(ctx context.Context, accountID string) ([]APIToken, error) {
	if !uuidRE.MatchString(accountID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx,
		`select id::text, account_id::text, name, created_at, expires_at, last_used_at, revoked_at
		 from api_tokens where account_id = $1::uuid order by created_at desc, id`, accountID)
	if err != nil {
		return nil, fmt.Errorf("auth: list tokens: %w", meta.Unavailable(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (APIToken, error) {
		var t APIToken
		err := r.Scan(&t.ID, &t.AccountID, &t.Name, &t.CreatedAt, &t.ExpiresAt, &t.LastUsedAt, &t.RevokedAt)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("auth: list tokens: %w", meta.Unavailable(err))
	}
	return out, nil
}

// RevokeToken revokes the token tokenID of the account accountID; a token of
// another account is ErrNotFound. Revoking twice is not an error.
func (s *Store) RevokeToken(ctx context.Context, accountID, tokenID string) error {
	if !uuidRE.MatchString(accountID) || !uuidRE.MatchString(tokenID) {
		return fmt.Errorf("%w: token %q", ErrNotFound, tokenID)
	}
	tag, err := s.pool.Exec(ctx,
		`update api_tokens set revoked_at = coalesce(revoked_at, now())
		 where id = $1::uuid and account_id = $2::uuid`, tokenID, accountID)
	if err != nil {
		return fmt.Errorf("auth: revoke token: %w", meta.Unavailable(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: token %s", ErrNotFound, tokenID)
	}
	return nil
}
