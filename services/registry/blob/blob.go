package blob

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var (
	// ErrNotFound: no blob, or no upload, with that digest or id.
	ErrNotFound = errors.New("blob: not found")
	// ErrDigestMismatch: the staged content does not hash to the digest given to Commit.
	ErrDigestMismatch = errors.New("blob: digest mismatch")
	// ErrInvalidRange: a range outside the blob.
	ErrInvalidRange = errors.New("blob: invalid range")
	// ErrInvalidDigest: a malformed digest, or one of an algorithm the
	// registry does not support (then the error also wraps
	// ErrUnsupportedDigest).
	ErrInvalidDigest = errors.New("blob: invalid or unsupported digest")
	// ErrStorageFull: the storage refused a write for want of space (a full
	// disk, a quota, an S3 service below its free-space threshold).
	ErrStorageFull = errors.New("blob: storage full")
	// ErrUnsupportedDigest: a well-formed digest ("algorithm:encoded", as
	// the OCI image specification defines it) of an algorithm other than
	// those of [Algorithms]. It wraps ErrInvalidDigest.
	ErrUnsupportedDigest = fmt.Errorf("%w: unsupported algorithm", ErrInvalidDigest)
)

// Algorithm is a digest algorithm the registry supports.
type Algorithm string

// The supported algorithms, those the OCI image specification registers.
const (
	SHA256 Algorithm = "sha256"
	SHA512 Algorithm = "sha512"
	// Canonical is the algorithm of the digests the registry computes
	// itself, e.g. of a manifest pushed by tag.
	Canonical = SHA256
)

// Algorithms lists the supported algorithms.
func Algorithms() []Algorithm { return []Algorithm{SHA256, SHA512} }

// ParseAlgorithm returns s as an Algorithm, or an error wrapping
// ErrUnsupportedDigest.
func ParseAlgorithm(s string) (Algorithm, error) {
	if a := Algorithm(s); a.Available() {
		return a, nil
	}
	return "", fmt.Errorf("%w: %q", ErrUnsupportedDigest, truncate(s))
}

// Available reports whether a is a supported algorithm.
func (a Algorithm) Available() bool { return a == SHA256 || a == SHA512 }

// New returns a new hash of algorithm a, which must be available.
func (a Algorithm) New() hash.Hash {
	switch a {
	case SHA256:
		return sha256.New()
	case SHA512:
		return sha512.New()
	}
	panic("blob: unavailable algorithm " + strconv.Quote(string(a)))
}

// hexLen is the length of the encoded part of a's digests.
func (a Algorithm) hexLen() int {
	switch a {
	case SHA256:
		return 2 * sha256.Size
	case SHA512:
		return 2 * sha512.Size
	}
	return 0
}

// FromBytes returns the digest of p with algorithm a, which must be available.
func (a Algorithm) FromBytes(p []byte) Digest {
	h := a.New()
	h.Write(p)
	return a.FromHash(h)
}

// FromHash returns the digest that h, a hash of algorithm a (from a.New),
// has computed so far.
func (a Algorithm) FromHash(h hash.Hash) Digest {
	return Digest(string(a) + ":" + hex.EncodeToString(h.Sum(nil)))
}

// String returns a.
func (a Algorithm) String() string { return string(a) }

// Digest is an OCI content digest of a supported algorithm:
// "sha256:" and 64, or "sha512:" and 128, lowercase hex digits.
type Digest string

// maxDigestLen bounds what ParseDigest looks at; no supported digest is
// longer.
const maxDigestLen = 256

var (
	// The digest grammar of the OCI image specification (descriptor.md).
	algorithmRe = regexp.MustCompile(`^[a-z0-9]+(?:[+._-][a-z0-9]+)*$`)
	encodedRe   = regexp.MustCompile(`^[a-zA-Z0-9=_-]+$`)
)

// ParseDigest checks s and returns it as a Digest. A malformed digest
// wraps ErrInvalidDigest; a well-formed one of an algorithm other than
// sha256 and sha512 wraps ErrUnsupportedDigest (and so ErrInvalidDigest).
func ParseDigest(s string) (Digest, error) {
	alg, enc, ok := strings.Cut(s, ":")
	if !ok || len(s) > maxDigestLen || !algorithmRe.MatchString(alg) || !encodedRe.MatchString(enc) {
		return "", fmt.Errorf("%w: %q", ErrInvalidDigest, truncate(s))
	}
	a := Algorithm(alg)
	if !a.Available() {
		return "", fmt.Errorf("%w: %q", ErrUnsupportedDigest, truncate(s))
	}
	if !isLowerHex(enc, a.hexLen()) {
		return "", fmt.Errorf("%w: %q is not %d lowercase hex digits", ErrInvalidDigest, truncate(s), a.hexLen())
	}
	return Digest(s), nil
}

// NewDigest returns the digest of algorithm a with encoded (hex) part h.
func NewDigest(a Algorithm, h string) (Digest, error) { return ParseDigest(string(a) + ":" + h) }

// FromBytes returns the canonical (sha256) digest of p.
func FromBytes(p []byte) Digest { return Canonical.FromBytes(p) }

