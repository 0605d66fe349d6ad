package dirstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"testing"

	"github.com/fpga-faas/faas/services/registry/blob"
)

// readerFrom records what its ReadFrom is given, as an http.ResponseWriter
// on a TCP connection would get it.
type readerFrom struct {
	bytes.Buffer
	srcs []string
}

func (w *readerFrom) ReadFrom(r io.Reader) (int64, error) {
	kind := "other"
	if lr, ok := r.(*io.LimitedReader); ok {
		if _, ok := lr.R.(*os.File); ok {
			kind = "limited file"
		}
	}
	w.srcs = append(w.srcs, kind)
	return w.Buffer.ReadFrom(r)
}

// A blob's body hands its file, limited to the range, to a writer's
// ReadFrom, so that a TCP connection sends it with sendfile.
func TestOpenHandsOverFile(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := context.Background()
	data := make([]byte, 1<<20+3)
	rand.Read(data)
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
	for _, r := range []struct{ off, len int64 }{{0, -1}, {5, 1000}, {1 << 20, 3}} {
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
			t.Fatalf("Open(%d, %d): WriteTo = %d, %v", r.off, r.len, n, err)
		}
		if len(w.srcs) != 1 || w.srcs[0] != "limited file" {
			t.Fatalf("Open(%d, %d): ReadFrom got %v, want the file in an *io.LimitedReader", r.off, r.len, w.srcs)
		}
	}
}
