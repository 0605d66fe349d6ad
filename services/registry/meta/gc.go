package meta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrGCBusy: another garbage collection holds the collection lock.
var ErrGCBusy = errors.New("meta: another garbage collection is running")

// Advisory lock keys. The two-key form (blobLockClass, hashtext(digest))
// lives in a key space apart from the one-key form of gcLockKey and
// migrations.LockKey; two digests that share a hash only serialize each
// other's commits and sweeps, which is harmless.
const (
	gcLockKey     int64 = 0x66616173_67633031 // "faasgc01": one collection at a time
	blobLockClass int32 = 0x66626c62          // "fblb": a digest being committed or swept
)

// HoldBlob announces that blob digest is about to be committed to the blob
// store: call it before the store's Commit, and record the blob (PutBlob,
// WithUpload) after it. Garbage collection spares a held digest until the
// hold is older than its grace period, and a collection removing digest
// right now finishes (bytes and rows) before HoldBlob returns, so that a
// commit never races with the removal of the same bytes.
func (s *Store) HoldBlob(ctx context.Context, digest string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockDigest(ctx, tx, digest); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `insert into blob_holds (digest, held_at) values ($1, clock_timestamp())
			on conflict (digest) do update set held_at = excluded.held_at`, digest); err != nil {
			return fmt.Errorf("meta: hold blob %s: %w", digest, err)
		}
		return nil
	})
}

