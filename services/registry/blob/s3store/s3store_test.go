package s3store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/blobtest"
	"github.com/fpga-faas/faas/services/registry/blob/s3store"
)

func client(t *testing.T, s3 *testenv.S3) *minio.Client {
	t.Helper()
	c, err := minio.New(s3.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""),
		Region: s3.Region,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newBucket(t *testing.T, s3 *testenv.S3, c *minio.Client) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	bucket := "test-" + hex.EncodeToString(b[:])
	if err := s3store.New(c, bucket, s3store.Options{}).EnsureBucket(context.Background(), s3.Region); err != nil {
		t.Fatal(err)
	}
	return bucket
}

func TestConformance(t *testing.T) {
	s3 := testenv.MinIO(t)
	for _, prefix := range []string{"", "registry/"} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			blobtest.Run(t, func(t *testing.T) func() blob.Store {
				bucket := newBucket(t, s3, client(t, s3))
				return func() blob.Store {
					// A new client too, as a restarted process would have.
					return s3store.New(client(t, s3), bucket, s3store.Options{Prefix: prefix, PartSize: 5 << 20})
				}
			})
		})
	}
}

// TestLayoutAndLargeChunks checks the key layout, and commits chunks larger
// than a multipart part.
func TestLayoutAndLargeChunks(t *testing.T) {
	s3 := testenv.MinIO(t)
	c := client(t, s3)
	bucket := newBucket(t, s3, c)
	s := s3store.New(c, bucket, s3store.Options{PartSize: 5 << 20})
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 12<<20)
	rand.Read(p)
	u, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(ctx, bytes.NewReader(p[:11<<20])); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(ctx, bytes.NewReader(p[11<<20:])); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StatObject(ctx, bucket, "uploads/"+u.ID()+"/0000000001", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("chunk 1: %v", err)
	}
	d := blob.FromBytes(p)
	if _, err := u.Commit(ctx, d); err != nil {
		t.Fatal(err)
	}
	obj, err := c.GetObject(ctx, bucket, "blobs/sha256/"+d.Hex(), minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || !bytes.Equal(got, p) {
		t.Fatalf("blob object: %d bytes, %v", len(got), err)
	}
	for o := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "uploads/", Recursive: true}) {
		t.Errorf("left after commit: %s %v", o.Key, o.Err)
	}
}

// Staging objects left without a marker (a crash during Commit's cleanup)
// are not resumable, but listed and abortable.
func TestCrashLeftovers(t *testing.T) {
	s3 := testenv.MinIO(t)
	c := client(t, s3)
	bucket := newBucket(t, s3, c)
	s := s3store.New(c, bucket, s3store.Options{})
	ctx := context.Background()
	id := "0123456789abcdef0123456789abcdef"
	if _, err := c.PutObject(ctx, bucket, "uploads/"+id+"/0000000000", bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resume(ctx, id); err == nil {
		t.Fatal("Resume without marker succeeded")
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
	for o := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "uploads/", Recursive: true}) {
		t.Errorf("left after Abort: %s %v", o.Key, o.Err)
	}
}

// TestRedirectURL fetches a blob through presigned URLs: of the store's
// client, and of a public client on another host name with a prefix.
func TestRedirectURL(t *testing.T) {
	s3 := testenv.MinIO(t)
	ctx := context.Background()
	c := client(t, s3)
	bucket := newBucket(t, s3, c)
	pubEndpoint := strings.Replace(s3.Endpoint, "127.0.0.1", "localhost", 1)
	pub, err := minio.New(pubEndpoint, &minio.Options{Creds: credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""), Region: s3.Region})
	if err != nil {
		t.Fatal(err)
	}
	content := []byte("presigned blob content")
	d := blob.FromBytes(content)
	for _, tc := range []struct {
		opt  s3store.Options
		host string
	}{
		{s3store.Options{}, s3.Endpoint},
		{s3store.Options{Prefix: "registry/", PublicClient: pub}, pubEndpoint},
	} {
		st := s3store.New(c, bucket, tc.opt)
		up, err := st.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := up.Write(ctx, bytes.NewReader(content)); err != nil {
			t.Fatal(err)
		}
		if _, err := up.Commit(ctx, d); err != nil {
			t.Fatal(err)
		}
		u, err := st.RedirectURL(ctx, d, 0)
		if err != nil {
			t.Fatal(err)
		}
		if u.Host != tc.host || u.Query().Get("X-Amz-Expires") != "600" {
			t.Errorf("URL %s: want host %s, 600 s", u, tc.host)
		}
		resp, err := http.Get(u.String())
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, content) {
			t.Errorf("GET %s: %s %q", u, resp.Status, got)
		}
		if u, err := st.RedirectURL(ctx, d, time.Minute); err != nil || u.Query().Get("X-Amz-Expires") != "60" {
			t.Errorf("expiry 1m: %v %v", u, err)
		}
	}
	var st blob.Store = s3store.New(c, bucket, s3store.Options{})
	if _, err := st.(blob.Redirector).RedirectURL(ctx, "sha256:nothex", 0); !errors.Is(err, blob.ErrInvalidDigest) {
		t.Errorf("bad digest: %v", err)
	}
}
