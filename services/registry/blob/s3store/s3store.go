package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/fpga-faas/faas/services/registry/blob"
)

// Options configure a Store.
type Options struct {
	// Prefix is prepended to every key, e.g. "registry/". Default none.
	Prefix string
	// PartSize is the multipart part size for writes of unknown length; a
	// Write buffers up to this much in memory. Default 16 MiB.
	PartSize uint64
	// PublicClient signs the URLs of RedirectURL, which carry its endpoint:
	// a client with the same credentials on the endpoint that the
	// registry's clients reach the bucket at, when that differs from the
	// registry's own (e.g. "s3.example.com" outside, "minio:9000" inside).
	// Set its Region, or presigning asks the endpoint for the bucket's
	// location once. nil: the store's client.
	PublicClient *minio.Client

	// DisableDirectGets makes Open read through minio-go only. Otherwise,
	// on a plain-HTTP endpoint with no proxy set in the environment
	// (HTTP_PROXY, NO_PROXY), Open GETs a presigned URL of the object over
	// connections of the store's own, whose bodies hand their TCP
	// connection to an io.ReaderFrom (see the package doc). Any failure
	// before the body falls back to minio-go.
	DisableDirectGets bool
	// MaxDirectConns bounds the open connections of direct GETs; when all
	// are in use, Open reads through minio-go. Default
	// DefaultMaxDirectConns.
	MaxDirectConns int
	// DirectReadTimeout bounds the wait for a direct GET's response head,
	// and for every MiB of its body. Default DefaultDirectReadTimeout.
	DirectReadTimeout time.Duration
}

// Store is a blob.Store in an S3 bucket.
type Store struct {
	c      *minio.Client
	bucket string
	opt    Options
	// full is set when the service refused a write for want of space and
	// cleared by the next write it accepts (see CheckSpace).
	full atomic.Bool
	// direct is nil when Open reads through minio-go only.
	direct *direct
}

var (
	_ blob.Store        = (*Store)(nil)
	_ blob.Redirector   = (*Store)(nil)
	_ blob.SpaceChecker = (*Store)(nil)
)

// New returns a Store on bucket through client. It makes no request; the
// bucket must exist (see EnsureBucket).
func New(client *minio.Client, bucket string, opt Options) *Store {
	if opt.PartSize == 0 {
		opt.PartSize = 16 << 20
	}
	if opt.PublicClient == nil {
		opt.PublicClient = client
	}
	if opt.MaxDirectConns <= 0 {
		opt.MaxDirectConns = DefaultMaxDirectConns
	}
	if opt.DirectReadTimeout <= 0 {
		opt.DirectReadTimeout = DefaultDirectReadTimeout
	}
	s := &Store{c: client, bucket: bucket, opt: opt}
	if !opt.DisableDirectGets && directUsable(client.EndpointURL()) {
		s.direct = newDirect(opt.MaxDirectConns, opt.DirectReadTimeout)
	}
	return s
}

// Close closes the idle connections of direct GETs. The store stays
// usable.
func (s *Store) Close() error {
	if s.direct != nil {
		s.direct.close()
	}
	return nil
}

// EnsureBucket creates the bucket if it does not exist.
func (s *Store) EnsureBucket(ctx context.Context, region string) error {
	ok, err := s.c.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("s3store: bucket %s: %w", s.bucket, err)
	}
	if ok {
		return nil
	}
	err = s.c.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region})
	if err != nil {
		if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
			return nil
		}
		return fmt.Errorf("s3store: make bucket %s: %w", s.bucket, err)
	}
	return nil
}

// Ping checks that the bucket is reachable (for readiness probes).
func (s *Store) Ping(ctx context.Context) error {
	ok, err := s.c.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("s3store: bucket %s: %w", s.bucket, err)
	}
	if !ok {
		return fmt.Errorf("s3store: bucket %s does not exist", s.bucket)
	}
	return nil
}

func (s *Store) blobsPrefix(a blob.Algorithm) string {
	return s.opt.Prefix + "blobs/" + string(a) + "/"
}

// blobKey is the key of d, which must be valid (so its parts are safe in a key).
func (s *Store) blobKey(d blob.Digest) string { return s.blobsPrefix(d.Algorithm()) + d.Hex() }
func (s *Store) uploadsPrefix() string        { return s.opt.Prefix + "uploads/" }
func (s *Store) uploadPrefix(id string) string {
	return s.uploadsPrefix() + id + "/"
}
func (s *Store) markerKey(id string) string    { return s.uploadPrefix(id) + "started" }
func (s *Store) assembledKey(id string) string { return s.uploadPrefix(id) + "assembled" }
func (s *Store) chunkKey(id string, n int) string {
	return fmt.Sprintf("%s%010d", s.uploadPrefix(id), n)
}

