package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/loadtest"
	"github.com/fpga-faas/faas/sdk/registryapi"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/server"
)

// Benchmarks whose figures BENCHMARKS.md reports (internal/cmd/bench):
//
//   - BenchmarkPull16 against BenchmarkPull16MinIO: 16 concurrent pulls of a
//     76 MiB image (two 38 MiB layers, like a two-chip FPGA image) through the
//     registry backed by Postgres + MinIO, against 16 concurrent direct
//     minio-go GETs of the same objects. Target ≥ 0.8× of direct MinIO.
//     BenchmarkPull16Redirect is the same pulls with the registry
//     redirecting blob GETs to presigned MinIO URLs (S3Redirect).
//   - BenchmarkAPIListings against BenchmarkAPIHealthz: open-loop load of
//     500 req/s for 2 s per iteration; p50/p99 latency measured from each
//     request's scheduled send time (no coordinated omission). Target p99 ≤
//     20 ms at 500 req/s.
//
// Both need the PostgreSQL (and MinIO) binaries of internal/testenv; without
// them they are skipped.

const (
	pullers      = 16
	pullLayerMiB = 38
	pullLayers   = 2 // 76 MiB in all

	loadRate     = 500             // offered requests per second
	loadDuration = 2 * time.Second // per iteration
	loadWorkers  = 64              // goroutines issuing the scheduled requests
)

// benchServer is a registry served on a loopback port for a benchmark; the
// benchmark's cleanup stops it.
type benchServer struct {
	srv  *server.Server
	host string
	url  string
}

func startBench(b *testing.B, cfg server.Config) *benchServer {
	b.Helper()
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = testenv.Postgres(b).URL
	}
	if cfg.DataDir == "" {
		cfg.DataDir = b.TempDir()
	}
	cfg.PasswordParams = testParams
	ctx := context.Background()
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		b.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	b.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				b.Error(err)
			}
		case <-time.After(time.Minute):
			b.Error("Serve did not return")
		}
		srv.Close()
	})
	host := ln.Addr().String()
	return &benchServer{srv: srv, host: host, url: "http://" + host}
}

// apiToken creates an account and returns an API token of it.
func (s *benchServer) apiToken(b *testing.B, name string, role auth.Role) string {
	b.Helper()
	ctx := context.Background()
	a, err := s.srv.CreateUser(ctx, name, role, "pw-"+name+"-secret")
	if err != nil {
		b.Fatal(err)
	}
	tok, err := s.srv.Accounts().IssueToken(ctx, a.ID, "bench")
	if err != nil {
		b.Fatal(err)
	}
	return tok
}

// apiCall sends a JSON request to /api/v1 with an API token and decodes the
// answer into out (when not nil); any status but want fails the benchmark.
func (s *benchServer) apiCall(b *testing.B, token, method, path string, body any, want int, out any) {
	b.Helper()
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			b.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.url+registryapi.Prefix+path, rd)
	if err != nil {
		b.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		b.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, rb)
	}
	if out != nil {
		if err := json.Unmarshal(rb, out); err != nil {
			b.Fatalf("%s %s: %v: %s", method, path, err, rb)
		}
	}
}

// createPublicListing creates a published public listing over repo.
func (s *benchServer) createPublicListing(b *testing.B, isvToken, listingName, repo string) {
	b.Helper()
	var l registryapi.Listing
	s.apiCall(b, isvToken, http.MethodPost, "/listings", map[string]any{
		"name": listingName, "summary": "benchmark IP " + listingName, "description": strings.Repeat("An accelerator. ", 8),
		"category": "ml", "board_model": "u250", "price_per_hour_micros": 3_600_000, "price_per_load_micros": 1000,
		"visibility": "public", "repository": repo,
	}, http.StatusCreated, &l)
	s.apiCall(b, isvToken, http.MethodPost, "/listings/"+l.ID+"/publish", nil, http.StatusOK, nil)
}

