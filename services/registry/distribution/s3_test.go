package distribution_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/blob"
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

// recordingTransport remembers the Authorization header of every request it
// sends to host.
type recordingTransport struct {
	host string
	mu   sync.Mutex
	auth []string
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host == rt.host {
		rt.mu.Lock()
		rt.auth = append(rt.auth, r.Header.Get("Authorization"))
		rt.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (rt *recordingTransport) seen() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return slices.Clone(rt.auth)
}

// TestS3Redirect checks BlobRedirects against a real MinIO: whole-blob GETs
// answer 307 to a presigned URL, HEAD and Range GETs are served directly,
// and the redirected GET succeeds also for clients that resend their
// Authorization header to the store, as Go's http.Client does when the
// store's host name is the registry's (here both are 127.0.0.1).
func TestS3Redirect(t *testing.T) {
	s3 := testenv.MinIO(t)
	md := newMeta(t)
	newClient := func(endpoint string) *minio.Client {
		mc, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""), Region: s3.Region})
		if err != nil {
			t.Fatal(err)
		}
		return mc
	}
	bs := s3store.New(newClient(s3.Endpoint), "redirect", s3store.Options{})
	if err := bs.EnsureBucket(context.Background(), s3.Region); err != nil {
		t.Fatal(err)
	}
	base := serve(t, distribution.Config{Meta: md, Blobs: bs, Authorizer: distribution.AllowAll{}, BlobRedirects: true})
	c := client{t, base}
	content := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	d := c.pushBlob("isv/redirect", content)
	path := "/v2/isv/redirect/blobs/" + string(d)

	// The redirect itself.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || len(body) != 0 {
		t.Fatalf("GET: %s, %d body bytes; want 307 and none", resp.Status, len(body))
	}
	if got := resp.Header.Get("Docker-Content-Digest"); got != string(d) {
		t.Errorf("Docker-Content-Digest %q", got)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Host != s3.Endpoint || loc.Query().Get("X-Amz-Signature") == "" {
		t.Fatalf("Location %q: %v", resp.Header.Get("Location"), err)
	}
	if exp := loc.Query().Get("X-Amz-Expires"); exp != "600" {
		t.Errorf("X-Amz-Expires %q, want 600", exp)
	}

	// HEAD and Range GETs are not redirected; unknown blobs are not either.
	c.do("HEAD", path, nil).want(t, 200, "").header(t, "Content-Length", strconv.Itoa(len(content)))
	if r := c.do("GET", path, nil, "Range", "bytes=16-31").want(t, 206, ""); !bytes.Equal(r.body, content[16:32]) {
		t.Fatalf("range %q", r.body)
	}
	c.do("GET", "/v2/isv/redirect/blobs/"+string(blob.FromBytes([]byte("nope"))), nil).want(t, 404, "BLOB_UNKNOWN")
	c.do("GET", "/v2/isv/other/blobs/"+string(d), nil).want(t, 404, "BLOB_UNKNOWN")

	// MinIO refuses a presigned URL that comes with an Authorization header.
	req, _ := http.NewRequest(http.MethodGet, loc.String(), nil)
	req.Header.Set("Authorization", "Bearer eyJhbGciOiJFUzI1NiJ9.e30.c2ln")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("presigned GET with a bearer token: %s %.200s", resp.Status, body)
	}

	// Go's client would resend the Authorization header on the request to
	// 127.0.0.1:<minio port>, the registry's host name: such requests are
	// served directly. Without the header they are redirected.
	for _, authz := range []string{"", "Bearer eyJhbGciOiJFUzI1NiJ9.e30.c2ln", "Basic dXNlcjpwYXNzd29yZA=="} {
		rt := &recordingTransport{host: s3.Endpoint}
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		resp, err := (&http.Client{Transport: rt}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, content) {
			t.Errorf("GET with Authorization %q: %s: %q", authz, resp.Status, got)
		}
		want := []string{""} // redirected, without a header
		if authz != "" {
			want = nil // served by the registry
		}
		if seen := rt.seen(); !slices.Equal(seen, want) {
			t.Errorf("Authorization %q: requests to the store %q, want %q", authz, seen, want)
		}
	}

	// A public endpoint under another host name: redirected, and Go's
	// client drops the Authorization header on the way.
	pub := strings.Replace(s3.Endpoint, "127.0.0.1", "localhost", 1)
	bsPub := s3store.New(newClient(s3.Endpoint), "redirect", s3store.Options{PublicClient: newClient(pub)})
	basePub := serve(t, distribution.Config{Meta: md, Blobs: bsPub, Authorizer: distribution.AllowAll{},
		BlobRedirects: true, BlobRedirectExpiry: time.Minute})
	rt := &recordingTransport{host: pub}
	req, _ = http.NewRequest(http.MethodGet, basePub+path, nil)
	req.Header.Set("Authorization", "Bearer eyJhbGciOiJFUzI1NiJ9.e30.c2ln")
	resp, err = (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, content) {
		t.Errorf("GET through the public endpoint: %s: %.300s", resp.Status, got)
	}
	if seen := rt.seen(); len(seen) != 1 || seen[0] != "" {
		t.Errorf("Authorization sent to the public endpoint: %q, want none", seen)
	}
	if u := resp.Request.URL; u.Host != pub || u.Query().Get("X-Amz-Expires") != "60" {
		t.Errorf("followed to %s", u)
	}

	// go-containerregistry follows the redirects of a whole pull.
	ref, err := name.ParseReference(strings.TrimPrefix(base, "http://")+"/isv/redirect/image:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(1<<16, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := pulled.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Compressed() // verifies the digest
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pulled.ConfigFile(); err != nil {
		t.Fatal(err)
	}
}