func isNotFound(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.StatusCode == http.StatusNotFound || r.Code == "NoSuchKey"
}

// isFull reports whether err is the service's refusal of a write for want
// of space: MinIO's XMinioStorageFull ("Storage backend has reached its
// minimum free drive threshold", 507), a MinIO bucket quota, or any 507
// Insufficient Storage.
func isFull(err error) bool {
	var r minio.ErrorResponse
	if !errors.As(err, &r) {
		return false
	}
	return r.StatusCode == http.StatusInsufficientStorage || r.Code == "XMinioStorageFull" ||
		r.Code == "XMinioAdminBucketQuotaExceeded"
}

func wrap(err error, what string) error {
	switch {
	case isNotFound(err):
		return fmt.Errorf("s3store: %s: %w", what, blob.ErrNotFound)
	case isFull(err):
		return fmt.Errorf("s3store: %s: %w: %w", what, blob.ErrStorageFull, err)
	}
	return fmt.Errorf("s3store: %s: %w", what, err)
}

// wrote records the outcome of a write for CheckSpace and wraps its error.
func (s *Store) wrote(err error, what string) error {
	if err == nil {
		s.full.Store(false)
		return nil
	}
	if isFull(err) {
		s.full.Store(true)
	}
	return wrap(err, what)
}

// CheckSpace implements blob.SpaceChecker. S3 tells no free space, so the
// store is full from a write the service refused for want of space until
// one it accepts: while full, CheckSpace writes a one-byte probe object
// (outside the blob and upload keys) to learn whether space came back.
func (s *Store) CheckSpace(ctx context.Context) error {
	if !s.full.Load() {
		return nil
	}
	key := s.opt.Prefix + "space-probe"
	_, err := s.c.PutObject(ctx, s.bucket, key, bytes.NewReader([]byte{0}), 1, minio.PutObjectOptions{})
	if err = s.wrote(err, "space probe"); err != nil {
		return err
	}
	_ = s.c.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{})
	return nil
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, d blob.Digest) (blob.Info, error) {
	if err := d.Validate(); err != nil {
		return blob.Info{}, fmt.Errorf("s3store: %w", err)
	}
	oi, err := s.c.StatObject(ctx, s.bucket, s.blobKey(d), minio.StatObjectOptions{})
	if err != nil {
		return blob.Info{}, wrap(err, string(d))
	}
	return blob.Info{Digest: d, Size: oi.Size, Modified: oi.LastModified}, nil
}

// Open implements blob.Store.
func (s *Store) Open(ctx context.Context, d blob.Digest, offset, length int64) (io.ReadCloser, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("s3store: %w", err)
	}
	// Core.GetObject streams the response body itself; minio.Object would
	// add a goroutine and a copy per read, a third of a pull's CPU.
	core := minio.Core{Client: s.c}
	if offset == 0 && length != 0 {
		// From the start, as clients pull: no Stat, the answer tells the
		// size.
		if rc, ok, err := s.openDirect(ctx, d, 0, length); ok || err != nil {
			return rc, err
		}
		if length < 0 {
			body, _, _, err := core.GetObject(ctx, s.bucket, s.blobKey(d), minio.GetObjectOptions{})
			if err != nil {
				return nil, wrap(err, string(d))
			}
			return body, nil
		}
	}
	info, err := s.Stat(ctx, d)
	if err != nil {
		return nil, err
	}
	n, err := blob.CheckRange(offset, length, info.Size)
	if err != nil {
		return nil, fmt.Errorf("s3store: %s: %w", d, err)
	}
	if n == 0 {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	if offset != 0 {
		if rc, ok, err := s.openDirect(ctx, d, offset, n); ok || err != nil {
			return rc, err
		}
	}
	var opts minio.GetObjectOptions
	if err := opts.SetRange(offset, offset+n-1); err != nil {
		return nil, fmt.Errorf("s3store: %s: %w", d, err)
	}
	body, _, _, err := core.GetObject(ctx, s.bucket, s.blobKey(d), opts)
	if err != nil {
		return nil, wrap(err, string(d))
	}
	return body, nil
}

