package cache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// content returns n pseudo-random bytes determined by seed.
func content(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// fetcher serves b and counts calls.
type fetcher struct {
	b     []byte
	calls atomic.Int32
}

func (f *fetcher) fetch(ctx context.Context) (io.ReadCloser, error) {
	f.calls.Add(1)
	return io.NopCloser(bytes.NewReader(f.b)), nil
}

// clock advances one second per call, so that every use is ordered.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// testClock is shared by all caches of the tests, so that a reopened cache
// continues the time of the one before.
var testClock = &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}

func open(t testing.TB, dir string, max int64) *Cache {
	t.Helper()
	c, err := Open(dir, Options{MaxBytes: max, Now: testClock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fetch fetches b into c and closes the blob.
func fetch(t testing.TB, c *Cache, b []byte) {
	t.Helper()
	f := &fetcher{b: b}
	bl, _, err := c.Fetch(context.Background(), digestOf(b), int64(len(b)), f.fetch, nil)
	if err != nil {
		t.Fatal(err)
	}
	bl.Close()
}

func readAll(t testing.TB, b *Blob) []byte {
	t.Helper()
	got, err := io.ReadAll(b)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// checkClean checks that no download file is left and that the accounting
// matches the blobs on disk.
func checkClean(t *testing.T, c *Cache) {
	t.Helper()
	tmps, err := os.ReadDir(c.tmpDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(tmps) != 0 {
		t.Errorf("tmp holds %d files, want none", len(tmps))
	}
	des, err := os.ReadDir(c.blobDir)
	if err != nil {
		t.Fatal(err)
	}
	var disk int64
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			t.Fatal(err)
		}
		disk += fi.Size()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reserved != 0 {
		t.Errorf("reserved = %d, want 0", c.reserved)
	}
	if c.used != disk || len(des) != len(c.entries) {
		t.Errorf("index: %d blobs, %d bytes; disk: %d files, %d bytes", len(c.entries), c.used, len(des), disk)
	}
	for el := c.lru.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*entry); e.pins != 0 {
			t.Errorf("sha256:%s still has %d pins", e.hex, e.pins)
		}
	}
}

// waitClean waits until a cancelled download has cleaned up after itself.
func waitClean(t *testing.T, c *Cache) {
	t.Helper()
	for i := 0; ; i++ {
		c.mu.Lock()
		busy := len(c.inflight) > 0 || c.reserved > 0
		c.mu.Unlock()
		tmps, _ := os.ReadDir(c.tmpDir)
		if !busy && len(tmps) == 0 {
			break
		}
		if i > 500 {
			t.Fatal("download did not finish")
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkClean(t, c)
}

func digests(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Digest)
	}
	return out
}

func TestFetchMissThenHit(t *testing.T) {
	c := open(t, t.TempDir(), 0)
	b := content(100_000, 1)
	d := digestOf(b)
	f := &fetcher{b: b}
	var last int64
	bl, hit, err := c.Fetch(context.Background(), d, int64(len(b)), f.fetch, func(n int64) { last = n })
	if err != nil || hit {
		t.Fatalf("first Fetch: hit %v, err %v", hit, err)
	}
	if last != int64(len(b)) {
		t.Errorf("last progress %d, want %d", last, len(b))
	}
	if bl.Size() != int64(len(b)) || bl.Digest() != d {
		t.Errorf("Blob: size %d digest %s", bl.Size(), bl.Digest())
	}
	if got := readAll(t, bl); !bytes.Equal(got, b) {
		t.Error("content differs")
	}
	p := make([]byte, 10)
	if _, err := bl.ReadAt(p, 500); err != nil || !bytes.Equal(p, b[500:510]) {
		t.Errorf("ReadAt: %v", err)
	}
	if err := bl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bl.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}

	bl, hit, err = c.Fetch(context.Background(), d, -1, f.fetch, nil)
	if err != nil || !hit {
		t.Fatalf("second Fetch: hit %v, err %v", hit, err)
	}
	bl.Close()
	if n := f.calls.Load(); n != 1 {
		t.Errorf("fetcher called %d times, want 1", n)
	}
	if !c.Has(d) || c.Has(digestOf([]byte("other"))) {
		t.Error("Has wrong")
	}
	if used, max := c.Usage(); used != int64(len(b)) || max != DefaultMaxBytes {
		t.Errorf("Usage = %d, %d", used, max)
	}
	if l := c.List(); len(l) != 1 || l[0].Digest != d || l[0].Size != int64(len(b)) {
		t.Errorf("List = %+v", l)
	}
	if _, err := c.Open(digestOf([]byte("other"))); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open of missing blob: %v", err)
	}
	checkClean(t, c)
}

