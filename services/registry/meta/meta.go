package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	// ErrNotFound: the thing asked for does not exist. The more specific
	// errors below wrap it.
	ErrNotFound = errors.New("meta: not found")
	// ErrRepositoryUnknown: no repository with that name.
	ErrRepositoryUnknown = fmt.Errorf("%w: repository unknown", ErrNotFound)
	// ErrBlobUnknown: the blob is not linked into the repository.
	ErrBlobUnknown = fmt.Errorf("%w: blob unknown", ErrNotFound)
	// ErrManifestUnknown: no manifest (or tag) with that reference in the repository.
	ErrManifestUnknown = fmt.Errorf("%w: manifest unknown", ErrNotFound)
	// ErrUploadUnknown: no upload session with that id in the repository.
	ErrUploadUnknown = fmt.Errorf("%w: upload unknown", ErrNotFound)
	// ErrInUse: the manifest is still referenced by an index in its repository.
	ErrInUse = errors.New("meta: in use")
	// ErrTooManyUploads: the account has as many upload sessions open as
	// it may.
	ErrTooManyUploads = errors.New("meta: too many upload sessions")
	// ErrUploadConflict: an upload session changed while the caller wrote
	// to its upload (another request wrote to it too).
	ErrUploadConflict = errors.New("meta: upload changed concurrently")
	// ErrTooManyBodies: the account sends as many upload bodies at once,
	// across all replicas, as it may.
	ErrTooManyBodies = errors.New("meta: too many upload bodies in flight")
	// ErrStagingFull: the account's staged bytes and the bytes reserved
	// for its bodies in flight leave no room for what was asked.
	ErrStagingFull = errors.New("meta: staged bytes limit reached")
)

// MissingError names the digest a manifest references but the repository
// lacks; it wraps ErrBlobUnknown or ErrManifestUnknown.
type MissingError struct {
	Err    error
	Digest string
}

func (e *MissingError) Error() string { return e.Err.Error() + ": " + e.Digest }
func (e *MissingError) Unwrap() error { return e.Err }

// Store is the metadata store. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a Store on pool, whose database must have the migrations
// applied (migrations.ApplyPool).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// querier is what both the pool and a transaction offer.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("meta: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("meta: commit: %w", err)
	}
	return nil
}

// ensureRepository returns the id of repository name, creating it.
func ensureRepository(ctx context.Context, q querier, name string) (int64, error) {
	var id int64
	// "do update" (a no-op) rather than "do nothing" so that returning yields the row either way.
	err := q.QueryRow(ctx, `insert into repositories (name) values ($1)
		on conflict (name) do update set name = excluded.name returning id`, name).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("meta: repository %q: %w", name, Unavailable(err))
	}
	return id, nil
}

func repositoryID(ctx context.Context, q querier, name string) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, `select id from repositories where name = $1`, name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: %q", ErrRepositoryUnknown, name)
	}
	if err != nil {
		return 0, fmt.Errorf("meta: repository %q: %w", name, Unavailable(err))
	}
	return id, nil
}

// RepositoryExists reports whether repository name exists.
func (s *Store) RepositoryExists(ctx context.Context, name string) (bool, error) {
	_, err := repositoryID(ctx, s.pool, name)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Blobs ------------------------------------------------------------------------

// PutBlob records a blob the blob store has committed and links it into
// repository repo, creating the repository. Call it only after the commit.
func (s *Store) PutBlob(ctx context.Context, repo, digest string, size int64) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockDigest(ctx, tx, digest); err != nil {
			return err
		}
		id, err := ensureRepository(ctx, tx, repo)
		if err != nil {
			return err
		}
		return linkBlob(ctx, tx, id, digest, size)
	})
}

// linkBlob records blob digest of size bytes and links it into the
// repository with id rid.
func linkBlob(ctx context.Context, q querier, rid int64, digest string, size int64) error {
	if _, err := q.Exec(ctx, `insert into blobs (digest, size) values ($1, $2) on conflict (digest) do nothing`, digest, size); err != nil {
		return fmt.Errorf("meta: blob %s: %w", digest, err)
	}
	if _, err := q.Exec(ctx, `insert into repository_blobs (repository_id, digest) values ($1, $2) on conflict do nothing`, rid, digest); err != nil {
		return fmt.Errorf("meta: link blob %s: %w", digest, err)
	}
	return nil
}