// openDirect reads length bytes of d from offset by a direct GET (see
// Options.DisableDirectGets); length < 0 reads to the end. For offset > 0
// the range must have been checked against the blob's size; for offset 0
// a length past the end fails with blob.ErrInvalidRange. ok is false, with
// a nil error, when the caller should read through minio-go instead.
func (s *Store) openDirect(ctx context.Context, d blob.Digest, offset, length int64) (rc io.ReadCloser, ok bool, err error) {
	if s.direct == nil {
		return nil, false, nil
	}
	// The URL is only used at once; its expiry need not be longer than
	// the time to send it.
	u, err := s.c.PresignedGetObject(ctx, s.bucket, s.blobKey(d), time.Minute, nil)
	if err != nil || u.Scheme != "http" {
		return nil, false, ctx.Err()
	}
	rng := ""
	if offset > 0 {
		rng = "bytes=" + strconv.FormatInt(offset, 10) + "-" + strconv.FormatInt(offset+length-1, 10)
	}
	resp, body, err := s.direct.get(ctx, u, rng)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, fmt.Errorf("s3store: %s: %w", d, ctx.Err())
		}
		return nil, false, nil
	}
	switch {
	case offset > 0 && (resp.ContentLength != length || !strings.HasPrefix(resp.Header.Get("Content-Range"), contentRange(offset, length))):
		body.Close()
		return nil, false, nil
	case length > resp.ContentLength:
		body.Close()
		return nil, false, fmt.Errorf("s3store: %s: %w: %d bytes of %d bytes", d, blob.ErrInvalidRange, length, resp.ContentLength)
	case length >= 0:
		limitBody(body, length)
	}
	return body, true, nil
}

// RedirectURL implements blob.Redirector: a presigned GET of the blob's
// object through Options.PublicClient. Signing is local (no request, once
// the bucket's region is known) and does not check that the blob exists.
func (s *Store) RedirectURL(ctx context.Context, d blob.Digest, expiry time.Duration) (*url.URL, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("s3store: %w", err)
	}
	if expiry <= 0 {
		expiry = blob.DefaultRedirectExpiry
	}
	u, err := s.opt.PublicClient.PresignedGetObject(ctx, s.bucket, s.blobKey(d), expiry, nil)
	if err != nil {
		return nil, fmt.Errorf("s3store: presign %s: %w", d, err)
	}
	return u, nil
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, d blob.Digest) error {
	if _, err := s.Stat(ctx, d); err != nil {
		return err
	}
	if err := s.c.RemoveObject(ctx, s.bucket, s.blobKey(d), minio.RemoveObjectOptions{}); err != nil {
		return wrap(err, "delete "+string(d))
	}
	return nil
}

// List implements blob.Store.
func (s *Store) List(ctx context.Context, fn func(blob.Info) error) error {
	for _, a := range blob.Algorithms() {
		if err := s.list(ctx, a, fn); err != nil {
			return err
		}
	}
	return nil
}