// gate is a reader that blocks until released or its context ends.
type gate struct {
	ctx     context.Context
	release chan struct{}
	r       io.Reader
}

func (g *gate) Read(p []byte) (int, error) {
	select {
	case <-g.release:
		return g.r.Read(p)
	case <-g.ctx.Done():
		return 0, g.ctx.Err()
	}
}

// gatedFetcher serves b once release is closed, counting calls and noting
// when a download's context ends.
type gatedFetcher struct {
	b         []byte
	release   chan struct{}
	calls     atomic.Int32
	cancelled chan struct{}
	once      sync.Once
}

func newGated(b []byte) *gatedFetcher {
	return &gatedFetcher{b: b, release: make(chan struct{}), cancelled: make(chan struct{})}
}

func (g *gatedFetcher) fetch(ctx context.Context) (io.ReadCloser, error) {
	g.calls.Add(1)
	context.AfterFunc(ctx, func() { g.once.Do(func() { close(g.cancelled) }) })
	return io.NopCloser(&gate{ctx: ctx, release: g.release, r: bytes.NewReader(g.b)}), nil
}

// waitWaiters waits until n Fetches wait for the download of d.
func waitWaiters(t *testing.T, c *Cache, d string, n int) {
	t.Helper()
	h, _ := parseDigest(d)
	for i := 0; ; i++ {
		c.mu.Lock()
		got := 0
		if cl := c.inflight[h]; cl != nil {
			got = len(cl.waiters)
		}
		c.mu.Unlock()
		if got == n {
			return
		}
		if i > 500 {
			t.Fatalf("%d waiters, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFetchConcurrentOnce(t *testing.T) {
	c := open(t, t.TempDir(), 0)
	b := content(3*chunk+17, 2)
	d := digestOf(b)
	g := newGated(b)
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	progress := make([]atomic.Int64, n)
	for i := range n {
		wg.Go(func() {
			bl, hit, err := c.Fetch(context.Background(), d, int64(len(b)), g.fetch, func(n int64) { progress[i].Store(n) })
			if err == nil && hit {
				err = errors.New("hit for a blob being downloaded")
			}
			if err == nil {
				got, rerr := io.ReadAll(bl)
				if rerr != nil || !bytes.Equal(got, b) {
					err = fmt.Errorf("content differs (%v)", rerr)
				}
				bl.Close()
			}
			errs[i] = err
		})
	}
	waitWaiters(t, c, d, n)
	close(g.release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Fetch %d: %v", i, err)
		}
		if p := progress[i].Load(); p != int64(len(b)) {
			t.Errorf("Fetch %d: last progress %d", i, p)
		}
	}
	if calls := g.calls.Load(); calls != 1 {
		t.Errorf("fetcher called %d times, want 1", calls)
	}
	checkClean(t, c)
}

func TestVerification(t *testing.T) {
	b := content(2*chunk+5, 3)
	for _, tc := range []struct {
		name  string
		serve []byte
		size  int64
	}{
		{"wrong content", content(len(b), 4), int64(len(b))},
		{"wrong content unknown size", content(len(b), 4), -1},
		{"short read", b[:len(b)-1], int64(len(b))},
		{"short read unknown size", b[:len(b)-1], -1},
		{"long read", append(slices.Clone(b), 0), int64(len(b))},
		{"long read unknown size", append(slices.Clone(b), 0), -1},
		{"size too small", b, int64(len(b)) - 1},
		{"size too large", b, int64(len(b)) + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := open(t, t.TempDir(), 0)
			f := &fetcher{b: tc.serve}
			_, _, err := c.Fetch(context.Background(), digestOf(b), tc.size, f.fetch, nil)
			if !errors.Is(err, ErrDigestMismatch) {
				t.Fatalf("Fetch: %v, want ErrDigestMismatch", err)
			}
			if c.Has(digestOf(b)) {
				t.Error("mismatching blob cached")
			}
			if used, _ := c.Usage(); used != 0 {
				t.Errorf("used %d", used)
			}
			checkClean(t, c)
		})
	}
}

// failingReader returns its bytes, then err.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func TestFetcherErrorThenRetry(t *testing.T) {
	c := open(t, t.TempDir(), 0)
	b := content(3*chunk, 5)
	d := digestOf(b)
	errReset := errors.New("connection reset")

	midStream := func(ctx context.Context) (io.ReadCloser, error) {
		return io.NopCloser(&failingReader{r: bytes.NewReader(b[:chunk+100]), err: errReset}), nil
	}
	if _, _, err := c.Fetch(context.Background(), d, int64(len(b)), midStream, nil); !errors.Is(err, errReset) {
		t.Fatalf("mid-stream failure: %v", err)
	}
	checkClean(t, c)

	atOnce := func(ctx context.Context) (io.ReadCloser, error) { return nil, errReset }
	if _, _, err := c.Fetch(context.Background(), d, -1, atOnce, nil); !errors.Is(err, errReset) {
		t.Fatalf("failure to open: %v", err)
	}
	checkClean(t, c)

	fetch(t, c, b)
	if !c.Has(d) {
		t.Error("retry did not cache the blob")
	}
	checkClean(t, c)
}

