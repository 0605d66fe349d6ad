package blobtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/fpga-faas/faas/services/registry/blob"
)

// Backend creates fresh, empty storage for one test and returns a function
// opening a Store over it. Each call of open must return a new, independent
// Store instance over the same storage, as a restarted process would get.
type Backend func(t *testing.T) (open func() blob.Store)

// Run runs the conformance suite, each test on fresh storage from newBackend
// and once for every supported digest algorithm.
func Run(t *testing.T, newBackend Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open func() blob.Store, alg blob.Algorithm)
	}{
		{"PutStatOpenDelete", testPutStatOpenDelete},
		{"Ranges", testRanges},
		{"WriteTo", testWriteTo},
		{"NotFound", testNotFound},
		{"InvalidDigest", testInvalidDigest},
		{"DigestMismatch", testDigestMismatch},
		{"Empty", testEmpty},
		{"ResumeAfterRestart", testResumeAfterRestart},
		{"FailedWrite", testFailedWrite},
		{"ConcurrentSameDigest", testConcurrentSameDigest},
		{"List", testList},
		{"Cancel", testCancel},
		{"RecommitRefreshes", testRecommitRefreshes},
		{"Collect", testCollect},
	}
	for _, alg := range blob.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					tc.fn(t, newBackend(t), alg)
				})
			}
		})
	}
	t.Run("MixedAlgorithms", func(t *testing.T) { testMixedAlgorithms(t, newBackend(t)) })
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func random(t *testing.T, n int) []byte {
	p := make([]byte, n)
	rand.Read(p)
	return p
}

// put stores p through one upload written in chunks of the given sizes (the rest last).
func put(t *testing.T, s blob.Store, alg blob.Algorithm, p []byte, chunks ...int) blob.Info {
	t.Helper()
	c := ctx(t)
	u, err := s.Begin(c)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	rest := p
	for _, n := range append(chunks, len(p)) {
		n = min(n, len(rest))
		if _, err := u.Write(c, bytes.NewReader(rest[:n])); err != nil {
			t.Fatalf("Write: %v", err)
		}
		rest = rest[n:]
	}
	if u.Offset() != int64(len(p)) {
		t.Fatalf("Offset = %d, want %d", u.Offset(), len(p))
	}
	info, err := u.Commit(c, alg.FromBytes(p))
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if info.Digest != alg.FromBytes(p) || info.Size != int64(len(p)) {
		t.Fatalf("Commit = %+v, want digest %s size %d", info, alg.FromBytes(p), len(p))
	}
	return info
}