// list lists the blobs of algorithm a.
func (s *Store) list(ctx context.Context, a blob.Algorithm, fn func(blob.Info) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing goroutine when fn fails
	prefix := s.blobsPrefix(a)
	for oi := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if oi.Err != nil {
			return fmt.Errorf("s3store: list: %w", oi.Err)
		}
		d, err := blob.NewDigest(a, strings.TrimPrefix(oi.Key, prefix))
		if err != nil {
			continue
		}
		if err := fn(blob.Info{Digest: d, Size: oi.Size, Modified: oi.LastModified}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func newID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

func validID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// Begin implements blob.Store.
func (s *Store) Begin(ctx context.Context) (blob.Upload, error) {
	id := newID()
	_, err := s.c.PutObject(ctx, s.bucket, s.markerKey(id), bytes.NewReader(nil), 0, minio.PutObjectOptions{})
	if err := s.wrote(err, "begin"); err != nil {
		return nil, err
	}
	return &upload{s: s, id: id}, nil
}

type chunk struct {
	key  string
	size int64
	etag string
}

// state lists an upload's objects: whether its marker exists, its chunks in
// order, and every key under its prefix.
func (s *Store) state(ctx context.Context, id string) (marker bool, chunks []chunk, keys []string, updated time.Time, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prefix := s.uploadPrefix(id)
	idx := map[int]chunk{}
	for oi := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if oi.Err != nil {
			return false, nil, nil, time.Time{}, fmt.Errorf("s3store: upload %s: %w", id, oi.Err)
		}
		keys = append(keys, oi.Key)
		if oi.LastModified.After(updated) {
			updated = oi.LastModified
		}
		name := strings.TrimPrefix(oi.Key, prefix)
		if name == "started" {
			marker = true
			continue
		}
		if n, err := strconv.Atoi(name); err == nil && len(name) == 10 {
			idx[n] = chunk{key: oi.Key, size: oi.Size, etag: oi.ETag}
		}
	}
	for n := 0; n < len(idx); n++ {
		c, ok := idx[n]
		if !ok {
			return marker, nil, keys, updated, fmt.Errorf("s3store: upload %s: chunk %d missing of %d", id, n, len(idx))
		}
		chunks = append(chunks, c)
	}
	return marker, chunks, keys, updated, nil
}

// Resume implements blob.Store.
func (s *Store) Resume(ctx context.Context, id string) (blob.Upload, error) {
	if !validID(id) {
		return nil, fmt.Errorf("s3store: upload %q: %w", id, blob.ErrNotFound)
	}
	marker, chunks, _, _, err := s.state(ctx, id)
	if err != nil {
		return nil, err
	}
	if !marker {
		return nil, fmt.Errorf("s3store: upload %s: %w", id, blob.ErrNotFound)
	}
	u := &upload{s: s, id: id, next: len(chunks)}
	for _, c := range chunks {
		u.offset += c.size
	}
	return u, nil
}

// Uploads implements blob.Store.
func (s *Store) Uploads(ctx context.Context, fn func(blob.UploadInfo) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prefix := s.uploadsPrefix()
	byID := map[string]*blob.UploadInfo{}
	var order []string
	for oi := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if oi.Err != nil {
			return fmt.Errorf("s3store: uploads: %w", oi.Err)
		}
		id, name, ok := strings.Cut(strings.TrimPrefix(oi.Key, prefix), "/")
		if !ok || !validID(id) {
			continue
		}
		u := byID[id]
		if u == nil {
			u = &blob.UploadInfo{ID: id}
			byID[id] = u
			order = append(order, id)
		}
		if name != "started" && name != "assembled" {
			u.Size += oi.Size
		}
		if oi.LastModified.After(u.Updated) {
			u.Updated = oi.LastModified
		}
	}
	sort.Strings(order)
	for _, id := range order {
		if err := fn(*byID[id]); err != nil {
			return err
		}
	}
	return nil
}

// Abort implements blob.Store.
func (s *Store) Abort(ctx context.Context, id string) error {
	if !validID(id) {
		return fmt.Errorf("s3store: upload %q: %w", id, blob.ErrNotFound)
	}
	_, _, keys, _, err := s.state(ctx, id)
	if err != nil && len(keys) == 0 {
		return err
	}
	if len(keys) == 0 {
		return fmt.Errorf("s3store: upload %s: %w", id, blob.ErrNotFound)
	}
	// The marker goes first: from then on the upload is not resumable.
	if err := s.removeKeys(ctx, []string{s.markerKey(id)}); err != nil {
		return fmt.Errorf("s3store: abort %s: %w", id, err)
	}
	if err := s.removeKeys(ctx, keys); err != nil {
		return fmt.Errorf("s3store: abort %s: %w", id, err)
	}
	return nil
}

func (s *Store) removeKeys(ctx context.Context, keys []string) error {
	ch := make(chan minio.ObjectInfo, len(keys))
	for _, k := range keys {
		ch <- minio.ObjectInfo{Key: k}
	}
	close(ch)
	var errs []error
	for e := range s.c.RemoveObjects(ctx, s.bucket, ch, minio.RemoveObjectsOptions{}) {
		if e.Err != nil && !isNotFound(e.Err) {
			errs = append(errs, fmt.Errorf("%s: %w", e.ObjectName, e.Err))
		}
	}
	return errors.Join(errs...)
}

type upload struct {
	s      *Store
	id     string
	mu     sync.Mutex
	offset int64
	next   int // number of the next chunk
}

func (u *upload) ID() string { return u.id }

func (u *upload) Offset() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.offset
}

func (u *upload) Write(ctx context.Context, r io.Reader) (int64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	// Read ahead one byte so that an empty write stores no chunk.
	var first [1]byte
	n, err := io.ReadFull(blob.ContextReader(ctx, r), first[:])
	if n == 0 {
		if err == io.EOF {
			return 0, nil
		}
		return 0, fmt.Errorf("s3store: write upload %s: %w", u.id, err)
	}
	body := io.MultiReader(bytes.NewReader(first[:]), blob.ContextReader(ctx, r))
	info, err := u.s.c.PutObject(ctx, u.s.bucket, u.s.chunkKey(u.id, u.next), body, -1,
		minio.PutObjectOptions{PartSize: u.s.opt.PartSize, ContentType: "application/octet-stream"})
	if err := u.s.wrote(err, "write upload "+u.id); err != nil {
		return 0, err
	}
	u.next++
	u.offset += info.Size
	return info.Size, nil
}