func TestLRUEviction(t *testing.T) {
	dir := t.TempDir()
	c := open(t, dir, 3000)
	blobs := make([][]byte, 6)
	for i := range blobs {
		blobs[i] = content(1000, uint64(10+i))
	}
	a, b, cc, d, e, f := blobs[0], blobs[1], blobs[2], blobs[3], blobs[4], blobs[5]
	fetch(t, c, a)
	fetch(t, c, b)
	fetch(t, c, cc)
	bl, err := c.Open(digestOf(a)) // a is now the most recent
	if err != nil {
		t.Fatal(err)
	}
	bl.Close()
	fetch(t, c, d) // evicts b
	want := []string{digestOf(d), digestOf(a), digestOf(cc)}
	if got := digests(c.List()); !slices.Equal(got, want) {
		t.Fatalf("after evicting: %v, want %v", got, want)
	}
	if c.Has(digestOf(b)) {
		t.Error("b not evicted")
	}
	checkClean(t, c)

	// The order survives a restart.
	c = open(t, dir, 3000)
	if got := digests(c.List()); !slices.Equal(got, want) {
		t.Fatalf("after reopen: %v, want %v", got, want)
	}
	fetch(t, c, e) // evicts cc
	want = []string{digestOf(e), digestOf(d), digestOf(a)}
	if got := digests(c.List()); !slices.Equal(got, want) {
		t.Fatalf("after reopen and evicting: %v, want %v", got, want)
	}

	// Unknown sizes evict as bytes arrive: two blobs must go for f of 1500.
	f = content(1500, 20)
	bl, _, err = c.Fetch(context.Background(), digestOf(f), -1, (&fetcher{b: f}).fetch, nil)
	if err != nil {
		t.Fatal(err)
	}
	bl.Close()
	want = []string{digestOf(f), digestOf(e)}
	if got := digests(c.List()); !slices.Equal(got, want) {
		t.Fatalf("after unknown size: %v, want %v", got, want)
	}
	checkClean(t, c)

	// A smaller limit at Open evicts down to it.
	c = open(t, dir, 1600)
	if got := digests(c.List()); !slices.Equal(got, want[:1]) {
		t.Fatalf("after reopen with smaller limit: %v", got)
	}
	checkClean(t, c)
}

