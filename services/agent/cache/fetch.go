package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
	"syscall"
)

// chunk is the read size of a download; each chunk takes the lock once to
// reserve space when the size is unknown.
const chunk = 256 << 10

// call is one download shared by the Fetches of a digest.
type call struct {
	ctx     context.Context // the download's
	done    chan struct{}   // closed when err is set and, on success, the entry is pinned for every waiter
	err     error
	cancel  context.CancelFunc
	waiters map[*waiter]struct{} // under Cache.mu
}

// waiter is one Fetch waiting for a call.
type waiter struct {
	mu       sync.Mutex // held while progress runs, so that none runs after Fetch returned
	gone     bool
	progress func(int64)
}

func (w *waiter) report(n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.gone {
		w.progress(n)
	}
}

func (w *waiter) leave() {
	w.mu.Lock()
	w.gone = true
	w.mu.Unlock()
}

// Fetch returns the blob with digest d, pinned until the Blob is closed,
// downloading it with f first if it is not cached; hit reports whether it
// was. size is the blob's size from its descriptor, or negative if unknown;
// it is only used to check a download and to make room before it starts.
//
// Concurrent Fetches of one digest call f once and share its result. A Fetch
// whose ctx ends returns the context's error at once; the download goes on
// for the other callers and is cancelled only when none is left. f runs with
// a context carrying the values of the ctx of the Fetch that started it.
//
// The bytes are hashed as they are written to a temporary file, and the file
// is fsynced and renamed into the cache only if its SHA-256 and size match;
// otherwise the error wraps ErrDigestMismatch and nothing is kept. Room is made
// by evicting least recently used unpinned blobs; if there is none to make,
// or the disk is full, the error wraps ErrFull. progress, if not nil, is
// called with the bytes downloaded so far, from another goroutine, and never
// after Fetch returned; it must not block, as a Fetch that gives up waits for
// a call in progress.
//
// The Blob is returned pinned so that a concurrent download cannot evict it
// between Fetch and its use; callers who only want it cached close it at once.
func (c *Cache) Fetch(ctx context.Context, d string, size int64, f Fetcher, progress func(int64)) (b *Blob, hit bool, err error) {
	h, err := parseDigest(d)
	if err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("cache: fetch %s: %w", d, err)
	}
	c.mu.Lock()
	if e := c.pinLocked(h); e != nil {
		c.mu.Unlock()
		b, err := c.openPinned(e)
		return b, err == nil, err
	}
	cl := c.inflight[h]
	if cl == nil {
		cl = c.newCallLocked(ctx, h)
		go c.download(cl, h, size, f)
	}
	w := cl.joinLocked(progress)
	c.mu.Unlock()
	b, err = c.wait(ctx, cl, w, h)
	return b, false, err
}

// newCallLocked registers a download of h; its context carries the values of
// ctx but not its end.
func (c *Cache) newCallLocked(ctx context.Context, h string) *call {
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cl := &call{ctx: dctx, done: make(chan struct{}), cancel: cancel, waiters: make(map[*waiter]struct{})}
	c.inflight[h] = cl
	return cl
}

func (cl *call) joinLocked(progress func(int64)) *waiter {
	w := &waiter{progress: progress}
	cl.waiters[w] = struct{}{}
	return w
}

// wait waits for cl as waiter w and returns the blob it pinned for w. A
// waiter whose ctx ends leaves; the last one to leave cancels the download.
func (c *Cache) wait(ctx context.Context, cl *call, w *waiter, h string) (*Blob, error) {
	select {
	case <-cl.done:
	case <-ctx.Done():
		c.mu.Lock()
		select {
		case <-cl.done:
			// Finished while we were giving up; the entry is pinned for
			// us, so take the result rather than leak the pin.
			c.mu.Unlock()
		default:
			delete(cl.waiters, w)
			if len(cl.waiters) == 0 {
				cl.cancel()
				// A Fetch that comes now must start afresh, not join a
				// download that is being cancelled.
				if c.inflight[h] == cl {
					delete(c.inflight, h)
				}
			}
			c.mu.Unlock()
			w.leave()
			return nil, fmt.Errorf("cache: fetch %s%s: %w", algPrefix, h, context.Cause(ctx))
		}
	}
	if cl.err != nil {
		return nil, cl.err
	}
	c.mu.Lock()
	e := c.entries[h].Value.(*entry) // pinned for us by finish
	c.mu.Unlock()
	return c.openPinned(e)
}

