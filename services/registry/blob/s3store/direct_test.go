package s3store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/blobtest"
	"github.com/fpga-faas/faas/services/registry/blob/s3store"
)

// proxied returns a store whose S3 traffic passes a fault-injecting proxy
// in front of MinIO, and a blob of n random bytes in it.
func proxied(t *testing.T, opt s3store.Options, n int) (*s3store.Store, *blobtest.Proxy, blob.Digest, []byte) {
	t.Helper()
	s3 := testenv.MinIO(t)
	bucket := newBucket(t, s3, client(t, s3))
	p := blobtest.NewProxy(t, s3.Endpoint)
	c, err := minio.New(p.Addr(), &minio.Options{Creds: credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""), Region: s3.Region})
	if err != nil {
		t.Fatal(err)
	}
	s := s3store.New(c, bucket, opt)
	t.Cleanup(func() { s.Close() })
	data := make([]byte, n)
	rand.Read(data)
	ctx := context.Background()
	u, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(ctx, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	d := blob.FromBytes(data)
	if _, err := u.Commit(ctx, d); err != nil {
		t.Fatal(err)
	}
	return s, p, d, data
}

// readerFrom records what its ReadFrom is given, as an http.ResponseWriter
// on a TCP connection would get it.
type readerFrom struct {
	bytes.Buffer
	srcs []string
}

func (w *readerFrom) ReadFrom(r io.Reader) (int64, error) {
	kind := "other"
	if lr, ok := r.(*io.LimitedReader); ok {
		if _, ok := lr.R.(*net.TCPConn); ok {
			kind = "limited tcp"
		}
	}
	w.srcs = append(w.srcs, kind)
	return w.Buffer.ReadFrom(r)
}

// A direct GET's body hands its S3 connection to a writer's ReadFrom (so
// that Linux splices it to the client's), whole and in ranges, and leaves
// the connection for the next GET.
func TestDirectGetHandsOverConnection(t *testing.T) {
	s, _, d, data := proxied(t, s3store.Options{}, 3<<20+5)
	ctx := context.Background()
	for _, r := range []struct{ off, len int64 }{{0, -1}, {0, int64(len(data))}, {1000, 2 << 20}} {
		rc, err := s.Open(ctx, d, r.off, r.len)
		if err != nil {
			t.Fatal(err)
		}
		wt, ok := rc.(io.WriterTo)
		if !ok {
			rc.Close()
			t.Fatalf("Open(%d, %d) = %T, no io.WriterTo", r.off, r.len, rc)
		}
		var w readerFrom
		n, err := wt.WriteTo(&w)
		rc.Close()
		end := int64(len(data))
		if r.len >= 0 {
			end = r.off + r.len
		}
		if err != nil || n != end-r.off || !bytes.Equal(w.Bytes(), data[r.off:end]) {
			t.Fatalf("Open(%d, %d): WriteTo = %d, %v; content equal: %v", r.off, r.len, n, err, bytes.Equal(w.Bytes(), data[r.off:end]))
		}
		if len(w.srcs) == 0 {
			t.Fatalf("Open(%d, %d): WriteTo never called ReadFrom", r.off, r.len)
		}
		for _, k := range w.srcs {
			if k != "limited tcp" {
				t.Fatalf("Open(%d, %d): ReadFrom got %v, want the S3 connection in an *io.LimitedReader", r.off, r.len, w.srcs)
			}
		}
		if idle := s3store.IdleDirectConns(s); idle != 1 {
			t.Fatalf("after Open(%d, %d): %d idle connections, want 1 (reused)", r.off, r.len, idle)
		}
	}
}