func TestPinnedAndFull(t *testing.T) {
	c := open(t, t.TempDir(), 2000)
	a, b, x := content(1000, 30), content(1000, 31), content(1000, 32)
	fetch(t, c, a)
	fetch(t, c, b)
	ba, err := c.Open(digestOf(a))
	if err != nil {
		t.Fatal(err)
	}
	bb, err := c.Open(digestOf(b))
	if err != nil {
		t.Fatal(err)
	}
	fx := &fetcher{b: x}
	for _, size := range []int64{int64(len(x)), -1} {
		_, _, err = c.Fetch(context.Background(), digestOf(x), size, fx.fetch, nil)
		if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), digestOf(x)) {
			t.Fatalf("Fetch (size %d) with all pinned: %v, want ErrFull naming the digest", size, err)
		}
		if testing.Verbose() {
			t.Log(err)
		}
	}
	if fx.calls.Load() != 1 {
		t.Errorf("fetcher called %d times; a known size that cannot fit must not fetch", fx.calls.Load())
	}
	if !c.Has(digestOf(a)) || !c.Has(digestOf(b)) {
		t.Error("pinned blob evicted")
	}
	if err := c.Remove(digestOf(a)); !errors.Is(err, ErrInUse) {
		t.Errorf("Remove of pinned blob: %v", err)
	}
	ba.Close()
	fetch(t, c, x) // evicts a, now unpinned
	if c.Has(digestOf(a)) || !c.Has(digestOf(b)) || !c.Has(digestOf(x)) {
		t.Errorf("after unpinning: %v", digests(c.List()))
	}
	// Reading a pinned blob still works.
	if got := readAll(t, bb); !bytes.Equal(got, b) {
		t.Error("pinned blob content differs")
	}
	bb.Close()

	// Larger than the limit: ErrFull, and nothing is evicted for it.
	big := content(2001, 33)
	fb := &fetcher{b: big}
	for _, size := range []int64{int64(len(big)), -1} {
		_, _, err = c.Fetch(context.Background(), digestOf(big), size, fb.fetch, nil)
		if !errors.Is(err, ErrFull) {
			t.Fatalf("too big (size %d): %v", size, err)
		}
	}
	if err := c.Put(context.Background(), digestOf(big), bytes.NewReader(big)); !errors.Is(err, ErrFull) {
		t.Fatalf("Put too big: %v", err)
	}
	checkClean(t, c)
}

func TestCancel(t *testing.T) {
	c := open(t, t.TempDir(), 0)
	b := content(2*chunk, 40)
	d := digestOf(b)

	// One of two waiters leaves; the download goes on for the other.
	g := newGated(b)
	ctx1, cancel1 := context.WithCancel(context.Background())
	errc := make(chan error, 2)
	go func() {
		_, _, err := c.Fetch(ctx1, d, int64(len(b)), g.fetch, func(int64) {})
		errc <- err
	}()
	waitWaiters(t, c, d, 1)
	var second *Blob
	go func() {
		var err error
		second, _, err = c.Fetch(context.Background(), d, int64(len(b)), g.fetch, nil)
		errc <- err
	}()
	waitWaiters(t, c, d, 2)
	cancel1()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Fetch: %v", err)
	}
	select {
	case <-g.cancelled:
		t.Fatal("download cancelled while a waiter is left")
	default:
	}
	close(g.release)
	if err := <-errc; err != nil {
		t.Fatalf("remaining Fetch: %v", err)
	}
	if got := readAll(t, second); !bytes.Equal(got, b) {
		t.Error("content differs")
	}
	second.Close()
	checkClean(t, c)
	if err := c.Remove(d); err != nil {
		t.Fatal(err)
	}

	// The only waiter leaves: the download is cancelled and leaves nothing.
	g = newGated(b)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _, err := c.Fetch(ctx, d, -1, g.fetch, nil)
		errc <- err
	}()
	waitWaiters(t, c, d, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Fetch: %v", err)
	}
	<-g.cancelled
	waitClean(t, c)
	if c.Has(d) {
		t.Error("cancelled download cached")
	}

	// Already cancelled: no download at all.
	g = newGated(b)
	if _, _, err := c.Fetch(ctx, d, -1, g.fetch, nil); !errors.Is(err, context.Canceled) || g.calls.Load() != 0 {
		t.Errorf("Fetch with ended ctx: %v, %d calls", err, g.calls.Load())
	}
	if err := c.Put(ctx, d, bytes.NewReader(b)); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with ended ctx: %v", err)
	}

	// And a new Fetch works.
	fetch(t, c, b)
	checkClean(t, c)
}

