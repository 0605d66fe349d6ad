package distribution_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/blobtest"
	"github.com/fpga-faas/faas/services/registry/blob/s3store"
	"github.com/fpga-faas/faas/services/registry/distribution"
)

func s3Store(t *testing.T, endpoint string, s3 *testenv.S3, bucket string) blob.Store {
	t.Helper()
	mc, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""), Region: s3.Region})
	if err != nil {
		t.Fatal(err)
	}
	bs := s3store.New(mc, bucket, s3store.Options{})
	if err := bs.EnsureBucket(context.Background(), s3.Region); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bs.Close() })
	return bs
}

// Blob GETs hand the store's file (directory store) or S3 connection to
// the response writer's ReadFrom, whole and in ranges, so that the kernel
// copies (sendfile, splice); on TLS they copy through the handler's buffer.
func TestBlobGetKernelCopy(t *testing.T) {
	s3 := testenv.MinIO(t)
	md := newMeta(t)
	content := make([]byte, 2<<20+1)
	rand.Read(content)
	for _, tc := range []struct {
		name  string
		store blob.Store
		kind  string
	}{
		{"dirstore", newDirStore(t), "file"},
		{"s3store", s3Store(t, s3.Endpoint, s3, "zerocopy"), "tcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := distribution.New(distribution.Config{Meta: md, Blobs: tc.store, Authorizer: distribution.AllowAll{}})
			if err != nil {
				t.Fatal(err)
			}
			var rec blobtest.ReadFromRecorder
			srv := httptest.NewServer(rec.Wrap(h))
			defer srv.Close()
			c := client{t, srv.URL}
			repo := "isv/zerocopy-" + tc.name
			path := "/v2/" + repo + "/blobs/" + string(c.pushBlob(repo, content))
			rec.Seen()
			for _, r := range []struct {
				rng  string
				want []byte
			}{{"", content}, {"bytes=100-", content[100:]}, {"bytes=5-1048580", content[5:1048581]}} {
				status := 200
				if r.rng != "" {
					status = 206
				}
				var resp response
				if r.rng == "" {
					resp = c.do("GET", path, nil)
				} else {
					resp = c.do("GET", path, nil, "Range", r.rng)
				}
				resp.want(t, status, "")
				if !bytes.Equal(resp.body, r.want) {
					t.Fatalf("GET %q: %d bytes, want %d", r.rng, len(resp.body), len(r.want))
				}
				seen := rec.Seen()
				if len(seen) == 0 {
					t.Fatalf("GET %q: ReadFrom never called", r.rng)
				}
				for _, k := range seen {
					if k != tc.kind {
						t.Fatalf("GET %q: ReadFrom got %v, want only %s", r.rng, seen, tc.kind)
					}
				}
			}

			tlsSrv := httptest.NewTLSServer(rec.Wrap(h))
			defer tlsSrv.Close()
			resp, err := tlsSrv.Client().Get(tlsSrv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Equal(got, content) {
				t.Fatalf("GET over TLS: %d bytes, %v", len(got), err)
			}
			if seen := rec.Seen(); len(seen) != 0 {
				t.Fatalf("GET over TLS: ReadFrom got %v, want no call", seen)
			}
		})
	}
}

// When S3 dies in the middle of a blob, the registry's client gets a
// truncated body and an error, never a body that ends as if whole.
func TestBlobGetS3Cut(t *testing.T) {
	s3 := testenv.MinIO(t)
	p := blobtest.NewProxy(t, s3.Endpoint)
	bs := s3Store(t, p.Addr(), s3, "cut")
	base := serve(t, distribution.Config{Meta: newMeta(t), Blobs: bs, Authorizer: distribution.AllowAll{}})
	c := client{t, base}
	content := make([]byte, 4<<20)
	rand.Read(content)
	path := base + "/v2/isv/cut/blobs/" + string(c.pushBlob("isv/cut", content))
	for _, rng := range []string{"", "bytes=1000-"} {
		p.Inject(blobtest.Cut, 1<<20)
		req, _ := http.NewRequest(http.MethodGet, path, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		p.Heal()
		want := content
		if rng != "" {
			want = content[1000:]
		}
		if resp.StatusCode/100 != 2 || !errors.Is(err, io.ErrUnexpectedEOF) || len(got) >= len(want) || !bytes.Equal(got, want[:len(got)]) {
			t.Fatalf("GET %q with S3 cut: %s, %d of %d bytes, %v; want a truncated prefix and io.ErrUnexpectedEOF", rng, resp.Status, len(got), len(want), err)
		}
	}
	c.do("GET", "/v2/isv/cut/blobs/"+string(blob.FromBytes(content)), nil).want(t, 200, "")
}