func read(t *testing.T, s blob.Store, d blob.Digest, off, n int64) ([]byte, error) {
	t.Helper()
	r, err := s.Open(ctx(t), d, off, n)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func mustRead(t *testing.T, s blob.Store, d blob.Digest, off, n int64, want []byte) {
	t.Helper()
	got, err := read(t, s, d, off, n)
	if err != nil {
		t.Fatalf("Open(%s, %d, %d): %v", d, off, n, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Open(%s, %d, %d) read %d bytes, want %d (content differs: %v)", d, off, n, len(got), len(want), len(got) == len(want))
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

func testPutStatOpenDelete(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	s := open()
	c := ctx(t)
	p := random(t, 100_000)
	before := time.Now().Add(-time.Minute)
	info := put(t, s, alg, p)
	st, err := s.Stat(c, info.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if st.Digest != info.Digest || st.Size != int64(len(p)) || st.Modified.Before(before) {
		t.Fatalf("Stat = %+v", st)
	}
	mustRead(t, s, info.Digest, 0, -1, p)
	mustRead(t, s, info.Digest, 0, int64(len(p)), p)
	if err := s.Delete(c, info.Digest); err != nil {
		t.Fatal(err)
	}
	_, err = s.Stat(c, info.Digest)
	wantErr(t, "Stat after Delete", err, blob.ErrNotFound)
	_, err = read(t, s, info.Digest, 0, -1)
	wantErr(t, "Open after Delete", err, blob.ErrNotFound)
	wantErr(t, "Delete twice", s.Delete(c, info.Digest), blob.ErrNotFound)
}

func testRanges(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	s := open()
	p := random(t, 4096)
	d := put(t, s, alg, p).Digest
	n := int64(len(p))
	for _, r := range []struct{ off, len int64 }{{0, 1}, {1, 10}, {100, -1}, {n - 1, 1}, {n - 1, -1}, {n, -1}, {n, 0}, {0, 0}, {17, n - 17}} {
		end := n
		if r.len >= 0 {
			end = r.off + r.len
		}
		mustRead(t, s, d, r.off, r.len, p[r.off:end])
	}
	for _, r := range []struct{ off, len int64 }{{-1, 1}, {n + 1, -1}, {n + 1, 0}, {0, n + 1}, {n - 1, 2}, {n, 1}} {
		_, err := read(t, s, d, r.off, r.len)
		wantErr(t, "invalid range", err, blob.ErrInvalidRange)
	}
}

func testNotFound(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	s := open()
	c := ctx(t)
	d := alg.FromBytes([]byte("never stored"))
	_, err := s.Stat(c, d)
	wantErr(t, "Stat", err, blob.ErrNotFound)
	_, err = s.Open(c, d, 0, -1)
	wantErr(t, "Open", err, blob.ErrNotFound)
	_, err = s.Open(c, d, 1, 2)
	wantErr(t, "Open range", err, blob.ErrNotFound)
	wantErr(t, "Delete", s.Delete(c, d), blob.ErrNotFound)
	for _, id := range []string{"0123456789abcdef0123456789abcdef", "", "../../etc", "x/y"} {
		_, err = s.Resume(c, id)
		wantErr(t, "Resume "+id, err, blob.ErrNotFound)
		wantErr(t, "Abort "+id, s.Abort(c, id), blob.ErrNotFound)
	}
}

func testInvalidDigest(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	s := open()
	c := ctx(t)
	hex := alg.FromBytes(nil).Hex()
	invalid := []blob.Digest{"", blob.Digest(alg) + ":abc", blob.Digest(alg) + ":" + blob.Digest(strings.ToUpper(hex)),
		blob.Digest(alg) + ":../../../../etc/passwd" + blob.Digest(hex[22:])}
	// Well-formed, but of algorithms the store does not support.
	unsupported := []blob.Digest{"md5:d41d8cd98f00b204e9800998ecf8427e", "sha384:" + blob.Digest(hex), "foo:" + blob.Digest(hex)}
	for _, d := range append(invalid, unsupported...) {
		_, err := s.Stat(c, d)
		wantErr(t, "Stat "+string(d), err, blob.ErrInvalidDigest)
		_, err = s.Open(c, d, 0, -1)
		wantErr(t, "Open "+string(d), err, blob.ErrInvalidDigest)
		wantErr(t, "Delete "+string(d), s.Delete(c, d), blob.ErrInvalidDigest)
	}
	u, err := s.Begin(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(c, bytes.NewReader([]byte("content"))); err != nil {
		t.Fatal(err)
	}
	for _, d := range append(invalid, unsupported...) {
		_, err = u.Commit(c, d)
		wantErr(t, "Commit "+string(d), err, blob.ErrInvalidDigest)
	}
	_, err = u.Commit(c, unsupported[0])
	wantErr(t, "Commit "+string(unsupported[0]), err, blob.ErrUnsupportedDigest)
	// The upload is intact: it commits under a valid digest.
	if _, err := u.Commit(c, alg.FromBytes([]byte("content"))); err != nil {
		t.Fatal(err)
	}
}

func testDigestMismatch(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	s := open()
	c := ctx(t)
	for _, chunks := range [][]int{nil, {10, 20}} {
		p := random(t, 1000)
		claimed := alg.FromBytes(append([]byte("x"), p...))
		u, err := s.Begin(c)
		if err != nil {
			t.Fatal(err)
		}
		rest := p
		for _, n := range append(chunks, len(p)) {
			n = min(n, len(rest))
			if _, err := u.Write(c, bytes.NewReader(rest[:n])); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		_, err = u.Commit(c, claimed)
		wantErr(t, "Commit with wrong digest", err, blob.ErrDigestMismatch)
		for _, d := range []blob.Digest{claimed, alg.FromBytes(p)} {
			_, err = s.Stat(c, d)
			wantErr(t, "Stat after mismatch", err, blob.ErrNotFound)
		}
		if err := s.List(c, func(i blob.Info) error { t.Errorf("List after mismatch: %+v", i); return nil }); err != nil {
			t.Fatal(err)
		}
		// The upload is left as it was and can still be committed correctly.
		u2, err := s.Resume(c, u.ID())
		if err != nil {
			t.Fatalf("Resume after mismatch: %v", err)
		}
		if u2.Offset() != int64(len(p)) {
			t.Fatalf("Offset after mismatch = %d, want %d", u2.Offset(), len(p))
		}
		if _, err := u2.Commit(c, alg.FromBytes(p)); err != nil {
			t.Fatal(err)
		}
		mustRead(t, s, alg.FromBytes(p), 0, -1, p)
		if err := s.Delete(c, alg.FromBytes(p)); err != nil {
			t.Fatal(err)
		}
	}
}

func testEmpty(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	s := open()
	c := ctx(t)
	info := put(t, s, alg, nil)
	if info.Size != 0 {
		t.Fatalf("size %d", info.Size)
	}
	mustRead(t, s, info.Digest, 0, -1, nil)
	mustRead(t, s, info.Digest, 0, 0, nil)
	_, err := read(t, s, info.Digest, 0, 1)
	wantErr(t, "Open past empty", err, blob.ErrInvalidRange)
	// Empty writes stage nothing.
	u, err := s.Begin(c)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := u.Write(c, bytes.NewReader(nil)); n != 0 || err != nil {
		t.Fatalf("empty Write = %d, %v", n, err)
	}
	if _, err := u.Write(c, bytes.NewReader([]byte("ab"))); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(c, bytes.NewReader(nil)); err != nil {
		t.Fatal(err)
	}
	if u.Offset() != 2 {
		t.Fatalf("Offset = %d", u.Offset())
	}
	if err := u.Cancel(c); err != nil {
		t.Fatal(err)
	}
}

func testResumeAfterRestart(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	c := ctx(t)
	p := random(t, 300_000)
	parts := [][]byte{p[:1], p[1:70_000], p[70_000:70_001], p[70_001:]}

	s1 := open()
	u, err := s1.Begin(c)
	if err != nil {
		t.Fatal(err)
	}
	id := u.ID()
	if _, err := u.Write(c, bytes.NewReader(parts[0])); err != nil {
		t.Fatal(err)
	}
	var off int64 = int64(len(parts[0]))
	for _, part := range parts[1:] {
		// Every chunk through a new Store instance, as after a restart.
		s := open()
		u, err := s.Resume(c, id)
		if err != nil {
			t.Fatalf("Resume: %v", err)
		}
		if u.ID() != id || u.Offset() != off {
			t.Fatalf("Resume: id %s offset %d, want %s %d", u.ID(), u.Offset(), id, off)
		}
		n, err := u.Write(c, bytes.NewReader(part))
		if err != nil || n != int64(len(part)) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		off += n
		_, err = s.Stat(c, alg.FromBytes(p))
		wantErr(t, "Stat before Commit", err, blob.ErrNotFound)
	}
	s := open()
	u, err = s.Resume(c, id)
	if err != nil {
		t.Fatal(err)
	}
	if u.Offset() != int64(len(p)) {
		t.Fatalf("Offset %d want %d", u.Offset(), len(p))
	}
	if _, err := u.Commit(c, alg.FromBytes(p)); err != nil {
		t.Fatal(err)
	}
	mustRead(t, open(), alg.FromBytes(p), 0, -1, p)
	_, err = open().Resume(c, id)
	wantErr(t, "Resume after Commit", err, blob.ErrNotFound)
	if err := open().Uploads(c, func(u blob.UploadInfo) error { t.Errorf("upload left after Commit: %+v", u); return nil }); err != nil {
		t.Fatal(err)
	}
}

func testFailedWrite(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	s := open()
	c := ctx(t)
	p := random(t, 50_000)
	u, err := s.Begin(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(c, bytes.NewReader(p[:1000])); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("client went away")
	_, err = u.Write(c, io.MultiReader(bytes.NewReader(p[1000:20_000]), iotest.ErrReader(boom)))
	if err == nil {
		t.Fatal("Write of a failing reader succeeded")
	}
	// Whatever was staged, the offset says so, and resuming from it works.
	u2, err := open().Resume(c, u.ID())
	if err != nil {
		t.Fatal(err)
	}
	off := u2.Offset()
	if off != u.Offset() || off < 1000 || off > 20_000 {
		t.Fatalf("offset after failed write: resumed %d, writer %d", off, u.Offset())
	}
	if _, err := u2.Write(c, bytes.NewReader(p[off:])); err != nil {
		t.Fatal(err)
	}
	if _, err := u2.Commit(c, alg.FromBytes(p)); err != nil {
		t.Fatal(err)
	}
	mustRead(t, s, alg.FromBytes(p), 0, -1, p)
}

func testConcurrentSameDigest(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	c := ctx(t)
	p := random(t, 200_000)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := open()
			u, err := s.Begin(c)
			if err != nil {
				errs[i] = err
				return
			}
			for off := 0; off < len(p); off += 64_000 {
				if _, err := u.Write(c, bytes.NewReader(p[off:min(off+64_000, len(p))])); err != nil {
					errs[i] = err
					return
				}
			}
			_, errs[i] = u.Commit(c, alg.FromBytes(p))
		}()
	}
	// Meanwhile, readers never see partial content.
	done := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		s := open()
		for {
			select {
			case <-done:
				return
			default:
			}
			got, err := read(t, s, alg.FromBytes(p), 0, -1)
			if err == nil && !bytes.Equal(got, p) {
				t.Errorf("read %d bytes of a blob being committed concurrently, want all %d", len(got), len(p))
				return
			} else if err != nil && !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Open: %v", err)
				return
			}
		}
	}()
	wg.Wait()
	close(done)
	rwg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("upload %d: %v", i, err)
		}
	}
	mustRead(t, open(), alg.FromBytes(p), 0, -1, p)
}

func testList(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	s := open()
	c := ctx(t)
	want := map[blob.Digest]int64{}
	for i := range 5 {
		p := random(t, 10*i+1)
		want[put(t, s, alg, p).Digest] = int64(len(p))
	}
	// An unfinished upload is not listed.
	u, err := s.Begin(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(c, bytes.NewReader([]byte("partial"))); err != nil {
		t.Fatal(err)
	}
	got := map[blob.Digest]int64{}
	if err := s.List(c, func(i blob.Info) error {
		got[i.Digest] = i.Size
		if i.Modified.IsZero() {
			t.Errorf("%s: zero Modified", i.Digest)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("List: %v, want %v", got, want)
	}
	for d, n := range want {
		if got[d] != n {
			t.Fatalf("List: %s size %d, want %d", d, got[d], n)
		}
	}
	stop := errors.New("stop")
	calls := 0
	err = s.List(c, func(blob.Info) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("List stopping: %v after %d calls", err, calls)
	}
	var ids []string
	if err := s.Uploads(c, func(i blob.UploadInfo) error {
		ids = append(ids, i.ID)
		if i.Size != int64(len("partial")) || i.Updated.IsZero() {
			t.Errorf("Uploads: %+v", i)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != u.ID() {
		t.Fatalf("Uploads = %v, want [%s]", ids, u.ID())
	}
}

func testCancel(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	s := open()
	c := ctx(t)
	p := random(t, 5000)
	u, err := s.Begin(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(c, bytes.NewReader(p)); err != nil {
		t.Fatal(err)
	}
	if err := u.Cancel(c); err != nil {
		t.Fatal(err)
	}
	_, err = s.Resume(c, u.ID())
	wantErr(t, "Resume after Cancel", err, blob.ErrNotFound)
	_, err = u.Commit(c, alg.FromBytes(p))
	wantErr(t, "Commit after Cancel", err, blob.ErrNotFound)
	_, err = s.Stat(c, alg.FromBytes(p))
	wantErr(t, "Stat after Cancel", err, blob.ErrNotFound)
	wantErr(t, "Abort after Cancel", s.Abort(c, u.ID()), blob.ErrNotFound)
	var n int
	if err := s.Uploads(c, func(blob.UploadInfo) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("Uploads after Cancel: %d, %v", n, err)
	}
}

func testRecommitRefreshes(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	s := open()
	c := ctx(t)
	p := random(t, 100)
	first := put(t, s, alg, p)
	time.Sleep(1100 * time.Millisecond) // S3 times have a resolution of one second
	second := put(t, s, alg, p)
	st, err := s.Stat(c, first.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Modified.After(first.Modified) || !second.Modified.After(first.Modified) {
		t.Fatalf("re-commit did not refresh Modified: first %v, second %v, stat %v", first.Modified, second.Modified, st.Modified)
	}
}

// testMixedAlgorithms: the same content committed under a sha256 and a
// sha512 digest is two blobs, listed, read and deleted independently, and
// a digest of one algorithm does not verify content staged for the other.
func testMixedAlgorithms(t *testing.T, open func() blob.Store) {
	s := open()
	c := ctx(t)
	p := random(t, 10_000)
	d256, d512 := blob.SHA256.FromBytes(p), blob.SHA512.FromBytes(p)
	if put(t, s, blob.SHA256, p).Digest != d256 || put(t, s, blob.SHA512, p, 3000).Digest != d512 {
		t.Fatal("Commit returned another digest")
	}
	listed := map[blob.Digest]int64{}
	if err := s.List(c, func(i blob.Info) error { listed[i.Digest] = i.Size; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 || listed[d256] != int64(len(p)) || listed[d512] != int64(len(p)) {
		t.Fatalf("List = %v, want both digests of %d bytes", listed, len(p))
	}
	if err := s.Delete(c, d256); err != nil {
		t.Fatal(err)
	}
	_, err := s.Stat(c, d256)
	wantErr(t, "Stat of the deleted sha256 blob", err, blob.ErrNotFound)
	mustRead(t, s, d512, 0, -1, p)
	mustRead(t, open(), d512, 5000, 10, p[5000:5010])

	// A sha512 digest whose hex part is the sha256 of the content (or
	// vice versa, truncated) does not match: each is checked with its own
	// algorithm.
	u, err := s.Begin(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(c, bytes.NewReader(p)); err != nil {
		t.Fatal(err)
	}
	_, err = u.Commit(c, blob.SHA256.FromBytes(append([]byte{0}, p...)))
	wantErr(t, "Commit with another sha256", err, blob.ErrDigestMismatch)
	_, err = u.Commit(c, blob.Digest("sha256:"+d512.Hex()[:64]))
	wantErr(t, "Commit with a truncated sha512 as sha256", err, blob.ErrDigestMismatch)
	if _, err := u.Commit(c, d256); err != nil {
		t.Fatal(err)
	}
	mustRead(t, s, d256, 0, -1, p)
}

// testWriteTo checks that a body that is an io.WriterTo (a store's way to
// hand a writer its file or socket) writes the same bytes as it reads,
// through a loopback TCP connection, where the kernel copies (sendfile,
// splice).
func testWriteTo(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	s := open()
	p := random(t, 3<<20+17)
	d := put(t, s, alg, p).Digest
	n := int64(len(p))
	for _, r := range []struct{ off, len int64 }{{0, -1}, {0, n}, {0, 1}, {1 << 20, -1}, {100, 1<<20 + 3}, {n - 1, 1}} {
		end := n
		if r.len >= 0 {
			end = r.off + r.len
		}
		rc, err := s.Open(ctx(t), d, r.off, r.len)
		if err != nil {
			t.Fatalf("Open(%d, %d): %v", r.off, r.len, err)
		}
		wt, ok := rc.(io.WriterTo)
		if !ok {
			rc.Close()
			continue
		}
		got, err := writeToTCP(t, wt)
		rc.Close()
		if err != nil {
			t.Fatalf("Open(%d, %d): WriteTo: %v", r.off, r.len, err)
		}
		if !bytes.Equal(got, p[r.off:end]) {
			t.Fatalf("Open(%d, %d): WriteTo wrote %d bytes, want %d (content differs: %v)", r.off, r.len, len(got), end-r.off, len(got) == int(end-r.off))
		}
	}
}

// writeToTCP runs wt.WriteTo on one end of a loopback TCP connection and
// returns what the other end read, and WriteTo's error.
func writeToTCP(t *testing.T, wt io.WriterTo) ([]byte, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		p   []byte
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		p, err := io.ReadAll(c)
		got <- result{p, err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, werr := wt.WriteTo(c)
	c.Close()
	r := <-got
	if r.err != nil {
		t.Fatalf("reading the connection: %v", r.err)
	}
	return r.p, werr
}
