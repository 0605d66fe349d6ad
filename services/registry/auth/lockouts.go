package auth

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/services/registry/meta"
)

// Scopes of the rows of login_failures.
const (
	scopeAccount = "account"
	scopeSource  = "source"
)

// recordTimeout bounds the write of a password check's outcome, which is
// made even when the client went away meanwhile.
const recordTimeout = 5 * time.Second

// purgeBatch bounds the forgotten rows one recorded failure purges.
const purgeBatch = 100

// sharedLockouts keeps the failure counts and lockouts of Limits.Account
// and Limits.Source in PostgreSQL (login_failures, migrations/004), where
// every replica of the registry reads and counts them: a guesser spreading
// tries over N replicas gets the budget of one. The guard's memory keeps
// what is per process by nature: the checks in flight, the queue, and the
// hashing memory, which protects this process's own memory.
type sharedLockouts struct {
	pool *pgxpool.Pool
}

// lockState is the shared state of one account or source.
type lockState struct {
	failures    int
	lockedUntil time.Time
	forgetAt    time.Time
}

// read returns the shared state of the account name and, when source is
// not empty, of the source, as of now (forgotten counts are zero).
func (s *sharedLockouts) read(ctx context.Context, name, source string, now time.Time) (acct, src lockState, err error) {
	rows, err := s.pool.Query(ctx, `select scope, failures, locked_until, forget_at
		from login_failures
		where ((scope = 'account' and key = $1) or (scope = 'source' and key = $2)) and forget_at > $3`,
		name, source, now)
	if err != nil {
		return acct, src, fmt.Errorf("auth: login failures: %w", meta.Unavailable(err))
	}
	defer rows.Close()
	for rows.Next() {
		var scope string
		var st lockState
		var locked *time.Time
		if err := rows.Scan(&scope, &st.failures, &locked, &st.forgetAt); err != nil {
			return acct, src, fmt.Errorf("auth: login failures: %w", meta.Unavailable(err))
		}
		if locked != nil {
			st.lockedUntil = *locked
		}
		if scope == scopeAccount {
			acct = st
		} else {
			src = st
		}
	}
	if err := rows.Err(); err != nil {
		return acct, src, fmt.Errorf("auth: login failures: %w", meta.Unavailable(err))
	}
	return acct, src, nil
}

// fail counts a failure of key in scope under policy b at now, locking it
// out once past b.Free, and purges some forgotten rows.
func (s *sharedLockouts) fail(ctx context.Context, scope, key string, b Backoff, now time.Time) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The count restarts when the old one was forgotten; a concurrent
		// failure on another replica waits for this row lock.
		var failures int
		err := tx.QueryRow(ctx, `insert into login_failures as f (scope, key, failures, forget_at)
			values ($1, $2, 1, $3)
			on conflict (scope, key) do update
			set failures = case when f.forget_at <= $3 then 1 else f.failures + 1 end
			returning failures`, scope, key, now).Scan(&failures)
		if err != nil {
			return fmt.Errorf("auth: record login failure: %w", meta.Unavailable(err))
		}
		var locked *time.Time
		until := now
		if n := failures - b.Free; n > 0 {
			until = now.Add(b.lockout(n))
			locked = &until
		}
		if _, err := tx.Exec(ctx, `update login_failures set locked_until = $3, forget_at = $4
			where scope = $1 and key = $2`, scope, key, locked, until.Add(b.Max)); err != nil {
			return fmt.Errorf("auth: record login failure: %w", meta.Unavailable(err))
		}
		if _, err := tx.Exec(ctx, `delete from login_failures where ctid = any(array(
			select ctid from login_failures where forget_at <= $1 limit $2))`, now, purgeBatch); err != nil {
			return fmt.Errorf("auth: purge login failures: %w", meta.Unavailable(err))
		}
		return nil
	})
}

// reset forgets the failures of the account name (after a success).
func (s *sharedLockouts) reset(ctx context.Context, name string) error {
	if _, err := s.pool.Exec(ctx, `delete from login_failures where scope = 'account' and key = $1`, name); err != nil {
		return fmt.Errorf("auth: reset login failures: %w", meta.Unavailable(err))
	}
	return nil
}

// record writes the outcome of a's check: a success forgets the account's
// failures (not the source's), a failure counts for both. It runs before
// the check ends in memory, so that a check queued behind it reads the
// count it left. A write that fails is not retried: the check's answer is
// decided, the count stays in this process's memory until its next read,
// and a database that fails writes fails the account lookups of
// Authenticate too.
func (g *guard) record(a *attempt, ok bool, now time.Time) {
	ctx, cancel := context.WithTimeout(a.ctx, recordTimeout)
	defer cancel()
	if ok {
		_ = g.shared.reset(ctx, a.name)
		return
	}
	_ = g.shared.fail(ctx, scopeAccount, a.name, g.cfg.Account, now)
	if a.src != nil {
		_ = g.shared.fail(ctx, scopeSource, a.source, g.cfg.Source, now)
	}
}

// adopt makes the shared state of e's account or source its own: the
// database holds the counts of every replica, this process's included.
func (t *tracker[K]) adopt(e *entry[K], st lockState) {
	e.failures, e.lockedUntil, e.forgetAt = st.failures, st.lockedUntil, st.forgetAt
}
