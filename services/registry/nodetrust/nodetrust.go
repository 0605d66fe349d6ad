// Package nodetrust is what the registry knows about which nodes it may
// trust with an image's data keys, and for which loads.
//
// A registered node is only a public key. It becomes trusted when an
// operator approves it, or when it registers with a one-time enrollment
// token an operator made; revoking it ends that trust. A trusted node still
// gets no key on its own word: it must present a load grant, which the
// registry issues to a tenant's credentials for one (tenant, node,
// repository, digest) and which is redeemed at most once, within minutes.
// Usage a node reports is accepted only for grants given to that node for
// that tenant, so a node cannot bill or account a tenant it never served.
//
// Secrets (enrollment tokens, grants) are 32 random bytes; only their
// SHA-256 is stored, and they are looked up by that hash.
//
// The package holds SQL only; the HTTP edges are packages api and
// keyrelease, and the operator's commands are in services/cmd/registry.
package nodetrust

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Error categories; every error of this package that is not an internal
// failure wraps one of them.
var (
	ErrNotFound    = errors.New("not found")
	ErrPermission  = errors.New("permission denied")
	ErrNotApproved = errors.New("the node is not approved by an operator")
	ErrRevoked     = errors.New("the node is revoked")
	ErrInvalid     = errors.New("invalid or expired")
)

// Secret prefixes make a leaked secret recognisable (secret scanners) and
// tell grants from enrollment tokens from API tokens.
const (
	EnrollmentPrefix = "fne_"
	GrantPrefix      = "fgr_"
)

// Defaults.
const (
	DefaultEnrollmentTTL = time.Hour
	// DefaultGrantTTL is how long a grant may wait for its key release: a
	// cold load pulls the layers first (tens of MiB), so minutes, not
	// seconds.
	DefaultGrantTTL = 10 * time.Minute
	// MaxEnrollmentTTL bounds how long an enrollment token may live.
	MaxEnrollmentTTL = 7 * 24 * time.Hour
	// MaxLoadsPerGrant bounds the load records one grant backs: one per
	// chip an image occupies, with room for multi-board images.
	MaxLoadsPerGrant = 8
)

func newSecret(prefix string) (secret string, hash []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand since Go 1.24)
	secret = prefix + base64.RawURLEncoding.EncodeToString(b)
	return secret, hashOf(secret)
}

func hashOf(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// wellFormed reports whether s looks like a secret of prefix, so that
// garbage never reaches the database.
func wellFormed(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil
}

// DBTX is what the functions need of the database: a pgx.Tx, so that a
// caller's audit record commits with the change, or the pool.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}