// BlobSize returns the size of blob digest linked into repo, or an error
// wrapping ErrBlobUnknown.
func (s *Store) BlobSize(ctx context.Context, repo, digest string) (int64, error) {
	var size int64
	err := s.pool.QueryRow(ctx, `select b.size from blobs b
		join repository_blobs rb on rb.digest = b.digest
		join repositories r on r.id = rb.repository_id
		where r.name = $1 and b.digest = $2`, repo, digest).Scan(&size)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: %s in %q", ErrBlobUnknown, digest, repo)
	}
	if err != nil {
		return 0, fmt.Errorf("meta: blob %s: %w", digest, err)
	}
	return size, nil
}

// MountBlob links blob digest, which must be linked into repository from,
// into repository repo (cross-repository mount) and returns its size. A blob
// not linked into from wraps ErrBlobUnknown.
func (s *Store) MountBlob(ctx context.Context, repo, from, digest string) (int64, error) {
	var size int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockDigest(ctx, tx, digest); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `select b.size from blobs b
			join repository_blobs rb on rb.digest = b.digest
			join repositories r on r.id = rb.repository_id
			where r.name = $1 and b.digest = $2 for share of rb`, from, digest).Scan(&size)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s in %q", ErrBlobUnknown, digest, from)
		}
		if err != nil {
			return fmt.Errorf("meta: mount %s: %w", digest, err)
		}
		id, err := ensureRepository(ctx, tx, repo)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `insert into repository_blobs (repository_id, digest) values ($1, $2) on conflict do nothing`, id, digest); err != nil {
			return fmt.Errorf("meta: mount %s: %w", digest, err)
		}
		return nil
	})
	return size, err
}

