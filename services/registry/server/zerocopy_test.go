package server_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/server"
)

// readFromRecorder wraps a handler's http.ResponseWriter and records what
// its ReadFrom is given: the kernel copies only from a file or a TCP
// connection (in an *io.LimitedReader).
type readFromRecorder struct {
	mu   sync.Mutex
	srcs []string
}

func (rec *readFromRecorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(recordingWriter{w, rec}, r)
	})
}

type recordingWriter struct {
	http.ResponseWriter
	rec *readFromRecorder
}

func (w recordingWriter) ReadFrom(r io.Reader) (int64, error) {
	kind := "other"
	if lr, ok := r.(*io.LimitedReader); ok {
		switch lr.R.(type) {
		case *os.File:
			kind = "file"
		case *net.TCPConn:
			kind = "tcp"
		}
	}
	w.rec.mu.Lock()
	w.rec.srcs = append(w.rec.srcs, kind)
	w.rec.mu.Unlock()
	return w.ResponseWriter.(io.ReaderFrom).ReadFrom(r)
}

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
			var rec readFromRecorder
			srv := httptest.NewServer(rec.wrap(r.srv.Handler()))
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
			rec.mu.Lock()
			rec.srcs = nil
			rec.mu.Unlock()
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
			rec.mu.Lock()
			srcs := rec.srcs
			rec.mu.Unlock()
			if len(srcs) < len(layers) {
				t.Fatalf("ReadFrom got %v for %d layers", srcs, len(layers))
			}
			for _, k := range srcs {
				if k != tc.kind {
					t.Fatalf("ReadFrom got %v, want only %s", srcs, tc.kind)
				}
			}
			// The request log counts the bytes sent by ReadFrom.
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
