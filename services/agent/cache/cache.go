package cache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Errors of this package; check with errors.Is.
var (
	// ErrNotFound: the blob is not in the cache.
	ErrNotFound = errors.New("blob not in cache")
	// ErrFull: the blob does not fit, either because the limit is too small
	// or everything that could be evicted is pinned, or because the
	// filesystem is out of space (then the error also wraps syscall.ENOSPC).
	ErrFull = errors.New("cache full")
	// ErrDigestMismatch: the bytes fetched do not have the expected digest or
	// size.
	ErrDigestMismatch = errors.New("digest mismatch")
	// ErrInvalidDigest: the digest is not "sha256:" and 64 lowercase hex
	// digits.
	ErrInvalidDigest = errors.New("invalid digest")
	// ErrInUse: Remove of a blob that is open (pinned).
	ErrInUse = errors.New("blob in use")
)

// DefaultMaxBytes is the size limit when Options.MaxBytes is 0.
const DefaultMaxBytes = 10 << 30

// Options configure a Cache. The zero value is usable.
type Options struct {
	// MaxBytes limits the total size of the blobs, including downloads in
	// progress. 0 means DefaultMaxBytes.
	MaxBytes int64
	// Now is the clock of last uses; nil means time.Now.
	Now func() time.Time
}

// Fetcher opens the content of a blob, typically an HTTP GET of the registry.
// The reader must honour ctx (as net/http bodies do): the cache stops a
// download by cancelling ctx, then waits for Read to return.
type Fetcher func(ctx context.Context) (io.ReadCloser, error)

// Entry describes a cached blob.
type Entry struct {
	Digest   string
	Size     int64
	LastUsed time.Time
	// Users are the users AddUser recorded for the blob, sorted.
	Users []string
}

// Cache is a content-addressed blob cache in a directory. Its methods are
// safe for concurrent use. One directory must be used by one Cache at a time.
type Cache struct {
	blobDir, tmpDir string
	max             int64
	now             func() time.Time
	createTemp      func(dir, pattern string) (tempFile, error) // replaced by tests to inject disk errors

	mu       sync.Mutex
	entries  map[string]*list.Element // hex -> element of lru holding *entry
	lru      *list.List               // front: most recently used
	used     int64                    // bytes of the blobs in entries
	reserved int64                    // bytes claimed by downloads in progress
	inflight map[string]*call         // hex -> the download of Fetch
}

type entry struct {
	hex      string
	size     int64
	lastUsed time.Time
	pins     int
	users    map[string]struct{} // see AddUser
}

// tempFile is the part of *os.File the writer uses.
type tempFile interface {
	io.Writer
	Name() string
	Sync() error
	Close() error
}