// UnlinkBlob removes blob digest from repo. The bytes stay until garbage
// collection (GC) finds them unreferenced; manifests already referencing
// the blob keep it alive.
func (s *Store) UnlinkBlob(ctx context.Context, repo, digest string) error {
	tag, err := s.pool.Exec(ctx, `delete from repository_blobs rb using repositories r
		where r.id = rb.repository_id and r.name = $1 and rb.digest = $2`, repo, digest)
	if err != nil {
		return fmt.Errorf("meta: unlink blob %s: %w", digest, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %s in %q", ErrBlobUnknown, digest, repo)
	}
	return nil
}

// Manifests --------------------------------------------------------------------

// Manifest is a stored manifest.
type Manifest struct {
	Digest       string
	MediaType    string
	ArtifactType string // the manifest's artifactType, or for an image manifest without one its config media type
	Subject      string // digest of the OCI 1.1 subject, or ""
	Content      []byte // the bytes, verbatim
	Annotations  map[string]string
	Created      time.Time
	// Blobs and Children are what the manifest references: its config and
	// layers, and (for an index) the manifests it lists. They are checked
	// and recorded by PutManifest, not filled in by GetManifest.
	Blobs    []string
	Children []string
}

// PutManifest stores m in repo, creating the repository, and points each of
// tags (skipping "") at it. Every blob in m.Blobs must be linked into repo and
// every child in m.Children must be a manifest of repo, else the error is a
// *MissingError (wrapping ErrBlobUnknown or ErrManifestUnknown); nothing
// is stored then. Storing a manifest that exists again only moves the tag.
// A tag that may not move to m (see checkTag) fails it with an
// *ImmutableError, before anything is stored.
func (s *Store) PutManifest(ctx context.Context, repo string, m Manifest, tags ...string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		// The digests' locks before any row: shared locks never wait for
		// each other, and a sweep never waits for them.
		for _, d := range m.Blobs {
			if err := lockDigest(ctx, tx, d); err != nil {
				return err
			}
		}
		locked, err := lockTags(ctx, tx, repo, tags)
		if err != nil {
			return err
		}
		id, err := ensureRepository(ctx, tx, repo)
		if err != nil {
			return err
		}
		if err := checkTags(ctx, tx, id, repo, m.Digest, locked); err != nil {
			return err
		}
		// Lock the links and children against concurrent deletes until commit.
		for _, d := range m.Blobs {
			var one int
			err := tx.QueryRow(ctx, `select 1 from repository_blobs where repository_id = $1 and digest = $2 for share`, id, d).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return &MissingError{ErrBlobUnknown, d}
			}
			if err != nil {
				return fmt.Errorf("meta: manifest blob %s: %w", d, err)
			}
		}
		for _, d := range m.Children {
			var one int
			err := tx.QueryRow(ctx, `select 1 from manifests where repository_id = $1 and digest = $2 for share`, id, d).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return &MissingError{ErrManifestUnknown, d}
			}
			if err != nil {
				return fmt.Errorf("meta: manifest child %s: %w", d, err)
			}
		}
		var annotations []byte
		if len(m.Annotations) > 0 {
			if annotations, err = json.Marshal(m.Annotations); err != nil {
				return fmt.Errorf("meta: annotations: %w", err)
			}
		}
		tagged, err := tx.Exec(ctx, `insert into manifests
			(repository_id, digest, media_type, artifact_type, subject_digest, size, content, annotations)
			values ($1, $2, $3, nullif($4, ''), nullif($5, ''), $6, $7, $8)
			on conflict (repository_id, digest) do nothing`,
			id, m.Digest, m.MediaType, m.ArtifactType, m.Subject, len(m.Content), m.Content, annotations)
		if err != nil {
			return fmt.Errorf("meta: manifest %s: %w", m.Digest, err)
		}
		if tagged.RowsAffected() > 0 {
			for _, d := range m.Blobs {
				if _, err := tx.Exec(ctx, `insert into manifest_blobs (repository_id, manifest_digest, blob_digest)
					values ($1, $2, $3) on conflict do nothing`, id, m.Digest, d); err != nil {
					return fmt.Errorf("meta: manifest blob %s: %w", d, err)
				}
			}
			for _, d := range m.Children {
				if _, err := tx.Exec(ctx, `insert into manifest_children (repository_id, manifest_digest, child_digest)
					values ($1, $2, $3) on conflict do nothing`, id, m.Digest, d); err != nil {
					return fmt.Errorf("meta: manifest child %s: %w", d, err)
				}
			}
		}
		for _, tag := range tags {
			if tag == "" {
				continue
			}
			if _, err := tx.Exec(ctx, `insert into tags (repository_id, name, manifest_digest) values ($1, $2, $3)
				on conflict (repository_id, name) do update set manifest_digest = excluded.manifest_digest, updated_at = now()`,
				id, tag, m.Digest); err != nil {
				return fmt.Errorf("meta: tag %q: %w", tag, err)
			}
		}
		return nil
	})
}

// GetManifest returns the manifest of repo with digest ref or, if ref is not
// a digest ("algorithm:..."), the one tagged ref. A missing repository wraps
// ErrRepositoryUnknown, a missing manifest or tag ErrManifestUnknown.
func (s *Store) GetManifest(ctx context.Context, repo, ref string) (Manifest, error) {
	id, err := repositoryID(ctx, s.pool, repo)
	if err != nil {
		return Manifest{}, err
	}
	q := `select m.digest, m.media_type, coalesce(m.artifact_type, ''), coalesce(m.subject_digest, ''),
		m.content, m.annotations, m.created_at from manifests m `
	if isDigest(ref) {
		q += `where m.repository_id = $1 and m.digest = $2`
	} else {
		q += `join tags t on t.repository_id = m.repository_id and t.manifest_digest = m.digest
			where m.repository_id = $1 and t.name = $2`
	}
	m, err := scanManifest(s.pool.QueryRow(ctx, q, id, ref))
	if errors.Is(err, pgx.ErrNoRows) {
		return Manifest{}, fmt.Errorf("%w: %s in %q", ErrManifestUnknown, ref, repo)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("meta: manifest %s: %w", ref, err)
	}
	return m, nil
}

func scanManifest(row pgx.Row) (Manifest, error) {
	var m Manifest
	var annotations []byte
	if err := row.Scan(&m.Digest, &m.MediaType, &m.ArtifactType, &m.Subject, &m.Content, &annotations, &m.Created); err != nil {
		return Manifest{}, err
	}
	if len(annotations) > 0 {
		if err := json.Unmarshal(annotations, &m.Annotations); err != nil {
			return Manifest{}, fmt.Errorf("annotations: %w", err)
		}
	}
	return m, nil
}

