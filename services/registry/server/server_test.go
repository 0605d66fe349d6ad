package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/server"
)

var testParams = auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type running struct {
	srv     *server.Server
	host    string // 127.0.0.1:port
	url     string // http://host
	metrics string // http://127.0.0.1:port of ServeMetrics
	logs    *syncBuffer
	stop    func() error
}

// start opens a registry on a fresh PostgreSQL (and cfg's blob store, a
// temporary directory by default) and serves it on a loopback port.
func start(t *testing.T, cfg server.Config) *running {
	t.Helper()
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = testenv.Postgres(t).URL
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.PasswordParams = testParams
	logs := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := context.Background()
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() { done <- srv.Serve(sctx, ln) }()
	go func() { done <- srv.ServeMetrics(sctx, mln) }()
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			for range 2 {
				select {
				case err := <-done:
					stopErr = errors.Join(stopErr, err)
				case <-time.After(time.Minute):
					stopErr = errors.Join(stopErr, errors.New("Serve or ServeMetrics did not return"))
				}
			}
			srv.Close()
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	host := ln.Addr().String()
	return &running{srv: srv, host: host, url: "http://" + host, metrics: "http://" + mln.Addr().String(), logs: logs, stop: stop}
}

func (r *running) user(t *testing.T, name string, role auth.Role, pw string) {
	t.Helper()
	if _, err := r.srv.CreateUser(context.Background(), name, role, pw); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func basic(user, pw string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pw))
}

func statusOf(err error) int {
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode
	}
	return 0
}

const (
	isvPW    = "isv-secret-password-1"
	tenantPW = "tenant-secret-password-2"
	adminPW  = "admin-secret-password-3"
)