// Open opens the cache in dir, creating it (mode 0700) if needed. It deletes
// what a previous process left in dir/tmp, indexes dir/blobs by file size and
// mtime (the last use, so LRU order survives restarts), deletes files there
// whose name is not a digest, and evicts the least recently used blobs if they
// exceed MaxBytes. Blobs are not re-hashed; see the package documentation.
func Open(dir string, opts Options) (*Cache, error) {
	c := &Cache{
		blobDir:  filepath.Join(dir, "blobs", "sha256"),
		tmpDir:   filepath.Join(dir, "tmp"),
		max:      opts.MaxBytes,
		now:      opts.Now,
		entries:  make(map[string]*list.Element),
		lru:      list.New(),
		inflight: make(map[string]*call),
		createTemp: func(dir, pattern string) (tempFile, error) {
			return os.CreateTemp(dir, pattern)
		},
	}
	if c.max == 0 {
		c.max = DefaultMaxBytes
	}
	if c.max < 0 {
		return nil, fmt.Errorf("cache: negative MaxBytes %d", c.max)
	}
	if c.now == nil {
		c.now = time.Now
	}
	for _, d := range []string{dir, c.blobDir, c.tmpDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("cache: %w", err)
		}
	}

	tmps, err := os.ReadDir(c.tmpDir)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	for _, t := range tmps {
		if err := os.RemoveAll(filepath.Join(c.tmpDir, t.Name())); err != nil {
			return nil, fmt.Errorf("cache: removing leftover download: %w", err)
		}
	}

	des, err := os.ReadDir(c.blobDir)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	var found []*entry
	for _, de := range des {
		p := filepath.Join(c.blobDir, de.Name())
		if !de.Type().IsRegular() || !validHex(de.Name()) {
			// Not something this package wrote; it would take space the
			// index does not account for. Directories are left alone.
			if !de.IsDir() {
				if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("cache: removing stray file: %w", err)
				}
			}
			continue
		}
		fi, err := de.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("cache: %w", err)
		}
		found = append(found, &entry{hex: de.Name(), size: fi.Size(), lastUsed: fi.ModTime()})
	}
	// Most recent first; equal times (coarse mtimes) tie-break by name so
	// that the order is stable.
	sort.Slice(found, func(i, j int) bool {
		if !found[i].lastUsed.Equal(found[j].lastUsed) {
			return found[i].lastUsed.After(found[j].lastUsed)
		}
		return found[i].hex < found[j].hex
	})
	for _, e := range found {
		c.entries[e.hex] = c.lru.PushBack(e)
		c.used += e.size
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.used > c.max {
		if err := c.evictLocked(c.lru.Back().Value.(*entry)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cache) path(hex string) string { return filepath.Join(c.blobDir, hex) }

// Has reports whether the blob with digest d is cached. It does not count as
// a use.
func (c *Cache) Has(d string) bool {
	hex, err := parseDigest(d)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[hex]
	return ok
}

// Open returns the cached blob with digest d, pinned against eviction and
// removal until the Blob is closed. It counts as a use. A blob that is not
// cached gives ErrNotFound.
func (c *Cache) Open(d string) (*Blob, error) {
	hex, err := parseDigest(d)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	e := c.pinLocked(hex)
	c.mu.Unlock()
	if e == nil {
		return nil, fmt.Errorf("cache: %s: %w", d, ErrNotFound)
	}
	return c.openPinned(e)
}

// pinLocked pins the entry of hex and records a use, or returns nil.
func (c *Cache) pinLocked(hex string) *entry {
	el := c.entries[hex]
	if el == nil {
		return nil
	}
	e := el.Value.(*entry)
	e.pins++
	c.touchLocked(el)
	return e
}

// touchLocked records a use in memory; the file's mtime is updated by the
// caller outside the lock.
func (c *Cache) touchLocked(el *list.Element) {
	el.Value.(*entry).lastUsed = c.now()
	c.lru.MoveToFront(el)
}

// openPinned opens the file of an entry the caller has pinned; the pin moves
// to the returned Blob, or is released on error.
func (c *Cache) openPinned(e *entry) (*Blob, error) {
	p := c.path(e.hex)
	c.mu.Lock()
	t := e.lastUsed
	c.mu.Unlock()
	// The mtime carries the LRU order across restarts. Failing to set it
	// only makes the order after a restart less exact, so it is not an error.
	_ = os.Chtimes(p, t, t)
	f, err := os.Open(p)
	if err != nil {
		c.mu.Lock()
		e.pins--
		if errors.Is(err, fs.ErrNotExist) {
			// Deleted behind our back: forget it so that the next Fetch
			// downloads it again.
			if el := c.entries[e.hex]; el != nil && el.Value == e && e.pins == 0 {
				c.lru.Remove(el)
				delete(c.entries, e.hex)
				c.used -= e.size
			}
			err = fmt.Errorf("cache: sha256:%s: %w: %w", e.hex, ErrNotFound, err)
		} else {
			err = fmt.Errorf("cache: %w", err)
		}
		c.mu.Unlock()
		return nil, err
	}
	b := &Blob{c: c, e: e, f: f}
	b.r = io.NewSectionReader(f, 0, e.size)
	return b, nil
}

func (c *Cache) unpin(e *entry) {
	c.mu.Lock()
	e.pins--
	c.mu.Unlock()
}

// Remove deletes the blob with digest d. It fails with ErrNotFound if the
// blob is not cached and with ErrInUse while it is open: an open Blob keeps
// reading its file, but the cache would no longer account for its space.
func (c *Cache) Remove(d string) error {
	hex, err := parseDigest(d)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.entries[hex]
	if el == nil {
		return fmt.Errorf("cache: remove %s: %w", d, ErrNotFound)
	}
	e := el.Value.(*entry)
	if e.pins > 0 {
		return fmt.Errorf("cache: remove %s: %w (%d readers)", d, ErrInUse, e.pins)
	}
	return c.evictLocked(e)
}

// evictLocked deletes an unpinned entry and its file. If the file cannot be
// deleted the entry stays, so that the index never claims less space than
// the disk holds.
func (c *Cache) evictLocked(e *entry) error {
	if err := os.Remove(c.path(e.hex)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cache: evicting sha256:%s: %w", e.hex, err)
	}
	c.lru.Remove(c.entries[e.hex])
	delete(c.entries, e.hex)
	c.used -= e.size
	return nil
}

// AddUser records that user fetched or used the cached blob with digest d,
// so that List names user among its Users. The agent records the tenants
// that pulled or loaded an image, and shows each tenant only those: which
// images a node holds for others is their business. Records live in memory,
// as long as the blob stays cached: after a restart, or once the blob is
// evicted and fetched again, it has no users until they use it again. A
// blob that is not cached gives ErrNotFound.
func (c *Cache) AddUser(d, user string) error {
	hex, err := parseDigest(d)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.entries[hex]
	if el == nil {
		return fmt.Errorf("cache: %s: %w", d, ErrNotFound)
	}
	e := el.Value.(*entry)
	if e.users == nil {
		e.users = make(map[string]struct{})
	}
	e.users[user] = struct{}{}
	return nil
}

// List returns the cached blobs, most recently used first.
func (c *Cache) List() []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Entry, 0, c.lru.Len())
	for el := c.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*entry)
		var users []string
		for u := range e.users {
			users = append(users, u)
		}
		sort.Strings(users)
		out = append(out, Entry{Digest: algPrefix + e.hex, Size: e.size, LastUsed: e.lastUsed, Users: users})
	}
	return out
}