func TestOpenCleansUp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache") // created by Open
	c := open(t, dir, 0)
	b := content(1234, 50)
	fetch(t, c, b)

	// A crashed download, a stray file, a blob of another name form.
	for _, p := range []string{
		filepath.Join(dir, "tmp", "0123-456"),
		filepath.Join(dir, "blobs", "sha256", "not-a-digest"),
		filepath.Join(dir, "blobs", "sha256", strings.ToUpper(digestOf(b)[7:])),
	} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp", "sub", "dir"), 0o700); err != nil {
		t.Fatal(err)
	}

	c = open(t, dir, 0)
	if got := digests(c.List()); !slices.Equal(got, []string{digestOf(b)}) {
		t.Errorf("List = %v", got)
	}
	checkClean(t, c)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode: %v %v", fi.Mode(), err)
	}
}

func TestInvalidDigest(t *testing.T) {
	c := open(t, t.TempDir(), 0)
	good := digestOf(nil)
	h := good[7:]
	for _, d := range []string{
		"",
		"sha256:",
		h,
		"sha512:" + h,
		"SHA256:" + h,
		"sha256:" + strings.ToUpper(h),
		"sha256:" + h[:63],
		"sha256:" + h + "0",
		"sha256:" + h[:62] + "/.",
		"sha256:../../../../../../etc/passwd",
		"sha256:" + h[:63] + "\x00",
		"sha256:" + h[:63] + "g",
		" sha256:" + h,
		good + "\n",
	} {
		f := &fetcher{b: nil}
		if _, _, err := c.Fetch(context.Background(), d, 0, f.fetch, nil); !errors.Is(err, ErrInvalidDigest) {
			t.Errorf("Fetch(%q): %v", d, err)
		}
		if _, err := c.Open(d); !errors.Is(err, ErrInvalidDigest) {
			t.Errorf("Open(%q): %v", d, err)
		}
		if err := c.Put(context.Background(), d, bytes.NewReader(nil)); !errors.Is(err, ErrInvalidDigest) {
			t.Errorf("Put(%q): %v", d, err)
		}
		if err := c.Remove(d); !errors.Is(err, ErrInvalidDigest) {
			t.Errorf("Remove(%q): %v", d, err)
		}
		if c.Has(d) {
			t.Errorf("Has(%q)", d)
		}
		if f.calls.Load() != 0 {
			t.Errorf("fetcher called for %q", d)
		}
	}
	// The empty blob is a valid blob.
	fetch(t, c, nil)
	checkClean(t, c)
}

// fullFile fails with ENOSPC: on Write once more than room bytes were
// written, or on Sync.
type fullFile struct {
	*os.File
	room     int
	syncFail bool
}

