package meta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Upload is a blob upload session.
type Upload struct {
	ID      string // the blob store's upload id
	Repo    string
	Account string // name of the account that started it; "" for none (or a deleted account)
	Offset  int64  // bytes recorded as staged
	Started time.Time
	Updated time.Time // last recorded activity
}

// CreateUpload records upload session id (the blob store's upload id) for
// repo, started by the account named account ("" or an unknown name: no
// account; such sessions count as one account), creating the repository.
// When maxSessions > 0 and the account has that many sessions open
// already, nothing is recorded and the error wraps ErrTooManyUploads.
func (s *Store) CreateUpload(ctx context.Context, repo, id, account string, maxSessions int) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if maxSessions > 0 {
			// Serializes the count and the insert of one account's sessions.
			if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock(hashtextextended('faas-registry upload sessions of ' || $1, 0))`, account); err != nil {
				return fmt.Errorf("meta: upload %s: %w", id, err)
			}
			var n int
			if err := tx.QueryRow(ctx, `select count(*) from upload_sessions
				where account_id is not distinct from (select id from accounts where name = $1)`, account).Scan(&n); err != nil {
				return fmt.Errorf("meta: upload %s: %w", id, err)
			}
			if n >= maxSessions {
				return fmt.Errorf("%w: account %q has %d open upload sessions", ErrTooManyUploads, account, n)
			}
		}
		rid, err := ensureRepository(ctx, tx, repo)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `insert into upload_sessions (id, repository_id, staged_key, account_id)
			values ($1, $2, $1, (select id from accounts where name = $3))`, id, rid, account); err != nil {
			return fmt.Errorf("meta: upload %s: %w", id, err)
		}
		return nil
	})
}

// UploadUsage is what an account has in open upload sessions.
type UploadUsage struct {
	Sessions int
	Staged   int64 // bytes, as recorded
}

// AccountUploads returns the upload usage of the account named account
// ("": sessions of no account).
func (s *Store) AccountUploads(ctx context.Context, account string) (UploadUsage, error) {
	var u UploadUsage
	err := s.pool.QueryRow(ctx, `select count(*), coalesce(sum(byte_offset), 0)::bigint from upload_sessions
		where account_id is not distinct from (select id from accounts where name = $1)`, account).Scan(&u.Sessions, &u.Staged)
	if err != nil {
		return UploadUsage{}, fmt.Errorf("meta: uploads of %q: %w", account, err)
	}
	return u, nil
}

// TouchUploads records activity now on the sessions of ids (those a
// process is writing to), so that they do not expire meanwhile.
func (s *Store) TouchUploads(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `update upload_sessions set updated_at = now() where id = any($1)`, ids); err != nil {
		return fmt.Errorf("meta: touch uploads: %w", err)
	}
	return nil
}

// ExpireUploads ends the sessions without activity for longer than idle
// and returns the blob store upload ids they named (whose staging the
// caller removes).
func (s *Store) ExpireUploads(ctx context.Context, idle time.Duration) ([]string, error) {
	rows, err := s.pool.Query(ctx, `delete from upload_sessions
		where updated_at < now() - $1::bigint * interval '1 microsecond' returning staged_key`, idle.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("meta: expire uploads: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("meta: expire uploads: %w", err)
	}
	return keys, nil
}

// StagedKeys returns the blob store upload ids that sessions name.
func (s *Store) StagedKeys(ctx context.Context) (map[string]bool, error) {
	rows, err := s.pool.Query(ctx, `select staged_key from upload_sessions`)
	if err != nil {
		return nil, fmt.Errorf("meta: upload keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("meta: upload keys: %w", err)
	}
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	return set, nil
}

// GetUpload returns upload session id of repo. A session that does not
// exist, belongs to another repository or, when idle > 0, saw no activity
// for longer than idle wraps ErrUploadUnknown.
func (s *Store) GetUpload(ctx context.Context, repo, id string, idle time.Duration) (Upload, error) {
	u := Upload{ID: id, Repo: repo}
	err := s.pool.QueryRow(ctx, `select coalesce(a.name, ''), u.byte_offset, u.started_at, u.updated_at
		from upload_sessions u join repositories r on r.id = u.repository_id
		left join accounts a on a.id = u.account_id
		where u.id = $1 and r.name = $2 and ($3::bigint <= 0 or u.updated_at > now() - $3::bigint * interval '1 microsecond')`,
		id, repo, idle.Microseconds()).Scan(&u.Account, &u.Offset, &u.Started, &u.Updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return Upload{}, fmt.Errorf("%w: %s in %q", ErrUploadUnknown, id, repo)
	}
	if err != nil {
		return Upload{}, fmt.Errorf("meta: upload %s: %w", id, err)
	}
	return u, nil
}

// AdvanceUpload records that upload session id of repo has offset bytes
// staged, and that it was active now, provided its recorded offset is
// still from: the check that keeps two writers of one upload (on different
// replicas, say) from both succeeding, without a lock held while a body
// arrives. A session whose offset moved meanwhile wraps ErrUploadConflict;
// a session that is gone (or of another repository) ErrUploadUnknown.
func (s *Store) AdvanceUpload(ctx context.Context, repo, id string, from, offset int64) error {
	// One statement: the row is locked only while it runs.
	var found, updated bool
	err := s.pool.QueryRow(ctx, `with sess as (
			select u.id, u.byte_offset from upload_sessions u join repositories r on r.id = u.repository_id
			where u.id = $1 and r.name = $2),
		upd as (
			update upload_sessions u set byte_offset = $4, updated_at = now()
			from sess where u.id = sess.id and u.byte_offset = $3 returning 1)
		select exists (select 1 from sess), exists (select 1 from upd)`, id, repo, from, offset).Scan(&found, &updated)
	switch {
	case err != nil:
		return fmt.Errorf("meta: upload %s: %w", id, err)
	case !found:
		return fmt.Errorf("%w: %s in %q", ErrUploadUnknown, id, repo)
	case !updated:
		return fmt.Errorf("%w: upload %s is no longer at offset %d", ErrUploadConflict, id, from)
	}
	return nil
}

// CompleteUpload records that upload session id of repo was committed as
// blob digest of size bytes: in one transaction the blob is recorded and
// linked into repo, and the session ends. A session that ended meanwhile
// (cancelled, say) is no error: the blob store committed the blob, so it is
// recorded all the same.
func (s *Store) CompleteUpload(ctx context.Context, repo, id, digest string, size int64) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockDigest(ctx, tx, digest); err != nil {
			return err
		}
		rid, err := ensureRepository(ctx, tx, repo)
		if err != nil {
			return err
		}
		if err := linkBlob(ctx, tx, rid, digest, size); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `delete from upload_sessions where id = $1 and repository_id = $2`, id, rid); err != nil {
			return fmt.Errorf("meta: upload %s: %w", id, err)
		}
		return nil
	})
}

// EndUpload ends upload session id of repo (the upload was cancelled or
// failed); a session that is gone, or of another repository, wraps
// ErrUploadUnknown.
func (s *Store) EndUpload(ctx context.Context, repo, id string) error {
	tag, err := s.pool.Exec(ctx, `delete from upload_sessions u using repositories r
		where r.id = u.repository_id and u.id = $1 and r.name = $2`, id, repo)
	if err != nil {
		return fmt.Errorf("meta: end upload %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s in %q", ErrUploadUnknown, id, repo)
	}
	return nil
}

// DeleteUpload removes upload session id, whatever its repository; a
// missing session is not an error.
func (s *Store) DeleteUpload(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `delete from upload_sessions where id = $1`, id); err != nil {
		return fmt.Errorf("meta: delete upload %s: %w", id, err)
	}
	return nil
}