// pullEnv is the registry on Postgres + MinIO holding a 76 MiB image that a
// tenant may pull (public listing), a bearer token for it, and a minio-go
// client of the registry's bucket.
type pullEnv struct {
	reg      *benchServer
	repo     string
	tag      string
	token    string
	blobs    []string // digests: config, then layers
	bytes    int64    // one pull's blob bytes
	minio    *minio.Client
	bucket   string
	blobKeys []string // the S3 keys of blobs (s3store: blobs/sha256/<hex>)
}

// newPullEnv sets up the pull benchmarks; with redirect, the registry
// answers blob GETs with redirects to presigned URLs on the public endpoint
// localhost:<port> (another host name than the registry's 127.0.0.1, so that
// the clients' bearer token is not sent along; see
// server.Config.S3PublicEndpoint).
func newPullEnv(b *testing.B, redirect bool) *pullEnv {
	b.Helper()
	s3 := testenv.MinIO(b)
	const bucket = "bench-registry"
	cfg := server.Config{S3Endpoint: s3.Endpoint, S3AccessKey: s3.AccessKey, S3SecretKey: s3.SecretKey, S3Bucket: bucket}
	if redirect {
		cfg.S3Redirect = true
		cfg.S3PublicEndpoint = strings.Replace(s3.Endpoint, "127.0.0.1", "localhost", 1)
	}
	reg := startBench(b, cfg)
	ctx := context.Background()
	e := &pullEnv{reg: reg, repo: "isv/fpga-image", tag: "1", bucket: bucket}

	// Push the image as the ISV: two 38 MiB layers of random bytes.
	const isvPW = "isv-bench-password-1"
	isv, err := reg.srv.CreateUser(ctx, "isv", auth.RoleISV, isvPW)
	if err != nil {
		b.Fatal(err)
	}
	img := empty.Image
	rng := rand.NewChaCha8([32]byte{'f', 'a', 'a', 's'})
	for range pullLayers {
		data := make([]byte, pullLayerMiB<<20)
		_, _ = rng.Read(data)
		img, err = mutate.AppendLayers(img, static.NewLayer(data, types.OCILayer))
		if err != nil {
			b.Fatal(err)
		}
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
	ref, err := name.ParseReference(reg.host+"/"+e.repo+":"+e.tag, name.Insecure)
	if err != nil {
		b.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "isv", Password: isvPW})); err != nil {
		b.Fatalf("push: %v", err)
	}
	cfgDigest, err := img.ConfigName()
	if err != nil {
		b.Fatal(err)
	}
	e.blobs = append(e.blobs, cfgDigest.String())
	layers, err := img.Layers()
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			b.Fatal(err)
		}
		e.blobs = append(e.blobs, d.String())
	}
	img, layers = nil, nil // the 76 MiB are garbage from here on

	// A tenant pulls it through a published public listing.
	isvToken, err := reg.srv.Accounts().IssueToken(ctx, isv.ID, "bench")
	if err != nil {
		b.Fatal(err)
	}
	reg.createPublicListing(b, isvToken, "fpga-image", e.repo)
	const tenantPW = "tenant-bench-password-2"
	if _, err := reg.srv.CreateUser(ctx, "tenant", auth.RoleTenant, tenantPW); err != nil {
		b.Fatal(err)
	}
	e.token = bearerToken(b, reg.url, "tenant", tenantPW, "repository:"+e.repo+":pull")

	e.minio, err = minio.New(s3.Endpoint, &minio.Options{
		Creds: credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""), Region: s3.Region,
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range e.blobs {
		key := "blobs/sha256/" + strings.TrimPrefix(d, "sha256:")
		oi, err := e.minio.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
		if err != nil {
			b.Fatalf("blob object %s: %v", key, err)
		}
		e.blobKeys = append(e.blobKeys, key)
		e.bytes += oi.Size
	}
	return e
}

// bearerToken runs the Docker token flow with a password.
func bearerToken(b testing.TB, base, user, pw, scope string) string {
	b.Helper()
	q := url.Values{"service": {server.DefaultService}, "scope": {scope}}
	req, err := http.NewRequest(http.MethodGet, base+"/auth/token?"+q.Encode(), nil)
	if err != nil {
		b.Fatal(err)
	}
	req.SetBasicAuth(user, pw)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var tr struct {
		Token string `json:"token"`
	}
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("token: %d %s", resp.StatusCode, rb)
	}
	if err := json.Unmarshal(rb, &tr); err != nil || tr.Token == "" {
		b.Fatalf("token: %v %s", err, rb)
	}
	return tr.Token
}

func newClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns * 2
	tr.MaxIdleConnsPerHost = conns * 2
	return &http.Client{Transport: tr}
}

// runConcurrently runs f in n goroutines and returns the first error.
func runConcurrently(n int, f func() error) error {
	errs := make(chan error, n)
	for range n {
		go func() { errs <- f() }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// pull fetches the manifest and then every blob it names, as a client would,
// discarding the bodies.
func (e *pullEnv) pull(ctx context.Context, c *http.Client) (int64, error) {
	get := func(path, accept string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.reg.url+path, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+e.token)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			rb, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, rb)
		}
		return resp, nil
	}
	resp, err := get("/v2/"+e.repo+"/manifests/"+e.tag, string(types.OCIManifestSchema1)+", "+string(types.DockerManifestSchema2))
	if err != nil {
		return 0, err
	}
	var m struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	err = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("manifest: %w", err)
	}
	digests := []string{m.Config.Digest}
	for _, l := range m.Layers {
		digests = append(digests, l.Digest)
	}
	var n int64
	for _, d := range digests {
		resp, err := get("/v2/"+e.repo+"/blobs/"+d, "")
		if err != nil {
			return n, err
		}
		k, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// blobStatus is the status of a GET of the first layer, not following
// redirects.
func (e *pullEnv) blobStatus(b *testing.B) int {
	req, err := http.NewRequest(http.MethodGet, e.reg.url+"/v2/"+e.repo+"/blobs/"+e.blobs[1], nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// BenchmarkPull16 is 16 concurrent pulls of a 76 MiB image through the
// registry's HTTP API (bearer token obtained once; Postgres + MinIO behind).
func BenchmarkPull16(b *testing.B) { benchPull(b, false) }

// BenchmarkPull16Redirect is BenchmarkPull16 with the registry redirecting
// every blob GET to a presigned MinIO URL (server.Config.S3Redirect), which
// the client follows: the bytes go straight from MinIO to the client.
func BenchmarkPull16Redirect(b *testing.B) { benchPull(b, true) }

func benchPull(b *testing.B, redirect bool) {
	e := newPullEnv(b, redirect)
	c := newClient(pullers)
	defer c.CloseIdleConnections()
	ctx := context.Background()
	if n, err := e.pull(ctx, c); err != nil || n != e.bytes { // warm up, and check
		b.Fatalf("pull: %d bytes, want %d: %v", n, e.bytes, err)
	}
	if st := e.blobStatus(b); redirect != (st == http.StatusTemporaryRedirect) {
		b.Fatalf("blob GET answered %d (redirects on: %v)", st, redirect)
	}
	b.SetBytes(pullers * e.bytes)
	b.ResetTimer()
	for range b.N {
		err := runConcurrently(pullers, func() error {
			n, err := e.pull(ctx, c)
			if err == nil && n != e.bytes {
				err = fmt.Errorf("pulled %d bytes, want %d", n, e.bytes)
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPull16Replicas3 is BenchmarkPull16 with three registries (the
// first one's and two more, in this process) on the same database, bucket
// and key directory, the pulls spread over them round-robin; the bearer
// token, issued by the first, is accepted by all. On the benchmark machine
// the three share its two cores with MinIO and PostgreSQL, so the figure
// shows that replicas cost no throughput, not that they add any.
func BenchmarkPull16Replicas3(b *testing.B) {
	e := newPullEnv(b, false)
	first := e.reg.srv.Config()
	urls := []string{e.reg.url}
	for range 2 {
		cfg := server.Config{DatabaseURL: first.DatabaseURL, DataDir: first.DataDir, S3Endpoint: first.S3Endpoint,
			S3AccessKey: first.S3AccessKey, S3SecretKey: first.S3SecretKey, S3Bucket: first.S3Bucket}
		urls = append(urls, startBench(b, cfg).url)
	}
	c := newClient(pullers)
	defer c.CloseIdleConnections()
	ctx := context.Background()
	var next atomic.Int64
	pull := func() error {
		// Each pull on the next replica: its manifest and blobs there.
		r := *e
		reg := *e.reg
		reg.url = urls[next.Add(1)%int64(len(urls))]
		r.reg = &reg
		n, err := r.pull(ctx, c)
		if err == nil && n != e.bytes {
			err = fmt.Errorf("pulled %d bytes, want %d", n, e.bytes)
		}
		return err
	}
	for range urls { // warm up, and check every replica
		if err := pull(); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(pullers * e.bytes)
	b.ResetTimer()
	for range b.N {
		if err := runConcurrently(pullers, pull); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPull16MinIO is the baseline of BenchmarkPull16: 16 concurrent
// readers of the same blob objects straight from MinIO with minio-go's
// thinnest GET (Core.GetObject: the response body, no read-ahead goroutine).
func BenchmarkPull16MinIO(b *testing.B) {
	e := newPullEnv(b, false)
	ctx := context.Background()
	direct := func() error {
		var n int64
		for _, key := range e.blobKeys {
			obj, _, _, err := minio.Core{Client: e.minio}.GetObject(ctx, e.bucket, key, minio.GetObjectOptions{})
			if err != nil {
				return err
			}
			k, err := io.Copy(io.Discard, obj)
			obj.Close()
			n += k
			if err != nil {
				return err
			}
		}
		if n != e.bytes {
			return fmt.Errorf("read %d bytes, want %d", n, e.bytes)
		}
		return nil
	}
	if err := direct(); err != nil { // warm up, and check
		b.Fatal(err)
	}
	b.SetBytes(pullers * e.bytes)
	b.ResetTimer()
	for range b.N {
		if err := runConcurrently(pullers, direct); err != nil {
			b.Fatal(err)
		}
	}
}

// apiEnv is a registry (Postgres, directory store) with an ISV's 50
// published public listings and a tenant's API token.
type apiEnv struct {
	reg         *benchServer
	tenantToken string
}

func newAPIEnv(b *testing.B) *apiEnv {
	b.Helper()
	reg := startBench(b, server.Config{})
	isvToken := reg.apiToken(b, "isv", auth.RoleISV)
	for i := range 50 {
		reg.createPublicListing(b, isvToken, fmt.Sprintf("ip-%02d", i), fmt.Sprintf("isv/ip-%02d", i))
	}
	return &apiEnv{reg: reg, tenantToken: reg.apiToken(b, "tenant", auth.RoleTenant)}
}

// benchLoad drives path at loadRate for loadDuration per iteration
// (loadtest.Bench).
func benchLoad(b *testing.B, base, path, token string, check func(*http.Response, []byte) error) {
	c := newClient(loadWorkers)
	defer c.CloseIdleConnections()
	loadtest.Bench(b, c, func() (*http.Request, error) {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		return req, nil
	}, check, loadtest.Load{Rate: loadRate, Duration: loadDuration, Workers: loadWorkers})
}

// BenchmarkAPIListings is GET /api/v1/listings?limit=20 (a tenant with an API
// token; 50 public listings) under an open-loop load of 500 req/s.
func BenchmarkAPIListings(b *testing.B) {
	e := newAPIEnv(b)
	benchLoad(b, e.reg.url, registryapi.Prefix+"/listings?limit=20", e.tenantToken, func(resp *http.Response, body []byte) error {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		var page struct{ Items []json.RawMessage }
		if err := json.Unmarshal(body, &page); err != nil {
			return err
		}
		if len(page.Items) != 20 {
			return fmt.Errorf("%d listings, want 20", len(page.Items))
		}
		return nil
	})
}

// BenchmarkAPIHealthz is the baseline of BenchmarkAPIListings: the same load
// on /healthz, the server's floor (routing, middleware, plain HTTP).
func BenchmarkAPIHealthz(b *testing.B) {
	e := newAPIEnv(b)
	benchLoad(b, e.reg.url, "/healthz", e.tenantToken, func(resp *http.Response, body []byte) error {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		return nil
	})
}
