package portal

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// session is a signed-in browser.
type session struct {
	idHash  []byte
	account auth.Account
	csrf    string
	expires time.Time
}

// sessions keeps sign-in sessions in PostgreSQL (migration 005).
type sessions struct {
	pool *pgxpool.Pool
	ttl  time.Duration // absolute lifetime
	idle time.Duration // expiry without activity
	max  int           // sessions per account; the oldest go first
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("portal: random: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func hashID(id string) []byte {
	h := sha256.Sum256([]byte(id))
	return h[:]
}

// create opens a session for acct and returns its cookie value.
func (s *sessions) create(ctx context.Context, acct auth.Account) (string, *session, error) {
	id, err := randomToken()
	if err != nil {
		return "", nil, err
	}
	csrf, err := randomToken()
	if err != nil {
		return "", nil, err
	}
	se := &session{idHash: hashID(id), account: acct, csrf: csrf, expires: time.Now().Add(s.ttl)}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `insert into portal_sessions (id_hash, account_id, csrf, expires_at)
			values ($1, $2, $3, $4)`, se.idHash, acct.ID, csrf, se.expires); err != nil {
			return err
		}
		// Bound the sessions of one account: the oldest beyond max end.
		_, err := tx.Exec(ctx, `delete from portal_sessions where account_id = $1 and id_hash in (
			select id_hash from portal_sessions where account_id = $1
			order by created_at desc offset $2)`, acct.ID, s.max)
		return err
	})
	if err != nil {
		return "", nil, fmt.Errorf("portal: create session: %w", err)
	}
	return id, se, nil
}

// errNoSession: the cookie names no live session.
var errNoSession = errors.New("portal: no session")

// get returns the live session of cookie value id and marks it seen. An
// expired, idle or unknown session, or one of a disabled account, is
// errNoSession.
func (s *sessions) get(ctx context.Context, id string) (*session, error) {
	if len(id) != 43 { // base64 of 32 bytes, unpadded
		return nil, errNoSession
	}
	se := &session{idHash: hashID(id)}
	var role string
	err := s.pool.QueryRow(ctx, `update portal_sessions p set seen_at = now()
		from accounts a
		where p.id_hash = $1 and a.id = p.account_id and not a.disabled
		  and p.expires_at > now() and p.seen_at > now() - $2::interval
		returning a.id::text, a.name, a.role, a.created_at, p.csrf, p.expires_at`,
		se.idHash, s.idle.String()).Scan(&se.account.ID, &se.account.Name, &role, &se.account.CreatedAt,
		&se.csrf, &se.expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errNoSession
	}
	if err != nil {
		return nil, fmt.Errorf("portal: session: %w", err)
	}
	se.account.Role = auth.Role(role)
	return se, nil
}

// end removes the session.
func (s *sessions) end(ctx context.Context, se *session) error {
	if _, err := s.pool.Exec(ctx, `delete from portal_sessions where id_hash = $1`, se.idHash); err != nil {
		return fmt.Errorf("portal: end session: %w", err)
	}
	return nil
}

// sweep removes expired sessions.
func (s *sessions) sweep(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `delete from portal_sessions
		where expires_at <= now() or seen_at <= now() - $1::interval`, s.idle.String())
	if err != nil {
		return 0, fmt.Errorf("portal: sweep sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}

// validCSRF compares a submitted token with the session's in constant time.
func (se *session) validCSRF(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), []byte(se.csrf)) == 1
}