// isDigest tells a digest reference from a tag: tags cannot contain ':'.
func isDigest(ref string) bool {
	for i := 0; i < len(ref); i++ {
		if ref[i] == ':' {
			return true
		}
	}
	return false
}

// DeleteManifest deletes the manifest of repo with digest, and the tags
// pointing at it. A manifest an index of repo still lists wraps ErrInUse;
// one a listed version names, or with a tag a rule makes immutable, fails
// with an *ImmutableError.
func (s *Store) DeleteManifest(ctx context.Context, repo, digest string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		id, err := repositoryID(ctx, tx, repo)
		if errors.Is(err, ErrUnavailable) {
			return err // a fault, not an unknown manifest
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrManifestUnknown, err)
		}
		if err := checkDigestTags(ctx, tx, id, repo, digest); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `delete from manifests where repository_id = $1 and digest = $2`, id, digest)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation: manifest_children
			return fmt.Errorf("%w: manifest %s is listed by an index", ErrInUse, digest)
		}
		if err != nil {
			return fmt.Errorf("meta: delete manifest %s: %w", digest, Unavailable(err))
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: %s in %q", ErrManifestUnknown, digest, repo)
		}
		return nil
	})
}

// Tags returns up to n tags of repo after last in lexical (byte) order;
// n < 0 means all. more reports whether tags follow the page. A missing
// repository wraps ErrRepositoryUnknown.
func (s *Store) Tags(ctx context.Context, repo string, n int, last string) (tags []string, more bool, err error) {
	id, err := repositoryID(ctx, s.pool, repo)
	if err != nil {
		return nil, false, err
	}
	return page(ctx, s.pool, `select name from tags where repository_id = $1 and name collate "C" > $2
		order by name collate "C" limit $3`, n, id, last)
}

// Catalog returns up to n repository names after last in lexical order;
// n < 0 means all.
func (s *Store) Catalog(ctx context.Context, n int, last string) (names []string, more bool, err error) {
	return page(ctx, s.pool, `select name from repositories where name collate "C" > $1
		order by name collate "C" limit $2`, n, last)
}

// page runs a keyset query over args whose last parameter is the limit,
// asking for one row more than n to learn whether another page follows.
func page(ctx context.Context, q querier, sql string, n int, args ...any) ([]string, bool, error) {
	var limit any // null: no limit
	if n >= 0 {
		limit = n + 1
	}
	rows, err := q.Query(ctx, sql, append(args, limit)...)
	if err != nil {
		return nil, false, fmt.Errorf("meta: list: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false, fmt.Errorf("meta: list: %w", err)
	}
	if n >= 0 && len(names) > n {
		return names[:n], true, nil
	}
	return names, false, nil
}

// Referrer describes a manifest whose subject is the digest asked for.
type Referrer struct {
	Digest       string
	MediaType    string
	ArtifactType string
	Size         int64
	Annotations  map[string]string
}

// Referrers returns the manifests of repo whose subject is subject, oldest
// first; artifactType, when not "", keeps only those of that artifact type.
// A missing repository has no referrers.
func (s *Store) Referrers(ctx context.Context, repo, subject, artifactType string) ([]Referrer, error) {
	rows, err := s.pool.Query(ctx, `select m.digest, m.media_type, coalesce(m.artifact_type, ''), m.size, m.annotations
		from manifests m join repositories r on r.id = m.repository_id
		where r.name = $1 and m.subject_digest = $2 and ($3 = '' or m.artifact_type = $3)
		order by m.created_at, m.digest`, repo, subject, artifactType)
	if err != nil {
		return nil, fmt.Errorf("meta: referrers of %s: %w", subject, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Referrer, error) {
		var r Referrer
		var annotations []byte
		if err := row.Scan(&r.Digest, &r.MediaType, &r.ArtifactType, &r.Size, &annotations); err != nil {
			return r, err
		}
		if len(annotations) > 0 {
			if err := json.Unmarshal(annotations, &r.Annotations); err != nil {
				return r, err
			}
		}
		return r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("meta: referrers of %s: %w", subject, err)
	}
	return out, nil
}