// Validate reports whether d is well formed and supported, wrapping
// ErrInvalidDigest.
func (d Digest) Validate() error { _, err := ParseDigest(string(d)); return err }

// Algorithm returns the algorithm part of d.
func (d Digest) Algorithm() Algorithm {
	a, _, _ := strings.Cut(string(d), ":")
	return Algorithm(a)
}

// Hex returns the encoded (hex) part of d.
func (d Digest) Hex() string {
	_, h, _ := strings.Cut(string(d), ":")
	return h
}

// String returns d.
func (d Digest) String() string { return string(d) }

func isLowerHex(h string, n int) bool {
	if len(h) != n {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// truncate shortens s for an error message.
func truncate(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Info describes a committed blob.
type Info struct {
	Digest   Digest
	Size     int64
	Modified time.Time // when it was last committed
}

// UploadInfo describes staged data of an upload, as listed by Store.Uploads.
type UploadInfo struct {
	ID      string
	Size    int64     // bytes staged
	Updated time.Time // last write (or start)
}

// Store is a content-addressed blob store. All methods are safe for
// concurrent use.
type Store interface {
	// Stat returns the blob's Info, or an error wrapping ErrNotFound.
	Stat(ctx context.Context, d Digest) (Info, error)
	// Open reads length bytes of the blob from offset; length < 0 reads to
	// the end. The range must lie within the blob (offset+length <= size;
	// offset == size with length 0 or < 0 reads nothing), else the error
	// wraps ErrInvalidRange. A missing blob wraps ErrNotFound.
	Open(ctx context.Context, d Digest, offset, length int64) (io.ReadCloser, error)
	// Delete removes the blob; a missing blob wraps ErrNotFound.
	Delete(ctx context.Context, d Digest) error
	// List calls fn for every committed blob, in no particular order,
	// stopping at and returning the first error fn returns.
	List(ctx context.Context, fn func(Info) error) error

	// Begin starts a new, empty upload.
	Begin(ctx context.Context) (Upload, error)
	// Resume returns the upload with the given id at its durable offset, or
	// an error wrapping ErrNotFound (unknown, committed or cancelled).
	Resume(ctx context.Context, id string) (Upload, error)
	// Uploads calls fn for every upload with staged data, including
	// leftovers of uploads a crash interrupted during Commit or Cancel.
	Uploads(ctx context.Context, fn func(UploadInfo) error) error
	// Abort removes all staged data of upload id, whatever its state; an
	// unknown id wraps ErrNotFound.
	Abort(ctx context.Context, id string) error
}

// DefaultRedirectExpiry is how long a [Redirector]'s URL stays valid when
// the caller asks for expiry <= 0.
const DefaultRedirectExpiry = 10 * time.Minute

// Redirector is an optional capability of a Store, found by type assertion:
// it hands out a URL from which anyone holding it can GET the blob's bytes
// directly (an S3 presigned URL), so that a server can redirect downloads
// instead of proxying them. See the package doc.
type Redirector interface {
	// RedirectURL returns a URL for a plain, unauthenticated GET of the
	// whole blob (a Range header works as on any HTTP server), valid for
	// expiry (<= 0: DefaultRedirectExpiry). It need not check that the blob
	// exists: the caller does, and a GET of a missing blob fails at the
	// URL's server. An invalid digest wraps ErrInvalidDigest.
	RedirectURL(ctx context.Context, d Digest, expiry time.Duration) (*url.URL, error)
}

// SpaceChecker is an optional capability of a Store, found by type
// assertion: it tells whether the storage has room for more data, for
// readiness probes and metrics.
type SpaceChecker interface {
	// CheckSpace returns an error wrapping ErrStorageFull while the storage
	// is full, nil while it has room, and another error when it cannot tell.
	CheckSpace(ctx context.Context) error
}

// Upload is staged, not yet visible content. See the package doc.
type Upload interface {
	// ID identifies the upload for Store.Resume; it is safe in URLs and paths.
	ID() string
	// Offset is the number of bytes staged so far.
	Offset() int64
	// Write appends everything r yields at Offset and makes it durable,
	// returning how many bytes were staged by this call.
	Write(ctx context.Context, r io.Reader) (int64, error)
	// Commit verifies that the staged content has digest expected and makes
	// it visible as that blob, then removes the upload. On ErrDigestMismatch
	// nothing becomes visible and the upload is left as it was (Cancel it).
	Commit(ctx context.Context, expected Digest) (Info, error)
	// Cancel removes the upload and its staged data.
	Cancel(ctx context.Context) error
}

// CheckRange validates offset and length against a blob of size bytes and
// returns the number of bytes to read. Implementations share it.
func CheckRange(offset, length, size int64) (int64, error) {
	if offset < 0 || offset > size {
		return 0, fmt.Errorf("%w: offset %d of %d bytes", ErrInvalidRange, offset, size)
	}
	if length < 0 {
		return size - offset, nil
	}
	if length > size-offset {
		return 0, fmt.Errorf("%w: %d bytes at offset %d of %d bytes", ErrInvalidRange, length, offset, size)
	}
	return length, nil
}

// ContextReader returns r, failing with ctx's error once ctx is done.
func ContextReader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
