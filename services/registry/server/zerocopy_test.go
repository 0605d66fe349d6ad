package server_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/blob/blobtest"
	"github.com/fpga-faas/faas/services/registry/server"
)

// Pulled layers reach the http.Server's ReadFrom through the middleware,
// as the store's file (sendfile) or S3 connection (splice), and the request
// log counts their bytes.
func TestPullKernelCopy(t *testing.T) {
	s3 := testenv.MinIO(t)
	for _, tc := range []struct {
		name string
		cfg  server.Config
		kind string
	}{
		{"dirstore", server.Config{}, "file"},
		{"s3store", server.Config{S3Endpoint: s3.Endpoint, S3AccessKey: s3.AccessKey, S3SecretKey: s3.SecretKey, S3Bucket: "zerocopy"}, "tcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := start(t, tc.cfg)
			r.user(t, "isv1", auth.RoleISV, isvPW)
			var rec blobtest.ReadFromRecorder
			srv := httptest.NewServer(rec.Wrap(r.srv.Handler()))
			defer srv.Close()
			opt := remote.WithAuth(&authn.Basic{Username: "isv1", Password: isvPW})
			ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://")+"/isv1/img:1", name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			img, err := random.Image(1<<20, 2)
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.Write(ref, img, opt); err != nil {
				t.Fatal(err)
			}
			rec.Seen() // forget the push
			got, err := remote.Image(ref, opt)
			if err != nil {
				t.Fatal(err)
			}
			layers, err := got.Layers()
			if err != nil {
				t.Fatal(err)
			}
			sizes := map[int64]bool{}
			for _, l := range layers {
				rc, err := l.Compressed() // verifies the digest
				if err != nil {
					t.Fatal(err)
				}
				n, err := io.Copy(io.Discard, rc)
				rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				sizes[n] = true
			}
			srcs := rec.Seen()
			if len(srcs) < len(layers) {
				t.Fatalf("ReadFrom got %v for %d layers", srcs, len(layers))
			}
			for _, k := range srcs {
				if k != tc.kind {
					t.Fatalf("ReadFrom got %v, want only %s", srcs, tc.kind)
				}
			}
			// The request log counts the bytes sent by ReadFrom. A handler
			// logs after its body reached the client, so wait for every
			// request to end (Close blocks until they have) before reading.
			srv.Close()
			logged := 0
			sc := bufio.NewScanner(strings.NewReader(r.logs.String()))
			for sc.Scan() {
				var e struct {
					Msg, Method, Route string
					Status             int
					Bytes              int64
				}
				if json.Unmarshal(sc.Bytes(), &e) != nil || e.Msg != "request" || e.Route != "v2_blob" || e.Method != "GET" || e.Status != 200 || e.Bytes < 1<<20 {
					continue
				}
				if !sizes[e.Bytes] {
					t.Errorf("request log: %d bytes, want a layer's size %v", e.Bytes, sizes)
				}
				logged++
			}
			if logged < len(layers) {
				t.Fatalf("request log: %d layer GETs with their bytes, want %d", logged, len(layers))
			}
		})
	}
}
