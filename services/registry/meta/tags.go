package meta

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"

	"github.com/jackc/pgx/v5"
)

// ErrTagImmutable: the request would move or delete a tag that may not
// move: one naming a version of the repository's listing, or one set and
// matching a tag rule of the repository (migration 010).
var ErrTagImmutable = errors.New("meta: tag immutable")

// ImmutableError says which tag may not move and why; it wraps
// ErrTagImmutable. Exactly one of Listing and Pattern is set.
type ImmutableError struct {
	Repository, Tag string
	// Listing is the name of the listing that has a version Tag.
	Listing string
	// Pattern is the tag rule Tag matches.
	Pattern string
	// Digest is the digest the tag names and keeps.
	Digest string
}

func (e *ImmutableError) Error() string {
	if e.Listing != "" {
		return fmt.Sprintf("tag %s of %s is version %s of listing %q (%s): a listed version never changes; push the image as a new version",
			e.Tag, e.Repository, e.Tag, e.Listing, e.Digest)
	}
	return fmt.Sprintf("tag %s of %s names %s and matches the repository's immutability rule %q: it never changes; push the image under a new tag",
		e.Tag, e.Repository, e.Digest, e.Pattern)
}

func (e *ImmutableError) Unwrap() error { return ErrTagImmutable }

// LockTag serializes, until tx ends, every change of tag in repo and of the
// listing version of that name (the API takes it before adding a version),
// so that the check of a push and the version's insert cannot interleave.
// It returns the digest the tag names, "" when it is unset.
func LockTag(ctx context.Context, tx pgx.Tx, repo, tag string) (string, error) {
	if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock(hashtextextended('faas-registry tag ' || $1 || ':' || $2, 0))`,
		repo, tag); err != nil {
		return "", fmt.Errorf("meta: lock tag %q: %w", tag, Unavailable(err))
	}
	var current string
	err := tx.QueryRow(ctx, `select t.manifest_digest from tags t join repositories r on r.id = t.repository_id
		where r.name = $1 and t.name = $2`, repo, tag).Scan(&current)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("meta: tag %q: %w", tag, Unavailable(err))
	}
	return current, nil
}

// lockedTag is a tag a transaction holds the lock of, with the digest it
// named when the lock was taken.
type lockedTag struct{ name, current string }

// lockTags takes the locks of tags in order, so that two pushes sharing
// tags cannot deadlock, and before any row lock of the push: the API adds
// a version under the tag's lock and then references the repository's
// row, which PutManifest's upsert locks.
func lockTags(ctx context.Context, tx pgx.Tx, repo string, tags []string) ([]lockedTag, error) {
	sorted := slices.Clone(tags)
	slices.Sort(sorted)
	var locked []lockedTag
	for _, tag := range slices.Compact(sorted) {
		if tag == "" {
			continue
		}
		current, err := LockTag(ctx, tx, repo, tag)
		if err != nil {
			return nil, err
		}
		locked = append(locked, lockedTag{tag, current})
	}
	return locked, nil
}

// checkTags fails with the first of tags that may not come to name digest.
func checkTags(ctx context.Context, q querier, rid int64, repo, digest string, tags []lockedTag) error {
	for _, t := range tags {
		if err := checkTag(ctx, q, rid, repo, t.name, t.current, digest); err != nil {
			return err
		}
	}
	return nil
}

// checkTag returns an *ImmutableError when tag of repository rid (named
// repo), whose current digest is current ("" when unset), may not come to
// name digest; digest "" asks about deleting it. The caller holds LockTag.
func checkTag(ctx context.Context, q querier, rid int64, repo, tag, current, digest string) error {
	var listing, versionDigest string
	err := q.QueryRow(ctx, `select l.name, v.manifest_digest from listing_versions v join listings l on l.id = v.listing_id
		where l.repository_id = $1 and v.version = $2`, rid, tag).Scan(&listing, &versionDigest)
	switch {
	case err == nil:
		// Also when the tag names another digest (moved before versions
		// were enforced): putting it back on the version's digest heals it.
		if digest == versionDigest {
			return nil
		}
		return &ImmutableError{Repository: repo, Tag: tag, Listing: listing, Digest: versionDigest}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("meta: versions named %q: %w", tag, Unavailable(err))
	}
	if current == "" || current == digest {
		return nil
	}
	pattern, err := matchingRule(ctx, q, rid, tag)
	if err != nil || pattern == "" {
		return err
	}
	return &ImmutableError{Repository: repo, Tag: tag, Pattern: pattern, Digest: current}
}

// signatureTagRe is cosign's tags of an image's signatures, attestations
// and SBOMs. Signing appends to the image under the tag (the validation
// worker's countersignature too), so no rule holds them, not even "*".
var signatureTagRe = regexp.MustCompile(`^(sha256-[0-9a-f]{64}|sha512-[0-9a-f]{128})\.(sig|att|sbom)$`)

// matchingRule returns the first (in byte order) tag rule of repository rid
// that tag matches, or "".
func matchingRule(ctx context.Context, q querier, rid int64, tag string) (string, error) {
	if signatureTagRe.MatchString(tag) {
		return "", nil
	}
	rows, err := q.Query(ctx, `select pattern from tag_rules where repository_id = $1 order by pattern collate "C"`, rid)
	if err != nil {
		return "", fmt.Errorf("meta: tag rules: %w", Unavailable(err))
	}
	patterns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("meta: tag rules: %w", Unavailable(err))
	}
	for _, p := range patterns {
		// Patterns are checked with path.Match when they are added.
		if ok, _ := path.Match(p, tag); ok {
			return p, nil
		}
	}
	return "", nil
}

// TagImmutable returns an error wrapping ErrTagImmutable (an
// *ImmutableError) when a push of tag in repo would be refused whatever the
// image but the one it names now, or its deletion; nil when the tag is
// free. It lets a caller refuse before it receives an image.
func (s *Store) TagImmutable(ctx context.Context, repo, tag string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		rid, err := repositoryID(ctx, tx, repo)
		if errors.Is(err, ErrRepositoryUnknown) {
			return nil
		}
		if err != nil {
			return err
		}
		current, err := LockTag(ctx, tx, repo, tag)
		if err != nil {
			return err
		}
		return checkTag(ctx, tx, rid, repo, tag, current, "")
	})
}

// checkDigestTags refuses the deletion of manifest digest of repository
// rid with the first immutable tag the deletion would take away: a
// listed version naming it, or a tag naming it that matches a rule.
func checkDigestTags(ctx context.Context, q querier, rid int64, repo, digest string) error {
	var listing, version string
	err := q.QueryRow(ctx, `select l.name, v.version from listing_versions v join listings l on l.id = v.listing_id
		where l.repository_id = $1 and v.manifest_digest = $2 order by v.version limit 1`, rid, digest).Scan(&listing, &version)
	switch {
	case err == nil:
		return &ImmutableError{Repository: repo, Tag: version, Listing: listing, Digest: digest}
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("meta: versions of %s: %w", digest, Unavailable(err))
	}
	rows, err := q.Query(ctx, `select name from tags where repository_id = $1 and manifest_digest = $2 order by name collate "C"`, rid, digest)
	if err != nil {
		return fmt.Errorf("meta: tags of %s: %w", digest, Unavailable(err))
	}
	tags, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("meta: tags of %s: %w", digest, Unavailable(err))
	}
	for _, tag := range tags {
		pattern, err := matchingRule(ctx, q, rid, tag)
		if err != nil {
			return err
		}
		if pattern != "" {
			return &ImmutableError{Repository: repo, Tag: tag, Pattern: pattern, Digest: digest}
		}
	}
	return nil
}

// DeleteTag removes tag from repo; the manifest stays. An immutable tag
// fails with an *ImmutableError.
func (s *Store) DeleteTag(ctx context.Context, repo, tag string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		id, err := repositoryID(ctx, tx, repo)
		if errors.Is(err, ErrRepositoryUnknown) {
			return fmt.Errorf("%w: tag %q in %q", ErrManifestUnknown, tag, repo)
		}
		if err != nil {
			return err
		}
		current, err := LockTag(ctx, tx, repo, tag)
		if err != nil {
			return err
		}
		if current == "" {
			return fmt.Errorf("%w: tag %q in %q", ErrManifestUnknown, tag, repo)
		}
		if err := checkTag(ctx, tx, id, repo, tag, current, ""); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `delete from tags where repository_id = $1 and name = $2`, id, tag); err != nil {
			return fmt.Errorf("meta: delete tag %q: %w", tag, Unavailable(err))
		}
		return nil
	})
}