// lockDigest takes digest's lock in shared mode until tx ends: a sweep of
// digest (exclusive) finishes first, and no sweep starts meanwhile. Every
// transaction that adds a reference to a blob (a link, a manifest's blob)
// takes it before touching the blob's rows. Without it, a sweep that holds
// the blob's row and waits in the delete's foreign-key check for a new,
// uncommitted link deadlocks with that link's own check of the blob row.
func lockDigest(ctx context.Context, tx pgx.Tx, digest string) error {
	if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock_shared($1, hashtext($2))`, blobLockClass, digest); err != nil {
		return fmt.Errorf("meta: lock %s: %w", digest, err)
	}
	return nil
}

// GC is one garbage collection: it holds the collection lock, so that one
// runs at a time across replicas and the command line, on a connection of
// its own. It is not safe for concurrent use. Close releases it.
//
// A blob is live while a manifest references it (its config and layers, or
// a manifest stored as a blob), and while it is recent: linked into a
// repository, recorded, or held (HoldBlob) after the cutoff given to Live
// and Sweep. A blob linked into a repository but referenced by no manifest
// for longer than the grace period is garbage, as in distribution's
// collector: pushes put their manifest within the grace period.
type GC struct {
	conn *pgxpool.Conn
}

// BeginGC takes the collection lock, or fails with ErrGCBusy when another
// collection holds it.
func (s *Store) BeginGC(ctx context.Context) (*GC, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("meta: gc: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `select pg_try_advisory_lock($1)`, gcLockKey).Scan(&ok); err != nil {
		conn.Release()
		return nil, fmt.Errorf("meta: gc: lock: %w", err)
	}
	if !ok {
		conn.Release()
		return nil, ErrGCBusy
	}
	return &GC{conn: conn}, nil
}

// Close releases the collection lock. When that fails the connection is
// closed instead, which drops every lock it holds.
func (g *GC) Close() error {
	if g.conn == nil {
		return nil
	}
	err := g.release(context.Background(), `select pg_advisory_unlock($1)`, gcLockKey)
	if g.conn != nil {
		g.conn.Release()
		g.conn = nil
	}
	return err
}

// release runs a statement that releases an advisory lock, also when ctx
// is done. When it fails the connection is closed, which drops all its
// locks, and g can no longer be used.
func (g *GC) release(ctx context.Context, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := g.conn.Exec(ctx, sql, args...); err != nil {
		conn := g.conn.Hijack()
		_ = conn.Close(ctx)
		g.conn = nil
		return fmt.Errorf("meta: gc: unlock: %w", err)
	}
	return nil
}

// liveSQL is the mark: every digest that must stay.
const liveSQL = `select blob_digest from manifest_blobs
	union select blob_digest from manifests where blob_digest is not null
	union select digest from repository_blobs where created_at > $1
	union select digest from blobs where created_at > $1
	union select digest from blob_holds where held_at > $1`

// isLiveSQL is liveSQL for one digest ($1), with the cutoff $2.
const isLiveSQL = `select exists (select 1 from manifest_blobs where blob_digest = $1)
	or exists (select 1 from manifests where blob_digest = $1)
	or exists (select 1 from repository_blobs where digest = $1 and created_at > $2)
	or exists (select 1 from blobs where digest = $1 and created_at > $2)
	or exists (select 1 from blob_holds where digest = $1 and held_at > $2)`

// Live calls fn with every live digest (the mark phase): referenced by a
// manifest, or linked, recorded or held after cutoff. A digest may come
// more than once. An error of fn stops the listing and is returned.
func (g *GC) Live(ctx context.Context, cutoff time.Time, fn func(digest string) error) error {
	if g.conn == nil {
		return errors.New("meta: gc: closed")
	}
	rows, err := g.conn.Query(ctx, liveSQL, cutoff)
	if err != nil {
		return fmt.Errorf("meta: gc: mark: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return fmt.Errorf("meta: gc: mark: %w", err)
		}
		if err := fn(d); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("meta: gc: mark: %w", err)
	}
	return nil
}

// Sweep removes blob digest if it is still garbage: under the digest's
// lock, which HoldBlob and every writer of a reference wait for, and with
// its repository links and its row
// locked against new manifest references and mounts, it checks that the
// blob is not live (see Live), deletes its links, row and hold, commits,
// and then calls remove to delete the bytes before releasing the lock. It
// reports whether the blob was removed; false with a nil error means it
// turned out live, or in use: a writer holds the digest's lock, and the
// sweep never waits for one (a waiting exclusive lock would queue every
// later writer of the digest behind it, and those may hold what the first
// writer waits for). When remove fails the rows are gone but the bytes
// stay: the next collection finds them as bytes without a row.
func (g *GC) Sweep(ctx context.Context, digest string, cutoff time.Time, remove func(context.Context) error) (removed bool, err error) {
	if g.conn == nil {
		return false, errors.New("meta: gc: closed")
	}
	var locked bool
	if err := g.conn.QueryRow(ctx, `select pg_try_advisory_lock($1, hashtext($2))`, blobLockClass, digest).Scan(&locked); err != nil {
		return false, fmt.Errorf("meta: gc: lock %s: %w", digest, err)
	}
	if !locked {
		return false, nil
	}
	defer func() {
		if uerr := g.release(ctx, `select pg_advisory_unlock($1, hashtext($2))`, blobLockClass, digest); uerr != nil {
			err = errors.Join(err, uerr)
		}
	}()
	gone, err := g.dropRows(ctx, digest, cutoff)
	if err != nil || !gone {
		return false, err
	}
	if err := remove(ctx); err != nil {
		return false, fmt.Errorf("meta: gc: remove %s: %w", digest, err)
	}
	return true, nil
}

// dropRows deletes the rows of digest if it is not live, in one
// transaction; it reports whether it did.
func (g *GC) dropRows(ctx context.Context, digest string, cutoff time.Time) (bool, error) {
	tx, err := g.conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("meta: gc: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	// Links first, then the row: the order in which PutManifest and
	// MountBlob lock them, so that neither waits for the other in a cycle.
	if _, err := tx.Exec(ctx, `select 1 from repository_blobs where digest = $1 for update`, digest); err != nil {
		return false, fmt.Errorf("meta: gc: lock links of %s: %w", digest, err)
	}
	if _, err := tx.Exec(ctx, `select 1 from blobs where digest = $1 for update`, digest); err != nil {
		return false, fmt.Errorf("meta: gc: lock blob %s: %w", digest, err)
	}
	var live bool
	if err := tx.QueryRow(ctx, isLiveSQL, digest, cutoff).Scan(&live); err != nil {
		return false, fmt.Errorf("meta: gc: check %s: %w", digest, err)
	}
	if live {
		return false, nil
	}
	for _, q := range []string{
		`delete from blob_holds where digest = $1`,
		`delete from repository_blobs where digest = $1`,
		`delete from blobs where digest = $1`,
	} {
		if _, err := tx.Exec(ctx, q, digest); err != nil {
			return false, fmt.Errorf("meta: gc: delete %s: %w", digest, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("meta: gc: commit: %w", err)
	}
	return true, nil
}

// PurgeHolds deletes the holds taken before cutoff, which no longer keep
// anything alive, and returns how many it deleted.
func (g *GC) PurgeHolds(ctx context.Context, cutoff time.Time) (int64, error) {
	if g.conn == nil {
		return 0, errors.New("meta: gc: closed")
	}
	tag, err := g.conn.Exec(ctx, `delete from blob_holds where held_at <= $1`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("meta: gc: purge holds: %w", err)
	}
	return tag.RowsAffected(), nil
}