// report tells cl's waiters that n bytes arrived.
func (c *Cache) report(cl *call, n int64) {
	var ws []*waiter
	c.mu.Lock()
	for w := range cl.waiters {
		if w.progress != nil {
			ws = append(ws, w)
		}
	}
	c.mu.Unlock()
	for _, w := range ws {
		w.report(n)
	}
}

// download runs f for the waiters of cl and finishes cl.
func (c *Cache) download(cl *call, h string, size int64, f Fetcher) {
	defer cl.cancel()
	p, err := c.write(cl.ctx, h, size, func() (io.ReadCloser, error) { return f(cl.ctx) }, func(n int64) { c.report(cl, n) })
	c.finish(cl, h, p, err)
}

// finish ends cl: on success the blob enters the cache, pinned once for
// each waiter, and on failure the waiters get err.
func (c *Cache) finish(cl *call, h string, p *pending, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		var e *entry
		e, err = p.commitLocked()
		if err == nil {
			e.pins += len(cl.waiters)
		}
	}
	cl.err = err
	if c.inflight[h] == cl {
		delete(c.inflight, h)
	}
	close(cl.done)
}

// Put adds the blob with digest d read from r, with the same verification and
// eviction as Fetch. It is meant for small blobs already in memory, such as
// manifests and configs; it does not share work with concurrent Fetches. A
// blob already cached is not read again, only marked used.
func (c *Cache) Put(ctx context.Context, d string, r io.Reader) error {
	h, err := parseDigest(d)
	if err != nil {
		return err
	}
	c.mu.Lock()
	e := c.pinLocked(h)
	c.mu.Unlock()
	if e != nil {
		b, err := c.openPinned(e) // updates the mtime
		if err != nil {
			return err
		}
		return b.Close()
	}
	p, err := c.write(ctx, h, -1, func() (io.ReadCloser, error) { return io.NopCloser(r), nil }, nil)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err = p.commitLocked()
	return err
}

// pending is a verified, synced temporary file holding reserved bytes.
type pending struct {
	c    *Cache
	h    string
	tmp  string
	size int64
}

// write copies the content opened by src to a temporary file, hashing it and
// reserving space as bytes arrive, and checks digest and size (size < 0:
// unknown). A known size is reserved before src is called, so that a blob
// that cannot fit costs no request. On error the file and the reservation
// are gone.
func (c *Cache) write(ctx context.Context, h string, size int64, src func() (io.ReadCloser, error), progress func(int64)) (p *pending, err error) {
	d := algPrefix + h
	w, err := c.newFill(h, size)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			w.abort()
		}
	}()
	r, err := src()
	if err != nil {
		return nil, fmt.Errorf("cache: fetch %s: %w", d, err)
	}
	if r == nil {
		return nil, fmt.Errorf("cache: fetch %s: fetcher returned no reader", d)
	}
	defer r.Close()

	buf := make([]byte, chunk)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cache: fetch %s: %w", d, context.Cause(ctx))
		}
		m, rerr := r.Read(buf)
		if m > 0 {
			if err := w.add(buf[:m]); err != nil {
				return nil, err
			}
			if progress != nil {
				progress(w.n)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if ctx.Err() != nil {
				// The reader failed because we cancelled it; say so.
				return nil, fmt.Errorf("cache: fetch %s: %w", d, context.Cause(ctx))
			}
			return nil, fmt.Errorf("cache: fetch %s: reading: %w", d, rerr)
		}
	}
	return w.finish()
}

// fill is a blob on its way into the cache: a temporary file, the hash of
// what was written to it, and the space reserved for it.
type fill struct {
	c    *Cache
	h    string
	size int64 // expected, or < 0
	resv int64
	n    int64
	f    tempFile
	hash hash.Hash
}

