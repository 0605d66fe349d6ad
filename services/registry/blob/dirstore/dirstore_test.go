package dirstore_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/blobtest"
	"github.com/fpga-faas/faas/services/registry/blob/dirstore"
)

func open(t *testing.T, dir string) *dirstore.Store {
	t.Helper()
	s, err := dirstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) func() blob.Store {
		dir := t.TempDir()
		return func() blob.Store { return open(t, dir) }
	})
}

func TestLayout(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	ctx := context.Background()
	p := []byte("hello")
	u, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(ctx, bytes.NewReader(p)); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "uploads", u.ID(), "data")); err != nil || !bytes.Equal(got, p) {
		t.Fatalf("staged data: %q, %v", got, err)
	}
	d := blob.FromBytes(p)
	if _, err := u.Commit(ctx, d); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", d.Hex()[:2], d.Hex())); err != nil || !bytes.Equal(got, p) {
		t.Fatalf("blob: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "uploads", u.ID())); !os.IsNotExist(err) {
		t.Fatalf("upload directory left after commit: %v", err)
	}
	// sha512 blobs live beside the sha256 ones.
	if u, err = s.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(ctx, bytes.NewReader(p)); err != nil {
		t.Fatal(err)
	}
	d = blob.SHA512.FromBytes(p)
	if _, err := u.Commit(ctx, d); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "blobs", "sha512", d.Hex()[:2], d.Hex())); err != nil || !bytes.Equal(got, p) {
		t.Fatalf("sha512 blob: %q, %v", got, err)
	}
}

// A crash after Commit's rename but before the upload directory is removed
// leaves a dataless upload: not resumable, listed, and abortable.
func TestCrashAfterRename(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	ctx := context.Background()
	id := "0123456789abcdef0123456789abcdef"
	if err := os.MkdirAll(filepath.Join(dir, "uploads", id), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resume(ctx, id); err == nil {
		t.Fatal("Resume of a dataless upload succeeded")
	}
	var ids []string
	if err := s.Uploads(ctx, func(u blob.UploadInfo) error { ids = append(ids, u.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != id {
		t.Fatalf("Uploads = %v", ids)
	}
	if err := s.Abort(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "uploads", id)); !os.IsNotExist(err) {
		t.Fatalf("Abort left the directory: %v", err)
	}
}
