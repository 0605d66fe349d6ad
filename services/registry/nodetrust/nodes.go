package nodetrust

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/jackc/pgx/v5"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// CreateEnrollment makes a one-time enrollment token valid for ttl (zero:
// DefaultEnrollmentTTL; at most MaxEnrollmentTTL). createdBy names the
// operator, for the record.
func CreateEnrollment(ctx context.Context, q DBTX, createdBy string, ttl time.Duration) (registryapi.Enrollment, error) {
	switch {
	case ttl == 0:
		ttl = DefaultEnrollmentTTL
	case ttl < 0 || ttl > MaxEnrollmentTTL:
		return registryapi.Enrollment{}, fmt.Errorf("%w: an enrollment token lives between 1s and %v", ErrInvalid, MaxEnrollmentTTL)
	}
	secret, hash := newSecret(EnrollmentPrefix)
	e := registryapi.Enrollment{Token: secret}
	err := q.QueryRow(ctx, `insert into node_enrollments (token_hash, created_by, expires_at)
		values ($1, $2, now() + $3::interval) returning id::text, expires_at`,
		hash, createdBy, fmt.Sprintf("%d microseconds", ttl.Microseconds())).Scan(&e.ID, &e.ExpiresAt)
	if err != nil {
		return registryapi.Enrollment{}, fmt.Errorf("nodetrust: enrollment: %w", err)
	}
	return e, nil
}

// Enroll spends enrollment token on node nodeID, which is approved at
// once. A token works once, before it expires; otherwise ErrInvalid.
func Enroll(ctx context.Context, q DBTX, token, nodeID string) error {
	if !wellFormed(token, EnrollmentPrefix) {
		return fmt.Errorf("%w: enrollment token", ErrInvalid)
	}
	var id string
	err := q.QueryRow(ctx, `update node_enrollments set used_at = now(), node_id = $2::uuid
		where token_hash = $1 and used_at is null and expires_at > now() returning id::text`,
		hashOf(token), nodeID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: enrollment token (unknown, used or expired)", ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("nodetrust: enroll: %w", err)
	}
	return setApproved(ctx, q, nodeID, "enrollment:"+id)
}

// Approve marks node nodeID trusted; by names the operator. Approving an
// approved node changes nothing; a revoked node stays revoked (ErrRevoked):
// it registers anew, with a new key.
func Approve(ctx context.Context, q DBTX, nodeID, by string) error {
	return setApproved(ctx, q, nodeID, by)
}

func setApproved(ctx context.Context, q DBTX, nodeID, by string) error {
	if !uuidRE.MatchString(nodeID) {
		return fmt.Errorf("%w: node %q", ErrNotFound, nodeID)
	}
	var revoked bool
	err := q.QueryRow(ctx, `update nodes set approved_at = coalesce(approved_at, now()),
		approved_by = case when approved_at is null then $2 else approved_by end
		where id = $1::uuid returning revoked_at is not null`, nodeID, by).Scan(&revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: node %s", ErrNotFound, nodeID)
	}
	if err != nil {
		return fmt.Errorf("nodetrust: approve: %w", err)
	}
	if revoked {
		return fmt.Errorf("%w: node %s", ErrRevoked, nodeID)
	}
	return nil
}

// Revoke ends the registry's trust in node nodeID for good: no key release,
// heartbeat or usage report of it is accepted from now on, and its
// outstanding grants expire. by names the operator. Revoking a revoked node
// changes nothing.
func Revoke(ctx context.Context, q DBTX, nodeID, by string) error {
	if !uuidRE.MatchString(nodeID) {
		return fmt.Errorf("%w: node %q", ErrNotFound, nodeID)
	}
	tag, err := q.Exec(ctx, `update nodes set revoked_at = coalesce(revoked_at, now()),
		revoked_by = case when revoked_at is null then $2 else revoked_by end where id = $1::uuid`, nodeID, by)
	if err != nil {
		return fmt.Errorf("nodetrust: revoke: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: node %s", ErrNotFound, nodeID)
	}
	if _, err := q.Exec(ctx, `update load_grants set expires_at = now()
		where node_id = $1::uuid and redeemed_at is null and expires_at > now()`, nodeID); err != nil {
		return fmt.Errorf("nodetrust: revoke: %w", err)
	}
	return nil
}

// Trusted returns nil when node nodeID exists, is approved and is not
// revoked; else an error wrapping ErrNotFound, ErrNotApproved or ErrRevoked.
func Trusted(ctx context.Context, q DBTX, nodeID string) error {
	if !uuidRE.MatchString(nodeID) {
		return fmt.Errorf("%w: node %q", ErrNotFound, nodeID)
	}
	var approved, revoked bool
	err := q.QueryRow(ctx, `select approved_at is not null, revoked_at is not null from nodes where id = $1::uuid`,
		nodeID).Scan(&approved, &revoked)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: node %s", ErrNotFound, nodeID)
	case err != nil:
		return fmt.Errorf("nodetrust: node: %w", err)
	case revoked:
		return fmt.Errorf("%w: node %s", ErrRevoked, nodeID)
	case !approved:
		return fmt.Errorf("%w: node %s", ErrNotApproved, nodeID)
	}
	return nil
}

// Repin clears node nodeID's pinned TLS certificate, so the next one the
// node reports is pinned; for a node whose key changed on purpose. It
// returns the certificate cleared ("" when none was pinned).
func Repin(ctx context.Context, q DBTX, nodeID string) (string, error) {
	if !uuidRE.MatchString(nodeID) {
		return "", fmt.Errorf("%w: node %q", ErrNotFound, nodeID)
	}
	var old string
	err := q.QueryRow(ctx, `update nodes n set tls_certificate = '' from
		(select id, tls_certificate from nodes where id = $1::uuid for update) o where n.id = o.id
		returning o.tls_certificate`, nodeID).Scan(&old)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%w: node %s", ErrNotFound, nodeID)
	}
	if err != nil {
		return "", fmt.Errorf("nodetrust: repin: %w", err)
	}
	return old, nil
}