func (u *upload) Commit(ctx context.Context, expected blob.Digest) (blob.Info, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.s
	if err := expected.Validate(); err != nil {
		return blob.Info{}, fmt.Errorf("s3store: commit: %w", err)
	}
	marker, chunks, keys, _, err := s.state(ctx, u.id)
	if err != nil {
		return blob.Info{}, err
	}
	if !marker {
		return blob.Info{}, fmt.Errorf("s3store: commit upload %s: %w", u.id, blob.ErrNotFound)
	}
	mismatch := func(got blob.Digest) error {
		return fmt.Errorf("s3store: commit upload %s: %w: content is %s, expected %s", u.id, blob.ErrDigestMismatch, got, expected)
	}

	var size int64
	switch len(chunks) {
	case 0:
		if got := expected.Algorithm().FromBytes(nil); got != expected {
			return blob.Info{}, mismatch(got)
		}
		_, err := s.c.PutObject(ctx, s.bucket, s.blobKey(expected), bytes.NewReader(nil), 0,
			minio.PutObjectOptions{ContentType: "application/octet-stream"})
		if err := s.wrote(err, "commit upload "+u.id); err != nil {
			return blob.Info{}, err
		}
	default:
		src := chunks[0]
		h := expected.Algorithm().New()
		if len(chunks) == 1 {
			obj, err := s.c.GetObject(ctx, s.bucket, src.key, minio.GetObjectOptions{})
			if err != nil {
				return blob.Info{}, wrap(err, "commit upload "+u.id)
			}
			size, err = io.Copy(h, obj)
			oi, serr := obj.Stat()
			obj.Close()
			if err == nil {
				err = serr
			}
			if err != nil {
				return blob.Info{}, wrap(err, "commit upload "+u.id)
			}
			src.etag = oi.ETag
		} else {
			// Join the chunks into one staged object, hashing on the way.
			pr, pw := io.Pipe()
			go func() {
				var err error
				for _, c := range chunks {
					var obj *minio.Object
					obj, err = s.c.GetObject(ctx, s.bucket, c.key, minio.GetObjectOptions{})
					if err != nil {
						break
					}
					_, err = io.Copy(pw, obj)
					obj.Close()
					if err != nil {
						break
					}
				}
				pw.CloseWithError(err)
			}()
			var total int64
			for _, c := range chunks {
				total += c.size
			}
			info, err := s.c.PutObject(ctx, s.bucket, s.assembledKey(u.id), io.TeeReader(pr, h), total,
				minio.PutObjectOptions{PartSize: s.opt.PartSize, ContentType: "application/octet-stream"})
			pr.CloseWithError(errors.New("s3store: assembly stopped"))
			if err := s.wrote(err, "commit upload "+u.id); err != nil {
				return blob.Info{}, err
			}
			size = info.Size
			src = chunk{key: s.assembledKey(u.id), size: info.Size, etag: info.ETag}
			keys = append(keys, src.key)
		}
		if got := expected.Algorithm().FromHash(h); got != expected {
			if len(chunks) > 1 {
				_ = s.removeKeys(ctx, []string{src.key})
			}
			return blob.Info{}, mismatch(got)
		}
		// Server-side copy of exactly the object version that was hashed.
		_, err := s.c.ComposeObject(ctx,
			minio.CopyDestOptions{Bucket: s.bucket, Object: s.blobKey(expected),
				ReplaceMetadata: true, ContentType: "application/octet-stream"},
			minio.CopySrcOptions{Bucket: s.bucket, Object: src.key, MatchETag: src.etag})
		if err := s.wrote(err, "commit upload "+u.id); err != nil {
			return blob.Info{}, err
		}
	}

	// Committed. End the upload: marker first, then the staging objects.
	// A failure here leaves staging objects for GC, never a partial blob.
	_ = s.removeKeys(ctx, []string{s.markerKey(u.id)})
	_ = s.removeKeys(ctx, keys)

	info := blob.Info{Digest: expected, Size: size}
	if oi, err := s.c.StatObject(ctx, s.bucket, s.blobKey(expected), minio.StatObjectOptions{}); err == nil {
		info.Modified = oi.LastModified
	}
	return info, nil
}

func (u *upload) Cancel(ctx context.Context) error { return u.s.Abort(ctx, u.id) }
