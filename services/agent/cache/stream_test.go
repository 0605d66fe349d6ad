package cache

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
)

// TestStreamMissThenHit streams a blob into the cache: the reader gets its
// bytes, the blob enters the cache once read to its end, and the next
// Stream is a hit read from the cache.
func TestStreamMissThenHit(t *testing.T) {
	c := open(t, t.TempDir(), 1<<20)
	b := content(300<<10, 1)
	f := &fetcher{b: b}
	s, hit, err := c.Stream(context.Background(), digestOf(b), int64(len(b)), f.fetch)
	if err != nil || hit {
		t.Fatalf("Stream: hit %v, %v", hit, err)
	}
	if c.Has(digestOf(b)) {
		t.Fatal("the blob is cached before it was read")
	}
	got, err := io.ReadAll(s)
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
	if err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !c.Has(digestOf(b)) {
		t.Fatal("the blob is not cached after it was read")
	}
	s, hit, err = c.Stream(context.Background(), digestOf(b), int64(len(b)), f.fetch)
	if err != nil || !hit {
		t.Fatalf("second Stream: hit %v, %v", hit, err)
	}
	if got, err := io.ReadAll(s); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("hit: read %d bytes, %v", len(got), err)
	}
	s.Close()
	if n := f.calls.Load(); n != 1 {
		t.Errorf("%d downloads, want 1", n)
	}
	checkClean(t, c)
}

// TestStreamMismatch: altered or truncated bytes reach the reader, but the
// Read at the end fails with ErrDigestMismatch, Finish says so, and nothing
// is cached; a Fetch waiting for the download gets the error too.
func TestStreamMismatch(t *testing.T) {
	b := content(300<<10, 2)
	altered := bytes.Clone(b)
	altered[len(b)/2] ^= 1
	for name, body := range map[string][]byte{"altered": altered, "truncated": b[:len(b)-1], "longer": append(bytes.Clone(b), 0)} {
		t.Run(name, func(t *testing.T) {
			c := open(t, t.TempDir(), 1<<20)
			s, _, err := c.Stream(context.Background(), digestOf(b), int64(len(b)), (&fetcher{b: body}).fetch)
			if err != nil {
				t.Fatal(err)
			}
			waiter := make(chan error, 1)
			go func() {
				bl, _, err := c.Fetch(context.Background(), digestOf(b), int64(len(b)), (&fetcher{b: body}).fetch, nil)
				if err == nil {
					bl.Close()
				}
				waiter <- err
			}()
			waitWaiters(t, c, digestOf(b), 2)
			buf := make([]byte, 64<<10)
			if _, err := s.Read(buf); err != nil {
				t.Fatal(err)
			}
			if err := s.Finish(); !errors.Is(err, ErrDigestMismatch) {
				t.Errorf("Finish: %v, want ErrDigestMismatch", err)
			}
			s.Close()
			if c.Has(digestOf(b)) {
				t.Error("the mismatching blob was cached")
			}
			if err := <-waiter; !errors.Is(err, ErrDigestMismatch) {
				t.Errorf("waiting Fetch: %v", err)
			}
			checkClean(t, c)
		})
	}
}

// TestStreamClosedEarly: a Stream closed before its end is dropped when
// nobody else waits for it, and completed for a waiting Fetch otherwise.
func TestStreamClosedEarly(t *testing.T) {
	b := content(600<<10, 3)
	c := open(t, t.TempDir(), 4<<20)
	s, _, err := c.Stream(context.Background(), digestOf(b), int64(len(b)), (&fetcher{b: b}).fetch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if c.Has(digestOf(b)) {
		t.Fatal("a dropped download was cached")
	}
	checkClean(t, c)

	s, _, err = c.Stream(context.Background(), digestOf(b), int64(len(b)), (&fetcher{b: b}).fetch)
	if err != nil {
		t.Fatal(err)
	}
	fetched := make(chan error, 1)
	go func() {
		bl, _, err := c.Fetch(context.Background(), digestOf(b), int64(len(b)), (&fetcher{b: b}).fetch, nil)
		if err == nil {
			if got := readAll(t, bl); !bytes.Equal(got, b) {
				err = errors.New("the Fetch read other bytes")
			}
			bl.Close()
		}
		fetched <- err
	}()
	waitWaiters(t, c, digestOf(b), 2) // Close only once the Fetch waits for this download
	s.Close()
	if err := <-fetched; err != nil {
		t.Fatal(err)
	}
	checkClean(t, c)
}
