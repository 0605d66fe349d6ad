package dirstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fpga-faas/faas/services/registry/blob"
)

// Store is a blob.Store in a directory.
type Store struct {
	root string
}

var _ blob.Store = (*Store)(nil)

// New returns a Store rooted at dir, creating its layout if needed.
func New(dir string) (*Store, error) {
	s := &Store{root: dir}
	for _, d := range []string{s.blobDir(blob.Canonical), s.uploadsDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("dirstore: %w", err)
		}
	}
	return s, nil
}

func (s *Store) blobDir(a blob.Algorithm) string { return filepath.Join(s.root, "blobs", string(a)) }
func (s *Store) uploadsDir() string              { return filepath.Join(s.root, "uploads") }

// blobPath is the file of d, which must be valid (so its parts are safe in a path).
func (s *Store) blobPath(d blob.Digest) string {
	h := d.Hex()
	return filepath.Join(s.blobDir(d.Algorithm()), h[:2], h)
}

func (s *Store) uploadDir(id string) string { return filepath.Join(s.uploadsDir(), id) }

func notFound(err error, what string) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("dirstore: %s: %w", what, blob.ErrNotFound)
	}
	return fmt.Errorf("dirstore: %s: %w", what, err)
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, d blob.Digest) (blob.Info, error) {
	if err := d.Validate(); err != nil {
		return blob.Info{}, fmt.Errorf("dirstore: %w", err)
	}
	fi, err := os.Stat(s.blobPath(d))
	if err != nil {
		return blob.Info{}, notFound(err, string(d))
	}
	return blob.Info{Digest: d, Size: fi.Size(), Modified: fi.ModTime()}, nil
}

// Open implements blob.Store.
func (s *Store) Open(ctx context.Context, d blob.Digest, offset, length int64) (io.ReadCloser, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("dirstore: %w", err)
	}
	f, err := os.Open(s.blobPath(d))
	if err != nil {
		return nil, notFound(err, string(d))
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dirstore: %w", err)
	}
	n, err := blob.CheckRange(offset, length, fi.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dirstore: %s: %w", d, err)
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("dirstore: %w", err)
	}
	return &fileReader{io.LimitedReader{R: f, N: n}, f}, nil
}

// fileReader reads a range of a file from the file's offset. Its WriteTo
// hands the writer an *io.LimitedReader of the *os.File, so that a
// *net.TCPConn (or an http.ResponseWriter serving one) sends it with
// sendfile.
type fileReader struct {
	lr io.LimitedReader
	f  *os.File
}

func (r *fileReader) Read(p []byte) (int, error) { return r.lr.Read(p) }

// WriteTo implements io.WriterTo.
func (r *fileReader) WriteTo(w io.Writer) (int64, error) {
	want := r.lr.N
	var n int64
	var err error
	if rf, ok := w.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(&r.lr)
	} else {
		n, err = io.Copy(w, &r.lr)
	}
	if err == nil && n < want {
		err = fmt.Errorf("dirstore: %s: %w", r.f.Name(), io.ErrUnexpectedEOF) // truncated since Open
	}
	return n, err
}

func (r *fileReader) Close() error { return r.f.Close() }

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, d blob.Digest) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("dirstore: %w", err)
	}
	if err := os.Remove(s.blobPath(d)); err != nil {
		return notFound(err, string(d))
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
	prefixes, err := os.ReadDir(s.blobDir(a))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // created by the first commit of such a blob
	}
	if err != nil {
		return fmt.Errorf("dirstore: list: %w", err)
	}
	for _, p := range prefixes {
		if !p.IsDir() {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(s.blobDir(a), p.Name()))
		if err != nil {
			return fmt.Errorf("dirstore: list: %w", err)
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return err
			}
			d, err := blob.NewDigest(a, e.Name())
			if err != nil || !e.Type().IsRegular() {
				continue
			}
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted meanwhile
			} else if err != nil {
				return fmt.Errorf("dirstore: list: %w", err)
			}
			if err := fn(blob.Info{Digest: d, Size: fi.Size(), Modified: fi.ModTime()}); err != nil {
				return err
			}
		}
	}
	return nil
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
	return err == nil && id == string(bytes.ToLower([]byte(id)))
}