// Usage returns the bytes used by cached blobs and downloads in progress, and
// the limit.
func (c *Cache) Usage() (used, max int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used + c.reserved, c.max
}

// reserveLocked claims n more bytes for a download, evicting least recently
// used unpinned blobs as needed. If evicting everything evictable would not
// make room it evicts nothing and returns ErrFull: emptying the cache for a
// download that fails anyway would only cost the next pulls.
func (c *Cache) reserveLocked(n int64) error {
	need := c.used + c.reserved + n - c.max
	if need <= 0 {
		c.reserved += n
		return nil
	}
	var free int64
	for el := c.lru.Back(); el != nil && free < need; el = el.Prev() {
		if e := el.Value.(*entry); e.pins == 0 {
			free += e.size
		}
	}
	if free < need {
		return fmt.Errorf("%w: %d bytes of %d in use, %d of them pinned or being downloaded", ErrFull,
			c.used+c.reserved, c.max, c.used+c.reserved-free)
	}
	for el := c.lru.Back(); el != nil && need > 0; {
		prev := el.Prev()
		if e := el.Value.(*entry); e.pins == 0 {
			if err := c.evictLocked(e); err != nil {
				return err
			}
			need -= e.size
		}
		el = prev
	}
	c.reserved += n
	return nil
}

// Blob is an open cached blob. It is pinned until closed. Read and ReadAt do
// not affect each other; a Blob is not safe for concurrent Reads, but
// concurrent ReadAts are fine.
type Blob struct {
	c    *Cache
	e    *entry
	f    *os.File
	r    *io.SectionReader
	once sync.Once
}

// Digest returns the blob's digest.
func (b *Blob) Digest() string { return algPrefix + b.e.hex }

// Size returns the blob's size in bytes.
func (b *Blob) Size() int64 { return b.e.size }

func (b *Blob) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *Blob) ReadAt(p []byte, off int64) (int, error) { return b.r.ReadAt(p, off) }

// Close closes the file and unpins the blob. Later calls return
// os.ErrClosed.
func (b *Blob) Close() error {
	err := os.ErrClosed
	b.once.Do(func() {
		err = b.f.Close()
		b.c.unpin(b.e)
	})
	return err
}
