package meta

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// UploadBody is an upload request body a replica is receiving, as recorded
// in upload_bodies so that every replica counts it against the limits of
// its account.
type UploadBody struct {
	ID      string // unique per body
	Replica string // the receiving process, for diagnosis
	Account string // name of the account it counts against; "" for none
}

// BodyLimits are the limits of one account's bodies in flight, across
// replicas; a value <= 0 is no limit.
type BodyLimits struct {
	// MaxBodies bounds the account's bodies in flight.
	MaxBodies int
	// MaxStaged bounds the account's bytes staged in open upload sessions
	// (as recorded) plus those reserved for its bodies in flight.
	MaxStaged int64
}

// ReserveUploadBody records body b, or updates its reservation, under the
// account's lock, and returns the bytes now reserved for it: want, or less
// when lim.MaxStaged leaves less room, but never below atLeast (the error
// wraps ErrStagingFull then). Recording a new body past lim.MaxBodies
// fails with ErrTooManyBodies. The body's lease runs for lease from now;
// bodies whose lease has passed no longer count and are deleted. A body
// whose row is gone (its lease passed) is recorded anew.
func (s *Store) ReserveUploadBody(ctx context.Context, b UploadBody, want, atLeast int64, lim BodyLimits, lease time.Duration) (int64, error) {
	var granted int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		known, others, otherBytes, staged, err := bodyUsage(ctx, tx, b)
		if err != nil {
			return err
		}
		if !known && lim.MaxBodies > 0 && others >= lim.MaxBodies {
			return fmt.Errorf("%w: account %q sends %d", ErrTooManyBodies, b.Account, others)
		}
		granted = want
		if lim.MaxStaged > 0 {
			granted = min(want, lim.MaxStaged-staged-otherBytes)
			if granted < atLeast || granted < 0 {
				return fmt.Errorf("%w: account %q has %d bytes staged and %d reserved of %d", ErrStagingFull,
					b.Account, staged, otherBytes, lim.MaxStaged)
			}
		}
		_, err = tx.Exec(ctx, `insert into upload_bodies (id, replica, account, reserved, lease_expires_at)
			values ($1, $2, $3, $4, now() + $5::bigint * interval '1 microsecond')
			on conflict (id) do update set reserved = excluded.reserved, lease_expires_at = excluded.lease_expires_at`,
			b.ID, b.Replica, b.Account, granted, lease.Microseconds())
		if err != nil {
			return fmt.Errorf("meta: upload body %s: %w", b.ID, err)
		}
		return nil
	})
	return granted, err
}

// bodyUsage takes the lock of b's account for the transaction, deletes
// its bodies whose lease has passed, and reports whether b is recorded,
// how many other bodies the account has in flight and the bytes reserved
// for them, and the bytes staged in its upload sessions.
func bodyUsage(ctx context.Context, tx pgx.Tx, b UploadBody) (known bool, others int, otherBytes, staged int64, err error) {
	fail := func(err error) (bool, int, int64, int64, error) {
		return false, 0, 0, 0, fmt.Errorf("meta: upload bodies of %q: %w", b.Account, err)
	}
	// Serializes the admissions of one account across replicas.
	if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock(hashtextextended('faas-registry upload bodies of ' || $1, 0))`, b.Account); err != nil {
		return fail(err)
	}
	// Expired rows are deleted in passing; the counts, which see the
	// table as it was when the statement began, skip them.
	err = tx.QueryRow(ctx, `with expired as (
			delete from upload_bodies where account = $1 and lease_expires_at < now() returning 1),
		live as (
			select id, reserved from upload_bodies where account = $1 and lease_expires_at >= now())
		select
			exists (select 1 from live where id = $2),
			(select count(*) from live where id <> $2),
			(select coalesce(sum(reserved), 0)::bigint from live where id <> $2),
			(select coalesce(sum(byte_offset), 0)::bigint from upload_sessions
				where account_id is not distinct from (select id from accounts where name = $1)),
			(select count(*) from expired)`,
		b.Account, b.ID).Scan(&known, &others, &otherBytes, &staged, new(int64))
	if err != nil {
		return fail(err)
	}
	return known, others, otherBytes, staged, nil
}

// RenewUploadBodies extends the leases of the bodies ids to lease from
// now, in one statement whatever their number.
func (s *Store) RenewUploadBodies(ctx context.Context, ids []string, lease time.Duration) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.pool.Exec(ctx, `update upload_bodies set lease_expires_at = now() + $2::bigint * interval '1 microsecond'
		where id = any($1)`, ids, lease.Microseconds())
	if err != nil {
		return fmt.Errorf("meta: renew upload bodies: %w", err)
	}
	return nil
}

// EndUploadBody deletes body id: it no longer counts. Deleting a body
// that is gone is no error.
func (s *Store) EndUploadBody(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `delete from upload_bodies where id = $1`, id); err != nil {
		return fmt.Errorf("meta: upload body %s: %w", id, err)
	}
	return nil
}

// ExpireUploadBodies deletes the bodies whose lease has passed (a crashed
// replica's) and returns how many.
func (s *Store) ExpireUploadBodies(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `delete from upload_bodies where lease_expires_at < now()`)
	if err != nil {
		return 0, fmt.Errorf("meta: expire upload bodies: %w", err)
	}
	return tag.RowsAffected(), nil
}