func TestEndToEnd(t *testing.T) {
	r := start(t, server.Config{})
	ctx := context.Background()
	r.user(t, "isv1", auth.RoleISV, isvPW)
	r.user(t, "isv2", auth.RoleISV, isvPW+"x")
	r.user(t, "tenant1", auth.RoleTenant, tenantPW)
	r.user(t, "tenant2", auth.RoleTenant, tenantPW+"x")
	r.user(t, "admin1", auth.RoleAdmin, adminPW)
	isv := remote.WithAuth(&authn.Basic{Username: "isv1", Password: isvPW})
	isv2 := remote.WithAuth(&authn.Basic{Username: "isv2", Password: isvPW + "x"})
	tenant := remote.WithAuth(&authn.Basic{Username: "tenant1", Password: tenantPW})
	tenant2 := remote.WithAuth(&authn.Basic{Username: "tenant2", Password: tenantPW + "x"})
	admin := remote.WithAuth(&authn.Basic{Username: "admin1", Password: adminPW})

	t.Run("health", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz"} {
			if resp, body := get(t, r.url+p, nil); resp.StatusCode != 200 {
				t.Errorf("%s: %d %s", p, resp.StatusCode, body)
			}
		}
	})
	t.Run("request id", func(t *testing.T) {
		resp, _ := get(t, r.url+"/healthz", map[string]string{"X-Request-Id": "abc-123.X_y"})
		if got := resp.Header.Get("X-Request-Id"); got != "abc-123.X_y" {
			t.Errorf("echoed id %q", got)
		}
		resp, _ = get(t, r.url+"/healthz", map[string]string{"X-Request-Id": "bad id with spaces"})
		if got := resp.Header.Get("X-Request-Id"); len(got) != 32 {
			t.Errorf("generated id %q", got)
		}
		if !strings.Contains(r.logs.String(), `"request_id":"abc-123.X_y"`) {
			t.Error("request id not in the log")
		}
	})
	t.Run("anonymous", func(t *testing.T) {
		resp, _ := get(t, r.url+"/v2/", nil)
		ch := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != 401 || !strings.HasPrefix(ch, `Bearer realm="`+r.url+`/auth/token"`) || !strings.Contains(ch, `service="faas-registry"`) {
			t.Errorf("/v2/: %d %q", resp.StatusCode, ch)
		}
		resp, _ = get(t, r.url+"/v2/isv1/img/manifests/1", nil)
		ch = resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != 401 || !strings.Contains(ch, `scope="repository:isv1/img:pull"`) {
			t.Errorf("manifest: %d %q", resp.StatusCode, ch)
		}
		resp, _ = get(t, r.url+"/v2/_catalog", nil)
		if ch = resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 || !strings.Contains(ch, `scope="registry:catalog:*"`) {
			t.Errorf("catalog: %d %q", resp.StatusCode, ch)
		}
		resp, _ = get(t, r.url+"/v2/", map[string]string{"Authorization": "Bearer not.a.token"})
		if resp.StatusCode != 401 {
			t.Errorf("bad token: %d", resp.StatusCode)
		}
		// Anonymous token requests are refused; so are wrong passwords.
		resp, _ = get(t, r.url+"/auth/token?service=faas-registry&scope=repository:isv1/img:pull", nil)
		if resp.StatusCode != 401 {
			t.Errorf("anonymous token: %d", resp.StatusCode)
		}
		req, _ := http.NewRequest("GET", r.url+"/auth/token?service=faas-registry", nil)
		req.SetBasicAuth("isv1", "wrong-password")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("wrong password: %d", resp.StatusCode)
		}
	})

	ref, err := name.ParseReference(r.host+"/isv1/img:1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, isv); err != nil {
		t.Fatalf("owner push: %v", err)
	}
	wantDigest, _ := img.Digest()

	pull := func(opt remote.Option) error {
		desc, err := remote.Get(ref, opt)
		if err != nil {
			return err
		}
		if desc.Digest != wantDigest {
			t.Errorf("pulled %s, want %s", desc.Digest, wantDigest)
		}
		got, err := desc.Image()
		if err != nil {
			return err
		}
		layers, err := got.Layers()
		if err != nil {
			return err
		}
		rc, err := layers[0].Compressed()
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(io.Discard, rc)
		return err
	}

	t.Run("owner pulls", func(t *testing.T) {
		if err := pull(isv); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("others cannot push into a namespace", func(t *testing.T) {
		for who, opt := range map[string]remote.Option{"tenant": tenant, "other isv": isv2} {
			other, _ := name.ParseReference(r.host+"/isv1/img:evil", name.Insecure)
			err := remote.Write(other, img, opt)
			if st := statusOf(err); st != http.StatusForbidden {
				t.Errorf("%s push: status %d, err %v", who, st, err)
			}
		}
	})
	t.Run("tenant without entitlement cannot pull", func(t *testing.T) {
		if st := statusOf(pull(tenant)); st != http.StatusForbidden {
			t.Errorf("status %d", st)
		}
	})
	t.Run("catalog is admin-only", func(t *testing.T) {
		repos, err := remote.Catalog(ctx, ref.Context().Registry, admin)
		if err != nil || len(repos) != 1 || repos[0] != "isv1/img" {
			t.Errorf("admin catalog: %v %v", repos, err)
		}
		if _, err := remote.Catalog(ctx, ref.Context().Registry, isv); statusOf(err) != http.StatusForbidden {
			t.Errorf("isv catalog: %v", err)
		}
	})
	t.Run("admin pulls", func(t *testing.T) {
		if err := pull(admin); err != nil {
			t.Fatal(err)
		}
	})

	// A private listing over the repository with a share to tenant1.
	pool := r.srv.Pool()
	var listing string
	err = pool.QueryRow(ctx, `
		insert into listings (owner_id, repository_id, name)
		select a.id, r.id, 'img' from accounts a, repositories r
		where a.name = 'isv1' and r.name = 'isv1/img' returning id`).Scan(&listing)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `insert into entitlements (listing_id, account_id, kind)
		select $1, id, 'share' from accounts where name = 'tenant1'`, listing); err != nil {
		t.Fatal(err)
	}
	t.Run("entitled tenant pulls", func(t *testing.T) {
		if err := pull(tenant); err != nil {
			t.Fatal(err)
		}
		if st := statusOf(pull(tenant2)); st != http.StatusForbidden {
			t.Errorf("tenant2 status %d", st)
		}
		other, _ := name.ParseReference(r.host+"/isv1/img:2", name.Insecure)
		if st := statusOf(remote.Write(other, img, tenant)); st != http.StatusForbidden {
			t.Errorf("entitled tenant push: status %d", st)
		}
	})
	t.Run("revoked entitlement", func(t *testing.T) {
		if _, err := pool.Exec(ctx, `update entitlements set revoked_at = now()`); err != nil {
			t.Fatal(err)
		}
		if st := statusOf(pull(tenant)); st != http.StatusForbidden {
			t.Errorf("status %d", st)
		}
	})
	t.Run("public listing", func(t *testing.T) {
		if _, err := pool.Exec(ctx, `update listings set visibility = 'public', published = true where id = $1`, listing); err != nil {
			t.Fatal(err)
		}
		if err := pull(tenant2); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		// Not on the public listener, whoever asks.
		for _, hdr := range []map[string]string{nil, {"Authorization": "Basic " + basic("admin1", adminPW)}} {
			if resp, body := get(t, r.url+"/metrics", hdr); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "faas_registry") {
				t.Errorf("public /metrics: %d %.80q", resp.StatusCode, body)
			}
		}
		for _, p := range []string{"/", "/healthz", "/v2/", "/metrics/x"} {
			if resp, _ := get(t, r.metrics+p, nil); resp.StatusCode != http.StatusNotFound {
				t.Errorf("metrics listener %s: %d, want 404", p, resp.StatusCode)
			}
		}
		if got := r.srv.Config().MetricsListen; got != "127.0.0.1:5001" {
			t.Errorf("default MetricsListen %q, want loopback 127.0.0.1:5001", got)
		}
		resp, body := get(t, r.metrics+"/metrics", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		for _, want := range []string{
			`faas_registry_http_requests_total{code="201",method="PUT",route="v2_manifest"} 1`,
			`faas_registry_http_requests_total{code="401",method="GET",route="v2_base"}`,
			`faas_registry_http_requests_total{code="200",method="GET",route="auth_token"}`,
			`faas_registry_http_request_duration_seconds_bucket{method="GET",route="v2_blob"`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
	t.Run("logs hold no secrets", func(t *testing.T) {
		logs := r.logs.String()
		for _, secret := range []string{isvPW, tenantPW, adminPW, "Basic ", "Bearer ey"} {
			if strings.Contains(logs, secret) {
				t.Errorf("log contains %q", secret)
			}
		}
		if !strings.Contains(logs, `"route":"v2_manifest"`) {
			t.Error("no request log")
		}
	})
	t.Run("graceful shutdown", func(t *testing.T) {
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		if _, err := net.DialTimeout("tcp", r.host, time.Second); err == nil {
			t.Error("still accepting after shutdown")
		}
	})
}

func TestReadyzFailsWithoutDatabase(t *testing.T) {
	r := start(t, server.Config{})
	r.srv.Pool().Close()
	resp, _ := get(t, r.url+"/readyz", nil)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("readyz: %d", resp.StatusCode)
	}
	if resp, _ := get(t, r.url+"/healthz", nil); resp.StatusCode != 200 {
		t.Errorf("healthz: %d", resp.StatusCode)
	}
}

func TestManifestLimit(t *testing.T) {
	r := start(t, server.Config{MaxManifestBytes: 512})
	r.user(t, "isv1", auth.RoleISV, isvPW)
	req, _ := http.NewRequest(http.MethodGet, r.url+"/auth/token?service=faas-registry&scope=repository:isv1/img:pull,push", nil)
	req.SetBasicAuth("isv1", isvPW)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		Token string `json:"token"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || tok.Token == "" {
		t.Fatalf("token: %v", err)
	}
	body := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","annotations":{"x":"` + strings.Repeat("x", 1024) + `"}}`
	req, _ = http.NewRequest(http.MethodPut, r.url+"/v2/isv1/img/manifests/1", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized manifest: %d", resp.StatusCode)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := server.Open(context.Background(), server.Config{}); !errors.Is(err, server.ErrConfig) {
		t.Errorf("no database: %v", err)
	}
	if _, err := server.Open(context.Background(), server.Config{DatabaseURL: "postgres://x", TLSCert: "c"}); !errors.Is(err, server.ErrConfig) {
		t.Errorf("half TLS: %v", err)
	}
}

func TestMinIO(t *testing.T) {
	s3 := testenv.MinIO(t)
	r := start(t, server.Config{S3Endpoint: s3.Endpoint, S3AccessKey: s3.AccessKey, S3SecretKey: s3.SecretKey, S3Bucket: "reg"})
	r.user(t, "isv1", auth.RoleISV, isvPW)
	opt := remote.WithAuth(&authn.Basic{Username: "isv1", Password: isvPW})
	ref, _ := name.ParseReference(r.host+"/isv1/img:1", name.Insecure)
	img, err := random.Image(1<<16, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, opt); err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(ref, opt)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if d, _ := got.Digest(); d != want {
		t.Errorf("digest %s, want %s", d, want)
	}
	if resp, _ := get(t, r.url+"/readyz", nil); resp.StatusCode != 200 {
		t.Errorf("readyz: %d", resp.StatusCode)
	}
}

// redirectConfig is a registry on MinIO that redirects blob downloads to
// presigned URLs on the public endpoint localhost:<port>: another host name
// than the registry's 127.0.0.1, so clients drop their Authorization header
// on the way (see Config.S3PublicEndpoint).
func redirectConfig(t *testing.T) server.Config {
	s3 := testenv.MinIO(t)
	return server.Config{S3Endpoint: s3.Endpoint, S3AccessKey: s3.AccessKey, S3SecretKey: s3.SecretKey, S3Bucket: "reg",
		S3Redirect: true, S3PublicEndpoint: "http://" + strings.Replace(s3.Endpoint, "127.0.0.1", "localhost", 1)}
}

// redirects counts the 307 answers in the request log.
func (r *running) redirects() int { return strings.Count(r.logs.String(), `"status":307`) }

func TestMinIORedirect(t *testing.T) {
	r := start(t, redirectConfig(t))
	r.user(t, "isv1", auth.RoleISV, isvPW)
	opt := remote.WithAuth(&authn.Basic{Username: "isv1", Password: isvPW})
	ref, _ := name.ParseReference(r.host+"/isv1/img:1", name.Insecure)
	img, err := random.Image(1<<16, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, opt); err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(ref, opt)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := got.Layers()
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
	if _, err := got.ConfigFile(); err != nil {
		t.Fatal(err)
	}
	if n := r.redirects(); n < len(layers) {
		t.Errorf("%d redirects, want at least %d", n, len(layers))
	}
}

func TestOpenRedirectErrors(t *testing.T) {
	for _, cfg := range []server.Config{
		{DatabaseURL: "postgres://x", S3Redirect: true},
		{DatabaseURL: "postgres://x", S3Endpoint: "s3:9000", S3Redirect: true, S3PublicEndpoint: "ftp://s3.example.com"},
		{DatabaseURL: "postgres://x", S3Endpoint: "s3:9000", S3Redirect: true, S3PublicEndpoint: "https://s3.example.com/bucket"},
		{DatabaseURL: "postgres://x", S3Endpoint: "s3:9000", S3Redirect: true, S3PublicEndpoint: "s3.example.com/x"},
	} {
		if _, err := server.Open(context.Background(), cfg); !errors.Is(err, server.ErrConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}