// A GET on an idle connection the service has closed is retried on a new
// one; a body closed early does not leave its connection for reuse.
func TestDirectGetStaleAndEarlyClose(t *testing.T) {
	s, p, d, data := proxied(t, s3store.Options{}, 1<<20)
	ctx := context.Background()
	rc, err := s.Open(ctx, d, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if idle := s3store.IdleDirectConns(s); idle != 0 {
		t.Fatalf("%d idle connections after an early Close, want 0", idle)
	}
	mustReadAll(t, s, d, data)
	if idle := s3store.IdleDirectConns(s); idle != 1 {
		t.Fatalf("%d idle connections, want 1", idle)
	}
	p.Drop()
	mustReadAll(t, s, d, data)
}

func mustReadAll(t *testing.T, s *s3store.Store, d blob.Digest, want []byte) {
	t.Helper()
	rc, err := s.Open(context.Background(), d, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, ok := rc.(io.WriterTo); !ok {
		t.Fatalf("Open = %T, not a direct GET", rc)
	}
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, %v; want %d", len(got), err, len(want))
	}
}

// A service that dies mid-answer gives an error, through Read and WriteTo
// alike, never a short body that ends as if whole.
func TestDirectGetCut(t *testing.T) {
	s, p, d, data := proxied(t, s3store.Options{}, 2<<20)
	ctx := context.Background()
	for _, how := range []string{"Read", "WriteTo"} {
		t.Run(how, func(t *testing.T) {
			// Before Open: the answer may be in the socket buffers soon after.
			p.Inject(blobtest.Cut, 512<<10)
			defer p.Heal()
			rc, err := s.Open(ctx, d, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			var got []byte
			if how == "Read" {
				got, err = io.ReadAll(rc)
			} else {
				var w readerFrom
				_, err = rc.(io.WriterTo).WriteTo(&w)
				got = w.Bytes()
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%s after a cut: %d bytes, error %v, want io.ErrUnexpectedEOF", how, len(got), err)
			}
			if len(got) >= len(data) || !bytes.Equal(got, data[:len(got)]) {
				t.Fatalf("%s after a cut: %d bytes of %d, prefix equal: %v", how, len(got), len(data), bytes.Equal(got, data[:min(len(got), len(data))]))
			}
		})
	}
	// The store recovers once the service does.
	mustReadAll(t, s, d, data)
}

// A stalled answer fails after DirectReadTimeout, or at once when the
// request's context ends, through Read and WriteTo alike.
func TestDirectGetStall(t *testing.T) {
	s, p, d, _ := proxied(t, s3store.Options{DirectReadTimeout: 200 * time.Millisecond}, 2<<20)
	for _, how := range []string{"Read", "WriteTo"} {
		for _, stop := range []string{"timeout", "cancel"} {
			t.Run(how+"/"+stop, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				p.Inject(blobtest.Stall, 256<<10)
				defer p.Heal()
				rc, err := s.Open(ctx, d, 0, -1)
				if err != nil {
					t.Fatal(err)
				}
				defer rc.Close()
				var w readerFrom
				errc := make(chan error, 1)
				go func() {
					var err error
					if how == "Read" {
						_, err = io.Copy(&w.Buffer, struct{ io.Reader }{rc})
					} else {
						_, err = rc.(io.WriterTo).WriteTo(&w)
					}
					errc <- err
				}()
				want := os.ErrDeadlineExceeded
				if stop == "cancel" {
					cancel()
					want = context.Canceled
				}
				if err := <-errc; !errors.Is(err, want) {
					t.Fatalf("%s of a stalled answer: %v, want %v", how, err, want)
				}
			})
		}
	}
}

// The direct connections are bounded: past MaxDirectConns, Open reads
// through minio-go, and at most MaxDirectConns stay idle.
func TestDirectGetBounded(t *testing.T) {
	s, _, d, data := proxied(t, s3store.Options{MaxDirectConns: 2}, 100_000)
	ctx := context.Background()
	var rcs []io.ReadCloser
	direct := 0
	for range 4 {
		rc, err := s.Open(ctx, d, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := rc.(io.WriterTo); ok {
			direct++
		}
		rcs = append(rcs, rc)
	}
	if direct != 2 {
		t.Fatalf("%d direct GETs open at once, want 2", direct)
	}
	for _, rc := range rcs {
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %d bytes, %v", len(got), err)
		}
	}
	if idle := s3store.IdleDirectConns(s); idle != 2 {
		t.Fatalf("%d idle connections, want 2", idle)
	}
}

// DisableDirectGets reads through minio-go only.
func TestDirectGetDisabled(t *testing.T) {
	s, _, d, data := proxied(t, s3store.Options{DisableDirectGets: true}, 1000)
	rc, err := s.Open(context.Background(), d, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, ok := rc.(io.WriterTo); ok || s3store.IdleDirectConns(s) != -1 {
		t.Fatalf("Open = %T with direct GETs disabled", rc)
	}
	if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, %v", len(got), err)
	}
}
