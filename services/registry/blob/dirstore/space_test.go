package dirstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/blob"
)

// TestStorageFull fills a real (tmpfs) file system of 2 MiB; the sizes
// assume dirstore.MinFreeBytes = 1 MiB.
func TestStorageFull(t *testing.T) {
	s := open(t, testenv.Tmpfs(t, 2<<20))
	ctx := context.Background()
	if err := s.CheckSpace(ctx); err != nil {
		t.Fatalf("CheckSpace of an empty store: %v", err)
	}
	write := func(u blob.Upload, n int) ([]byte, error) {
		p := make([]byte, n)
		rand.Read(p)
		_, err := u.Write(ctx, bytes.NewReader(p))
		return p, err
	}
	// A blob of 1.5 MiB fits.
	u, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := write(u, 3<<19)
	if err != nil {
		t.Fatal(err)
	}
	big, err := u.Commit(ctx, blob.FromBytes(p))
	if err != nil {
		t.Fatal(err)
	}
	// Another MiB does not: ErrStorageFull, and the bytes that did fit are
	// given back.
	u, err = s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := write(u, 1<<20); !errors.Is(err, blob.ErrStorageFull) {
		t.Fatalf("write to a full file system: %v, want ErrStorageFull", err)
	}
	if u.Offset() != 0 {
		t.Errorf("offset after the refused write: %d, want 0", u.Offset())
	}
	if r, err := s.Resume(ctx, u.ID()); err != nil || r.Offset() != 0 {
		t.Errorf("resumed after the refused write: %v", err)
	}
	if err := s.CheckSpace(ctx); !errors.Is(err, blob.ErrStorageFull) {
		t.Fatalf("CheckSpace of a full store: %v", err)
	}
	// Space freed: room again, and the same upload goes through.
	if err := s.Delete(ctx, big.Digest); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckSpace(ctx); err != nil {
		t.Fatalf("CheckSpace after freeing space: %v", err)
	}
	p, err = write(u, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Commit(ctx, blob.FromBytes(p)); err != nil {
		t.Fatal(err)
	}
}
