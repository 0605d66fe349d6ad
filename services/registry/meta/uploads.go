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
// account), creating the repository.
func (s *Store) CreateUpload(ctx context.Context, repo, id, account string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
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

// UploadOutcome is what the function given to WithUpload did to the upload.
type UploadOutcome struct {
	Offset int64 // bytes staged after it, recorded with the session
	// Digest and Size, when Digest is not "", are the blob the upload was
	// committed as: it is recorded and linked into the repository in the
	// same transaction that ends the session.
	Digest string
	Size   int64
	// Ended ends the session (the upload was cancelled).
	Ended bool
}

// WithUpload runs fn while holding upload session id of repo locked, which
// serializes the writers of one upload across replicas, and then records
// the outcome fn returns. When fn fails nothing is recorded. An unknown
// session, or one of another repository, wraps ErrUploadUnknown.
//
// fn runs inside the transaction but must not use the Store itself: the
// outcome is applied on fn's behalf, so one request never needs two
// connections of the pool at once.
func (s *Store) WithUpload(ctx context.Context, repo, id string, fn func(ctx context.Context) (UploadOutcome, error)) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var rid int64
		err := tx.QueryRow(ctx, `select u.repository_id from upload_sessions u join repositories r on r.id = u.repository_id
			where u.id = $1 and r.name = $2 for update of u`, id, repo).Scan(&rid)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s in %q", ErrUploadUnknown, id, repo)
		}
		if err != nil {
			return fmt.Errorf("meta: upload %s: %w", id, err)
		}
		out, err := fn(ctx)
		if err != nil {
			return err
		}
		if out.Digest != "" {
			if _, err := tx.Exec(ctx, `insert into blobs (digest, size) values ($1, $2) on conflict (digest) do nothing`, out.Digest, out.Size); err != nil {
				return fmt.Errorf("meta: blob %s: %w", out.Digest, err)
			}
			if _, err := tx.Exec(ctx, `insert into repository_blobs (repository_id, digest) values ($1, $2) on conflict do nothing`, rid, out.Digest); err != nil {
				return fmt.Errorf("meta: link blob %s: %w", out.Digest, err)
			}
		}
		if out.Digest != "" || out.Ended {
			_, err = tx.Exec(ctx, `delete from upload_sessions where id = $1`, id)
		} else {
			_, err = tx.Exec(ctx, `update upload_sessions set byte_offset = $2, updated_at = now() where id = $1`, id, out.Offset)
		}
		if err != nil {
			return fmt.Errorf("meta: upload %s: %w", id, err)
		}
		return nil
	})
}

// DeleteUpload removes upload session id, whatever its repository; a
// missing session is not an error.
func (s *Store) DeleteUpload(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `delete from upload_sessions where id = $1`, id); err != nil {
		return fmt.Errorf("meta: delete upload %s: %w", id, err)
	}
	return nil
}
