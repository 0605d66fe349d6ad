package s3store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/blob"
)

func TestFullErrors(t *testing.T) {
	// What MinIO answers below its free-space threshold (seen from a MinIO
	// on a filled 64 MiB tmpfs, single and multipart PUTs alike).
	minioFull := minio.ErrorResponse{Code: "XMinioStorageFull", StatusCode: http.StatusInsufficientStorage,
		Message: "Storage backend has reached its minimum free drive threshold. Please delete a few objects to proceed."}
	for _, tc := range []struct {
		err  error
		full bool
	}{
		{minioFull, true},
		{fmt.Errorf("put: %w", minioFull), true},
		{minio.ErrorResponse{Code: "XMinioAdminBucketQuotaExceeded", StatusCode: http.StatusBadRequest}, true},
		{minio.ErrorResponse{Code: "SomethingElse", StatusCode: http.StatusInsufficientStorage}, true},
		{minio.ErrorResponse{Code: "InternalError", StatusCode: http.StatusInternalServerError}, false},
		{minio.ErrorResponse{Code: "NoSuchKey", StatusCode: http.StatusNotFound}, false},
		{errors.New("connection reset"), false},
	} {
		err := wrap(tc.err, "write")
		if got := errors.Is(err, blob.ErrStorageFull); got != tc.full {
			t.Errorf("wrap(%v): storage full %v, want %v", tc.err, got, tc.full)
		}
		if tc.full && !errors.Is(err, tc.err) {
			t.Errorf("wrap(%v) = %v lost the cause", tc.err, err)
		}
	}
}

// TestCheckSpace: after a refused write the store reports full until a
// write, or CheckSpace's probe, goes through (real MinIO, with room).
func TestCheckSpace(t *testing.T) {
	s3 := testenv.MinIO(t)
	c, err := minio.New(s3.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""), Region: s3.Region})
	if err != nil {
		t.Fatal(err)
	}
	s := New(c, "space", Options{})
	ctx := context.Background()
	if err := s.EnsureBucket(ctx, s3.Region); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckSpace(ctx); err != nil {
		t.Fatalf("CheckSpace before any refusal: %v", err)
	}
	refused := s.wrote(minio.ErrorResponse{Code: "XMinioStorageFull", StatusCode: http.StatusInsufficientStorage}, "write")
	if !errors.Is(refused, blob.ErrStorageFull) || !s.full.Load() {
		t.Fatalf("a refused write: %v, full %v", refused, s.full.Load())
	}
	if err := s.CheckSpace(ctx); err != nil {
		t.Fatalf("CheckSpace once MinIO has room again: %v", err)
	}
	if s.full.Load() {
		t.Fatal("the probe's success did not clear the state")
	}
	n := 0
	for o := range c.ListObjects(ctx, "space", minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		n++
	}
	if n != 0 {
		t.Errorf("the probe left %d objects", n)
	}
}