func (f *fullFile) Write(p []byte) (int, error) {
	if len(p) > f.room {
		n, _ := f.File.Write(p[:f.room])
		f.room = 0
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	f.room -= len(p)
	return f.File.Write(p)
}

func (f *fullFile) Sync() error {
	if f.syncFail {
		return &os.PathError{Op: "sync", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.Sync()
}

func TestDiskFull(t *testing.T) {
	c := open(t, t.TempDir(), 0)
	keep := content(500, 60)
	fetch(t, c, keep)
	b := content(2*chunk, 61)
	for _, tc := range []struct {
		name string
		file func(*os.File) tempFile
		fail func(dir, pattern string) (tempFile, error)
	}{
		{name: "write", file: func(f *os.File) tempFile { return &fullFile{File: f, room: chunk + 10} }},
		{name: "sync", file: func(f *os.File) tempFile { return &fullFile{File: f, room: 1 << 30, syncFail: true} }},
		{name: "create", fail: func(dir, pattern string) (tempFile, error) {
			return nil, &os.PathError{Op: "open", Path: dir, Err: syscall.ENOSPC}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.createTemp = tc.fail
			if tc.fail == nil {
				c.createTemp = func(dir, pattern string) (tempFile, error) {
					f, err := os.CreateTemp(dir, pattern)
					if err != nil {
						return nil, err
					}
					return tc.file(f), nil
				}
			}
			_, _, err := c.Fetch(context.Background(), digestOf(b), -1, (&fetcher{b: b}).fetch, nil)
			if !errors.Is(err, ErrFull) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Fetch: %v, want ErrFull and ENOSPC", err)
			}
			if got := digests(c.List()); !slices.Equal(got, []string{digestOf(keep)}) {
				t.Errorf("List = %v", got)
			}
			checkClean(t, c)
		})
	}
	c.createTemp = func(dir, pattern string) (tempFile, error) { return os.CreateTemp(dir, pattern) }
	fetch(t, c, b)
	checkClean(t, c)
}

func TestPutAndRemove(t *testing.T) {
	c := open(t, t.TempDir(), 0)
	m := []byte(`{"schemaVersion":2}`)
	d := digestOf(m)
	if err := c.Put(context.Background(), d, bytes.NewReader(m)); err != nil {
		t.Fatal(err)
	}
	// Again: a no-op that does not read.
	if err := c.Put(context.Background(), d, &failingReader{r: strings.NewReader(""), err: errors.New("read")}); err != nil {
		t.Fatal(err)
	}
	bl, err := c.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, bl); !bytes.Equal(got, m) {
		t.Errorf("content %q", got)
	}
	bl.Close()
	other := digestOf([]byte("x"))
	if err := c.Put(context.Background(), other, bytes.NewReader(m)); !errors.Is(err, ErrDigestMismatch) {
		t.Errorf("Put with wrong content: %v", err)
	}
	if err := c.Remove(d); err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(d); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Remove: %v", err)
	}
	if _, err := c.Open(d); !errors.Is(err, ErrNotFound) {
		t.Errorf("Open after Remove: %v", err)
	}
	checkClean(t, c)
}

// A blob deleted behind the cache's back is forgotten, and fetched again.
func TestExternalDelete(t *testing.T) {
	c := open(t, t.TempDir(), 0)
	b := content(100, 70)
	fetch(t, c, b)
	if err := os.Remove(c.path(digestOf(b)[7:])); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Open(digestOf(b)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open: %v", err)
	}
	fetch(t, c, b)
	checkClean(t, c)
}

func TestOpenOptions(t *testing.T) {
	if _, err := Open(t.TempDir(), Options{MaxBytes: -1}); err == nil {
		t.Error("negative MaxBytes accepted")
	}
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(f, Options{}); err == nil {
		t.Error("Open of a file succeeded")
	}
}

func FuzzDigest(f *testing.F) {
	h := digestOf(nil)[7:]
	for _, s := range []string{"", "sha256:", "sha256:" + h, "sha256:" + strings.ToUpper(h), "sha512:" + h,
		"sha256:../" + h[3:], "sha256:" + h[:63] + "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, d string) {
		h, err := parseDigest(d)
		if err != nil {
			if !errors.Is(err, ErrInvalidDigest) {
				t.Fatalf("error %v does not wrap ErrInvalidDigest", err)
			}
			return
		}
		if "sha256:"+h != d || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" || filepath.Base(h) != h {
			t.Fatalf("accepted %q", d)
		}
	})
}