// newFill reserves a known size and creates the temporary file.
func (c *Cache) newFill(h string, size int64) (*fill, error) {
	w := &fill{c: c, h: h, size: size, hash: sha256.New()}
	if size >= 0 {
		if err := w.reserve(size); err != nil {
			return nil, fmt.Errorf("cache: %s (%d bytes): %w", algPrefix+h, size, err)
		}
	}
	f, err := c.createTemp(c.tmpDir, h+"-*")
	if err != nil {
		w.abort()
		return nil, diskErr("creating download file for", algPrefix+h, err)
	}
	w.f = f
	return w, nil
}

func (w *fill) reserve(n int64) error {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	if err := w.c.reserveLocked(n); err != nil {
		return err
	}
	w.resv += n
	return nil
}

// add hashes and writes the next bytes of the blob, reserving space for
// them if the size is unknown; more bytes than the size are a mismatch.
func (w *fill) add(p []byte) error {
	d := algPrefix + w.h
	m := int64(len(p))
	if w.size >= 0 && w.n+m > w.size {
		return fmt.Errorf("cache: %s: %w: more than the expected %d bytes", d, ErrDigestMismatch, w.size)
	}
	if w.n+m > w.resv {
		if err := w.reserve(w.n + m - w.resv); err != nil {
			return fmt.Errorf("cache: %s (%d bytes so far, size unknown): %w", d, w.n+m, err)
		}
	}
	w.hash.Write(p)
	if _, err := w.f.Write(p); err != nil {
		return diskErr("writing", d, err)
	}
	w.n += m
	return nil
}

// finish checks size and digest and syncs the file; on error the caller
// still aborts.
func (w *fill) finish() (*pending, error) {
	d := algPrefix + w.h
	if w.size >= 0 && w.n != w.size {
		return nil, fmt.Errorf("cache: %s: %w: got %d bytes, want %d", d, ErrDigestMismatch, w.n, w.size)
	}
	if got := hex.EncodeToString(w.hash.Sum(nil)); got != w.h {
		return nil, fmt.Errorf("cache: %s: %w: content is sha256:%s", d, ErrDigestMismatch, got)
	}
	// The data must be on disk before the rename makes it a blob: after a
	// crash, a file under blobs/ is trusted without hashing.
	if err := w.f.Sync(); err != nil {
		return nil, diskErr("syncing", d, err)
	}
	if err := w.f.Close(); err != nil {
		return nil, diskErr("closing", d, err)
	}
	return &pending{c: w.c, h: w.h, tmp: w.f.Name(), size: w.n}, nil
}

// abort drops the file and the reservation.
func (w *fill) abort() {
	if w.f != nil {
		w.f.Close()
		os.Remove(w.f.Name())
	}
	w.c.mu.Lock()
	w.c.reserved -= w.resv
	w.c.mu.Unlock()
	w.resv = 0
}

// commitLocked renames the file into the cache and turns its reservation
// into an entry. If another download committed the blob meanwhile, the file
// is dropped and the existing entry returned. The directory is not fsynced: a
// crash before the rename reaches the disk leaves the file in tmp/, which
// Open deletes, and the blob is simply fetched again.
func (p *pending) commitLocked() (*entry, error) {
	c := p.c
	c.reserved -= p.size
	if el := c.entries[p.h]; el != nil {
		os.Remove(p.tmp)
		c.touchLocked(el)
		return el.Value.(*entry), nil
	}
	if err := os.Rename(p.tmp, c.path(p.h)); err != nil {
		os.Remove(p.tmp)
		return nil, diskErr("storing", algPrefix+p.h, err)
	}
	e := &entry{hex: p.h, size: p.size, lastUsed: c.now()}
	c.entries[p.h] = c.lru.PushFront(e)
	c.used += p.size
	// A fresh file's mtime is the wall clock; set it to the cache's clock
	// so that the order after a restart matches the order now.
	_ = os.Chtimes(c.path(p.h), e.lastUsed, e.lastUsed)
	return e, nil
}

// diskErr wraps a filesystem error; ENOSPC also becomes ErrFull, so that a
// full disk and a full cache are handled alike.
func diskErr(op, d string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("cache: %s %s: %w: %w", op, d, ErrFull, err)
	}
	return fmt.Errorf("cache: %s %s: %w", op, d, err)
}