// Begin implements blob.Store.
func (s *Store) Begin(ctx context.Context) (blob.Upload, error) {
	id := newID()
	dir := s.uploadDir(id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dirstore: begin: %w", full(err))
	}
	f, err := os.OpenFile(filepath.Join(dir, "data"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("dirstore: begin: %w", full(err))
	}
	err = errors.Join(f.Sync(), f.Close(), syncDir(dir), syncDir(s.uploadsDir()))
	if err != nil {
		return nil, fmt.Errorf("dirstore: begin: %w", full(err))
	}
	return &upload{s: s, id: id}, nil
}

// Resume implements blob.Store.
func (s *Store) Resume(ctx context.Context, id string) (blob.Upload, error) {
	if !validID(id) {
		return nil, fmt.Errorf("dirstore: upload %q: %w", id, blob.ErrNotFound)
	}
	fi, err := os.Stat(filepath.Join(s.uploadDir(id), "data"))
	if err != nil {
		return nil, notFound(err, "upload "+id)
	}
	return &upload{s: s, id: id, offset: fi.Size()}, nil
}

// Uploads implements blob.Store.
func (s *Store) Uploads(ctx context.Context, fn func(blob.UploadInfo) error) error {
	entries, err := os.ReadDir(s.uploadsDir())
	if err != nil {
		return fmt.Errorf("dirstore: uploads: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || !validID(e.Name()) {
			continue
		}
		info := blob.UploadInfo{ID: e.Name()}
		if fi, err := os.Stat(filepath.Join(s.uploadDir(e.Name()), "data")); err == nil {
			info.Size, info.Updated = fi.Size(), fi.ModTime()
		} else if fi, err := e.Info(); err == nil {
			info.Updated = fi.ModTime()
		} else {
			continue // removed meanwhile
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

// Abort implements blob.Store.
func (s *Store) Abort(ctx context.Context, id string) error {
	if !validID(id) {
		return fmt.Errorf("dirstore: upload %q: %w", id, blob.ErrNotFound)
	}
	dir := s.uploadDir(id)
	if _, err := os.Stat(dir); err != nil {
		return notFound(err, "upload "+id)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("dirstore: abort %s: %w", id, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

type upload struct {
	s      *Store
	id     string
	mu     sync.Mutex
	offset int64
}

func (u *upload) ID() string { return u.id }

func (u *upload) Offset() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.offset
}

func (u *upload) dataPath() string { return filepath.Join(u.s.uploadDir(u.id), "data") }

func (u *upload) Write(ctx context.Context, r io.Reader) (int64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f, err := os.OpenFile(u.dataPath(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, notFound(err, "upload "+u.id)
	}
	n, err := io.Copy(f, blob.ContextReader(ctx, r))
	err = errors.Join(err, f.Sync())
	if isFull(err) {
		// Give the space back: the request failed, and nobody else may
		// write until something is freed.
		if terr := f.Truncate(u.offset); terr == nil {
			n = 0
		}
	}
	if fi, serr := f.Stat(); serr == nil {
		u.offset = fi.Size()
	} else {
		u.offset += n
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("dirstore: write upload %s: %w", u.id, full(err))
	}
	return n, nil
}

func (u *upload) Commit(ctx context.Context, expected blob.Digest) (blob.Info, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := expected.Validate(); err != nil {
		return blob.Info{}, fmt.Errorf("dirstore: commit: %w", err)
	}
	f, err := os.Open(u.dataPath())
	if err != nil {
		return blob.Info{}, notFound(err, "upload "+u.id)
	}
	h := expected.Algorithm().New()
	size, err := io.Copy(h, blob.ContextReader(ctx, f))
	f.Close()
	if err != nil {
		return blob.Info{}, fmt.Errorf("dirstore: commit upload %s: %w", u.id, err)
	}
	if got := expected.Algorithm().FromHash(h); got != expected {
		return blob.Info{}, fmt.Errorf("dirstore: commit upload %s: %w: content is %s, expected %s", u.id, blob.ErrDigestMismatch, got, expected)
	}
	final := u.s.blobPath(expected)
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return blob.Info{}, fmt.Errorf("dirstore: commit: %w", full(err))
	}
	// The blob's modification time is its commit time (see blob.Collect).
	now := time.Now()
	if err := os.Chtimes(u.dataPath(), now, now); err != nil {
		return blob.Info{}, notFound(err, "commit upload "+u.id)
	}
	// The data was fsynced by Write; renaming makes it visible atomically.
	if err := os.Rename(u.dataPath(), final); err != nil {
		return blob.Info{}, notFound(full(err), "commit upload "+u.id)
	}
	if err := syncDir(dir); err != nil {
		return blob.Info{}, fmt.Errorf("dirstore: commit: %w", full(err))
	}
	// The blob is committed; a failure to clean up leaves a dataless upload for GC.
	_ = os.RemoveAll(u.s.uploadDir(u.id))
	info := blob.Info{Digest: expected, Size: size}
	if fi, err := os.Stat(final); err == nil {
		info.Modified = fi.ModTime()
	}
	return info, nil
}

func (u *upload) Cancel(ctx context.Context) error { return u.s.Abort(ctx, u.id) }
