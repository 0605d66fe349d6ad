package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// errAbandoned: the reader of a Stream closed it early and nobody else
// waited for the blob.
var errAbandoned = errors.New("download abandoned by its reader")

// Stream is a blob read once, from start to end: a cached blob, or a
// download that its reader consumes as it arrives while the cache fills on
// the way (see Cache.Stream). A Stream is not safe for concurrent use.
type Stream struct {
	size int64
	blob *Blob // a cached blob; nil while downloading

	// A download: the Stream is its call's leader.
	c        *Cache
	cl       *call
	h        string
	leader   *waiter
	ctx      context.Context // the reader's
	stop     func() bool     // of the context.AfterFunc on ctx
	fill     *fill
	body     io.ReadCloser
	done     bool  // the download ended: committed, or failed with err
	err      error // why it failed
	closed   bool
	progress int64 // bytes reported to the call's waiters
}

// Stream returns a reader of the blob with digest d, read once from start
// to end. size is the blob's size from its descriptor (negative: unknown);
// hit reports whether it was cached.
//
// A cached blob is read from the cache. If a Fetch or Stream of d is
// downloading it, Stream waits for that download as Fetch does and then
// reads the cached blob. Otherwise Stream reserves room as Fetch does, calls
// f at once, and returns a Stream that reads f's body: every byte read is
// hashed and written to a temporary file on the way, and when the body ends
// with the digest and size matching, the file enters the cache, without
// being read back; a mismatch is the error of the Read that reaches the end
// and wraps ErrDigestMismatch, and nothing is kept. So the reader holds bytes
// before they are verified, and must not act on them irrevocably before
// Finish returned nil. Fetches and Streams of d meanwhile wait for the
// download and get the cached blob.
//
// The download ends with ctx, unless others are waiting for it: then it goes
// on for them, as it does when the Stream is closed before its end.
func (c *Cache) Stream(ctx context.Context, d string, size int64, f Fetcher) (s *Stream, hit bool, err error) {
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
		if err != nil {
			return nil, false, err
		}
		return &Stream{size: b.Size(), blob: b, done: true}, true, nil
	}
	if cl := c.inflight[h]; cl != nil {
		w := cl.joinLocked(nil)
		c.mu.Unlock()
		b, err := c.wait(ctx, cl, w, h)
		if err != nil {
			return nil, false, err
		}
		return &Stream{size: b.Size(), blob: b, done: true}, false, nil
	}
	cl := c.newCallLocked(ctx, h)
	s = &Stream{size: size, c: c, cl: cl, h: h, leader: cl.joinLocked(nil), ctx: ctx}
	c.mu.Unlock()
	// A reader gone with others waiting leaves the download to them.
	s.stop = context.AfterFunc(ctx, func() {
		c.mu.Lock()
		alone := len(cl.waiters) == 1
		c.mu.Unlock()
		if alone {
			cl.cancel()
		}
	})

	if s.fill, err = c.newFill(h, size); err == nil {
		if s.body, err = f(cl.ctx); err == nil && s.body == nil {
			err = fmt.Errorf("cache: fetch %s: fetcher returned no reader", d)
		} else if err != nil {
			err = fmt.Errorf("cache: fetch %s: %w", d, err)
		}
	}
	if err != nil {
		s.end(err)
		return nil, false, err
	}
	return s, false, nil
}

// Size returns the blob's size: from the cache, or the size Stream was
// given.
func (s *Stream) Size() int64 { return s.size }

// Read reads the blob; the Read that reaches the end of a download returns
// io.EOF only once the blob matched its digest and entered the cache.
func (s *Stream) Read(p []byte) (int, error) {
	if s.blob != nil {
		return s.blob.Read(p)
	}
	if s.done {
		if s.err != nil {
			return 0, s.err
		}
		return 0, io.EOF
	}
	if err := s.ctx.Err(); err != nil {
		return 0, fmt.Errorf("cache: fetch %s%s: %w", algPrefix, s.h, context.Cause(s.ctx))
	}
	return s.pump(p)
}

// pump reads the next bytes of the body into p and the file, and finishes
// the download at its end.
func (s *Stream) pump(p []byte) (int, error) {
	d := algPrefix + s.h
	n, rerr := s.body.Read(p)
	if n > 0 {
		if err := s.fill.add(p[:n]); err != nil {
			s.end(err)
			return 0, err
		}
		// Waiters hear of progress now and then, not at every Read.
		if s.fill.n-s.progress >= chunk || rerr != nil {
			s.progress = s.fill.n
			s.c.report(s.cl, s.fill.n)
		}
	}
	switch {
	case rerr == io.EOF:
		p, err := s.fill.finish()
		if err != nil {
			s.end(err)
			return 0, err
		}
		s.finish(p, nil)
		return n, io.EOF
	case rerr != nil:
		err := fmt.Errorf("cache: fetch %s: reading: %w", d, rerr)
		if s.cl.ctx.Err() != nil {
			err = fmt.Errorf("cache: fetch %s: %w", d, context.Cause(s.cl.ctx))
		}
		s.end(err)
		return 0, err
	}
	return n, nil
}

// end fails the download with err: nothing is kept and the waiters get err.
func (s *Stream) end(err error) {
	if s.fill != nil {
		s.fill.abort()
	}
	s.finish(nil, err)
}

// finish ends the download: p enters the cache, pinned for every waiter but
// the Stream itself, or the waiters get err.
func (s *Stream) finish(p *pending, err error) {
	s.done, s.err = true, err
	s.c.mu.Lock()
	delete(s.cl.waiters, s.leader)
	s.c.mu.Unlock()
	s.c.finish(s.cl, s.h, p, err)
	s.stop()
	s.cl.cancel()
	if s.body != nil {
		s.body.Close()
	}
}

// Finish reads what the reader left of a download to its end and returns
// its verdict: nil once the blob matched its digest and entered the cache,
// otherwise why not (an error wrapping ErrDigestMismatch, a read error, the
// context's). A reader that stopped early (its consumer failed) learns this
// way whether the bytes it got were the blob's. For a cached blob it returns
// nil.
func (s *Stream) Finish() error {
	if s.blob != nil {
		return nil
	}
	buf := make([]byte, chunk)
	for !s.done {
		if _, err := s.Read(buf); err != nil && err != io.EOF {
			return err
		}
	}
	return s.err
}

// Close ends the Stream. A download not read to its end goes on in the
// background if others wait for it, and is dropped otherwise.
func (s *Stream) Close() error {
	if s.blob != nil {
		return s.blob.Close()
	}
	if s.closed {
		return nil
	}
	s.closed = true
	if s.done {
		return nil
	}
	c, cl := s.c, s.cl
	c.mu.Lock()
	delete(cl.waiters, s.leader)
	alone := len(cl.waiters) == 0
	if alone && c.inflight[s.h] == cl {
		// Newcomers start afresh rather than join a dropped download.
		delete(c.inflight, s.h)
	}
	c.mu.Unlock()
	if alone {
		s.end(fmt.Errorf("cache: fetch %s%s: %w", algPrefix, s.h, errAbandoned))
		return nil
	}
	s.stop()
	go func() {
		buf := make([]byte, chunk)
		for !s.done {
			_, _ = s.pump(buf)
		}
	}()
	return nil
}
