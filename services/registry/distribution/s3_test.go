package distribution_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/blob/s3store"
	"github.com/fpga-faas/faas/services/registry/distribution"
)

// TestS3RoundTrip pushes and pulls an image through the API with the blobs
// in a real MinIO.
func TestS3RoundTrip(t *testing.T) {
	s3 := testenv.MinIO(t)
	md := newMeta(t)
	mc, err := minio.New(s3.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""), Region: s3.Region})
	if err != nil {
		t.Fatal(err)
	}
	bs := s3store.New(mc, "registry", s3store.Options{})
	if err := bs.EnsureBucket(context.Background(), s3.Region); err != nil {
		t.Fatal(err)
	}
	base := serve(t, distribution.Config{Meta: md, Blobs: bs, Authorizer: distribution.AllowAll{}})
	ref, err := name.ParseReference(strings.TrimPrefix(base, "http://")+"/isv/s3/image:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := got.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		// Compressed verifies the digest of what it reads.
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if size, _ := l.Size(); n != size {
			t.Fatalf("layer: %d bytes, want %d", n, size)
		}
	}
	want, _ := img.Digest()
	if d, _ := got.Digest(); d != want {
		t.Fatalf("digest %v, want %v", d, want)
	}
	// A chunked upload through S3, with a status query in between.
	c := client{t, base}
	loc := c.do("POST", "/v2/isv/s3/chunks/blobs/uploads/", nil).want(t, 202, "").Header.Get("Location")
	c.do("PATCH", loc, []byte("hello "), "Content-Range", "0-5").want(t, 202, "")
	c.do("GET", loc, nil).want(t, 204, "").header(t, "Range", "0-5")
	c.do("PATCH", loc, []byte("world"), "Content-Range", "6-10").want(t, 202, "")
	d := "sha256:b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
	c.do("PUT", loc+"?digest="+d, nil).want(t, 201, "")
	if r := c.do("GET", "/v2/isv/s3/chunks/blobs/"+d, nil, "Range", "bytes=6-").want(t, 206, ""); string(r.body) != "world" {
		t.Fatalf("range %q", r.body)
	}
}