func BenchmarkFetch(b *testing.B) {
	c := open(b, b.TempDir(), 0)
	blob := content(38<<20, 80)
	d := digestOf(blob)
	f := &fetcher{b: blob}
	b.SetBytes(int64(len(blob)))
	for b.Loop() {
		bl, _, err := c.Fetch(context.Background(), d, int64(len(blob)), f.fetch, nil)
		if err != nil {
			b.Fatal(err)
		}
		bl.Close()
		b.StopTimer()
		if err := c.Remove(d); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkOpenHit(b *testing.B) {
	c := open(b, b.TempDir(), 0)
	blob := content(1<<20, 81)
	fetch(b, c, blob)
	d := digestOf(blob)
	for b.Loop() {
		bl, err := c.Open(d)
		if err != nil {
			b.Fatal(err)
		}
		bl.Close()
	}
}

// Many goroutines fetch, open, put and remove overlapping blobs under a limit
// that forces eviction, some giving up early; the index must match the disk
// afterwards and every blob read must be intact.
func TestStress(t *testing.T) {
	c := open(t, t.TempDir(), 8*chunk)
	blobs := make([][]byte, 12)
	for i := range blobs {
		blobs[i] = content((i%4+1)*chunk/2+i, uint64(100+i))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for range 60 {
				b := blobs[r.IntN(len(blobs))]
				d := digestOf(b)
				switch r.IntN(4) {
				case 0, 1:
					ctx, cancel := context.WithCancel(context.Background())
					if r.IntN(4) == 0 {
						time.AfterFunc(time.Duration(r.IntN(500))*time.Microsecond, cancel)
					}
					size := int64(len(b))
					if r.IntN(2) == 0 {
						size = -1
					}
					bl, _, err := c.Fetch(ctx, d, size, (&fetcher{b: b}).fetch, nil)
					cancel()
					if err != nil {
						if !errors.Is(err, context.Canceled) && !errors.Is(err, ErrFull) {
							t.Errorf("Fetch: %v", err)
						}
						continue
					}
					got, err := io.ReadAll(bl)
					if err != nil || !bytes.Equal(got, b) {
						t.Errorf("content of %s differs (%v)", d, err)
					}
					bl.Close()
				case 2:
					if err := c.Put(context.Background(), d, bytes.NewReader(b)); err != nil && !errors.Is(err, ErrFull) {
						t.Errorf("Put: %v", err)
					}
				case 3:
					if err := c.Remove(d); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInUse) {
						t.Errorf("Remove: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	waitClean(t, c)
	if used, max := c.Usage(); used > max {
		t.Errorf("used %d > max %d", used, max)
	}
}

func TestUsers(t *testing.T) {
	c := open(t, t.TempDir(), 0)
	ctx := context.Background()
	m := []byte(`{"schemaVersion":2}`)
	d := digestOf(m)
	if err := c.AddUser(d, "alice"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("AddUser of a blob not cached: %v", err)
	}
	if err := c.AddUser("sha256:nope", "alice"); !errors.Is(err, ErrInvalidDigest) {
		t.Fatalf("AddUser of a bad digest: %v", err)
	}
	if err := c.Put(ctx, d, bytes.NewReader(m)); err != nil {
		t.Fatal(err)
	}
	users := func() []string {
		l := c.List()
		if len(l) != 1 {
			t.Fatalf("List: %+v", l)
		}
		return l[0].Users
	}
	if u := users(); len(u) != 0 {
		t.Fatalf("users before AddUser: %v", u)
	}
	for _, u := range []string{"bob", "alice", "bob"} {
		if err := c.AddUser(d, u); err != nil {
			t.Fatal(err)
		}
	}
	if u := users(); !slices.Equal(u, []string{"alice", "bob"}) {
		t.Fatalf("users: %v, want [alice bob]", u)
	}
	// Gone with the blob: fetched again, it starts without users.
	if err := c.Remove(d); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, d, bytes.NewReader(m)); err != nil {
		t.Fatal(err)
	}
	if u := users(); len(u) != 0 {
		t.Fatalf("users after Remove and Put: %v", u)
	}
}
