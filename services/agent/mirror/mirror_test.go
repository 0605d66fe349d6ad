package mirror_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fpga-faas/faas/services/agent/mirror"
)

const (
	tenant   = "alice"
	password = "faas_long-lived-api-token"
	token    = "short-lived-pull-token"
)

var (
	blob   = bytes.Repeat([]byte("bitstream "), 1000)
	digest = func() string { h := sha256.Sum256(blob); return "sha256:" + hex.EncodeToString(h[:]) }()
)

// seen is what one server was asked.
type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (s *seen) add(r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r.Clone(context.Background()))
	s.mu.Unlock()
}

func (s *seen) all() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

func (s *seen) paths() []string {
	var out []string
	for _, r := range s.all() {
		out = append(out, r.Method+" "+r.URL.Path)
	}
	return out
}

// upstream is a registry that issues bearer tokens for basic credentials,
// as the platform's registry does (basicOnly: that asks for basic
// credentials on every request instead).
type upstream struct {
	*httptest.Server
	seen
	basicOnly bool
}

func startUpstream(t *testing.T, basicOnly bool) *upstream {
	u := &upstream{basicOnly: basicOnly}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.add(r)
		if r.URL.Path == "/token" {
			if user, pass, ok := r.BasicAuth(); !ok || user != tenant || pass != password {
				http.Error(w, "bad credentials", http.StatusUnauthorized)
				return
			}
			fmt.Fprintf(w, `{"token":%q,"expires_in":300}`, token)
			return
		}
		authorized := r.Header.Get("Authorization") == "Bearer "+token
		if basicOnly {
			user, pass, ok := r.BasicAuth()
			authorized = ok && user == tenant && pass == password
		}
		if !authorized {
			if basicOnly {
				w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
			} else {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="%s/token",service="registry"`, u.URL))
			}
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v2/":
		case "/v2/acme/loop/blobs/" + digest:
			w.Write(blob)
		case "/v2/acme/loop/manifests/1.0":
			w.Write([]byte(`{"upstream":"manifest"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) host() string { return strings.TrimPrefix(u.URL, "http://") }

// mirrorServer answers blob GETs with handler and records them.
type mirrorServer struct {
	*httptest.Server
	seen
}

func startMirror(t *testing.T, h http.HandlerFunc) *mirrorServer {
	m := &mirrorServer{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.add(r)
		h(w, r)
	}))
	t.Cleanup(m.Close)
	return m
}

func serveBlob(w http.ResponseWriter, r *http.Request) { w.Write(blob) }

func mustURL(t *testing.T, s string) *url.URL {
	u, err := mirror.ParseURL(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func newTransport(t *testing.T, up *upstream, cfg mirror.Config, mirrors ...string) (http.RoundTripper, *mirror.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Registry = up.host()
	cfg.Metrics = mirror.NewMetrics(reg)
	for _, m := range mirrors {
		cfg.Mirrors = append(cfg.Mirrors, mustURL(t, m))
	}
	tr, err := mirror.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr, cfg.Metrics, reg
}

// pull fetches the manifest and the blob the way the loader does: through
// go-containerregistry's token transport over tr, with the tenant's basic
// credentials.
func pull(t *testing.T, up *upstream, tr http.RoundTripper) ([]byte, error) {
	t.Helper()
	repo, err := name.NewRepository(up.host()+"/acme/loop", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	auth := &authn.Basic{Username: tenant, Password: password}
	rt, err := transport.NewWithContext(context.Background(), repo.Registry, auth, tr, []string{repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, err
	}
	c := &http.Client{Transport: rt}
	resp, err := c.Get(up.URL + "/v2/acme/loop/manifests/1.0")
	if err != nil {
		return nil, err
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(m) != `{"upstream":"manifest"}` {
		t.Fatalf("manifest: %d %q, want the upstream's", resp.StatusCode, m)
	}
	resp, err = c.Get(up.URL + "/v2/acme/loop/blobs/" + digest)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, transport.CheckError(resp, http.StatusOK)
	}
	return io.ReadAll(resp.Body)
}

// count sums the counter name over the series with result, or all of them
// when result is "".
func count(reg *prometheus.Registry, name, result string) float64 {
	mfs, _ := reg.Gather()
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := result == ""
			for _, l := range m.GetLabel() {
				ok = ok || l.GetName() == "result" && l.GetValue() == result
			}
			if ok {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

const requests = "faasd_registry_mirror_requests_total"

func TestBlobsGoToTheMirrorAndNothingElse(t *testing.T) {
	up := startUpstream(t, false)
	m := startMirror(t, serveBlob)
	tr, _, reg := newTransport(t, up, mirror.Config{Header: http.Header{"X-Dragonfly-Registry": {up.URL}}}, m.URL+"/dfdaemon")
	got, err := pull(t, up, tr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, blob) {
		t.Fatal("blob differs")
	}
	reqs := m.all()
	if len(reqs) != 1 {
		t.Fatalf("mirror got %v, want the blob GET only", m.paths())
	}
	r := reqs[0]
	if r.URL.Path != "/dfdaemon/v2/acme/loop/blobs/"+digest || r.URL.RawQuery != "ns="+url.QueryEscape(up.host()) {
		t.Errorf("mirror request %s, want /dfdaemon/v2/acme/loop/blobs/%s?ns=%s", r.URL, digest, up.host())
	}
	if h := r.Header.Get("X-Dragonfly-Registry"); h != up.URL {
		t.Errorf("mirror got X-Dragonfly-Registry %q, want %s", h, up.URL)
	}
	// The mirror needs the scoped token to fetch from the registry on a
	// miss; nothing else of the tenant's.
	if a := r.Header.Get("Authorization"); a != "Bearer "+token {
		t.Errorf("mirror got Authorization %q, want the scoped bearer token", a)
	}
	for _, p := range up.paths() {
		if strings.Contains(p, "/blobs/") {
			t.Errorf("upstream got %s: the mirror served the blob", p)
		}
	}
	if !contains(up.paths(), "GET /v2/acme/loop/manifests/1.0") || !contains(up.paths(), "GET /token") {
		t.Errorf("upstream got %v, want the manifest and the token request", up.paths())
	}
	if n := count(reg, requests, "served"); n != 1 {
		t.Errorf("served = %v, want 1", n)
	}
	if n := count(reg, "faasd_registry_mirror_bytes_total", ""); n != float64(len(blob)) {
		t.Errorf("mirror bytes = %v, want %d", n, len(blob))
	}
}

func TestNeverTheLongLivedCredentials(t *testing.T) {
	up := startUpstream(t, true)
	m := startMirror(t, serveBlob)
	tr, _, reg := newTransport(t, up, mirror.Config{}, m.URL)
	got, err := pull(t, up, tr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, blob) {
		t.Fatal("blob differs")
	}
	if len(m.all()) != 0 {
		t.Fatalf("mirror got %v from a pull with basic credentials, want nothing", m.paths())
	}
	if n := count(reg, requests, "skipped"); n != 1 {
		t.Errorf("skipped = %v, want 1", n)
	}
}

func TestRequestsElsewhereAreNotMirrored(t *testing.T) {
	up := startUpstream(t, false)
	m := startMirror(t, serveBlob)
	tr, _, _ := newTransport(t, up, mirror.Config{}, m.URL)
	other := startUpstream(t, false)
	for _, c := range []struct{ method, url string }{
		{"HEAD", up.URL + "/v2/acme/loop/blobs/" + digest},
		{"GET", up.URL + "/v2/acme/loop/blobs/" + strings.ToUpper(digest)},
		{"GET", up.URL + "/v2/acme/loop/blobs/uploads/"},
		{"GET", up.URL + "/v2/acme/loop/manifests/" + digest},
		{"GET", up.URL + "/v2/acme/loop/tags/list"},
		{"GET", up.URL + "/token?scope=repository:acme/loop/blobs/" + digest},
		{"GET", other.URL + "/v2/acme/loop/blobs/" + digest},
	} {
		req, _ := http.NewRequest(c.method, c.url, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.url, err)
		}
		resp.Body.Close()
	}
	if len(m.all()) != 0 {
		t.Fatalf("mirror got %v, want nothing", m.paths())
	}
}

func TestFallback(t *testing.T) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	down := startMirror(t, serveBlob)
	down.Close()
	for _, c := range []struct {
		name string
		h    http.HandlerFunc
		url  string
	}{
		{"404", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, ""},
		{"503", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "busy", 503) }, ""},
		{"401", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 401) }, ""},
		{"unreachable", nil, down.URL},
		{"timeout", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-block:
			case <-r.Context().Done():
			}
		}, ""},
		{"redirect loop", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, r.URL.String(), http.StatusTemporaryRedirect)
		}, ""},
		{"redirect to file", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "file:///etc/passwd")
			w.WriteHeader(http.StatusFound)
		}, ""},
		{"redirect without location", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusFound) }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := startUpstream(t, false)
			u := c.url
			if u == "" {
				u = startMirror(t, c.h).URL
			}
			tr, _, reg := newTransport(t, up, mirror.Config{Timeout: 200 * time.Millisecond}, u)
			got, err := pull(t, up, tr)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, blob) {
				t.Fatal("blob differs")
			}
			if !contains(up.paths(), "GET /v2/acme/loop/blobs/"+digest) {
				t.Errorf("upstream got %v, want the blob GET", up.paths())
			}
			// The bearer transport retries a 401 once with a fresh token.
			if n := count(reg, requests, "fallback"); n < 1 {
				t.Errorf("fallback = %v, want at least 1", n)
			}
		})
	}
}

func TestMirrorsInOrder(t *testing.T) {
	up := startUpstream(t, false)
	first := startMirror(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", 502) })
	second := startMirror(t, serveBlob)
	tr, _, _ := newTransport(t, up, mirror.Config{}, first.URL, second.URL)
	if _, err := pull(t, up, tr); err != nil {
		t.Fatal(err)
	}
	if len(first.all()) != 1 || len(second.all()) != 1 {
		t.Fatalf("mirrors got %v and %v, want one GET each", first.paths(), second.paths())
	}
	for _, p := range up.paths() {
		if strings.Contains(p, "/blobs/") {
			t.Errorf("upstream got %s", p)
		}
	}
}

func TestRedirectKeepsTheTokenAtTheMirror(t *testing.T) {
	up := startUpstream(t, false)
	peer := startMirror(t, serveBlob)
	var m *mirrorServer
	m = startMirror(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/local/") {
			// A same-host hop, by a relative Location.
			http.Redirect(w, r, peer.URL+"/piece?id=1", http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("Location", "/local"+r.URL.Path)
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
	tr, _, reg := newTransport(t, up, mirror.Config{}, m.URL)
	got, err := pull(t, up, tr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, blob) {
		t.Fatal("blob differs")
	}
	mreqs, preqs := m.all(), peer.all()
	if len(mreqs) != 2 || len(preqs) != 1 {
		t.Fatalf("mirror got %v, peer %v", m.paths(), peer.paths())
	}
	if mreqs[1].Header.Get("Authorization") != "Bearer "+token {
		t.Errorf("same-host redirect lost the token")
	}
	if a := preqs[0].Header.Get("Authorization"); a != "" {
		t.Errorf("the peer got Authorization %q, want none", a)
	}
	if n := count(reg, requests, "served"); n != 1 {
		t.Errorf("served = %v, want 1", n)
	}
}

func TestStalledBody(t *testing.T) {
	up := startUpstream(t, false)
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	m := startMirror(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(blob)))
		w.Write(blob[:100])
		w.(http.Flusher).Flush()
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	tr, _, _ := newTransport(t, up, mirror.Config{IdleTimeout: 100 * time.Millisecond}, m.URL)
	_, err := pull(t, up, tr)
	if !errors.Is(err, mirror.ErrStalled) || !strings.Contains(err.Error(), m.URL) {
		t.Fatalf("pull from a stalled mirror: %v, want ErrStalled naming the mirror", err)
	}
}

func TestCallerCancelDoesNotFallBack(t *testing.T) {
	up := startUpstream(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	m := startMirror(t, func(w http.ResponseWriter, r *http.Request) {
		cancel()
		<-r.Context().Done()
	})
	tr, _, _ := newTransport(t, up, mirror.Config{}, m.URL)
	req, _ := http.NewRequestWithContext(ctx, "GET", up.URL+"/v2/acme/loop/blobs/"+digest, nil)
	if _, err := tr.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("RoundTrip: %v, want context.Canceled", err)
	}
	if len(up.all()) != 0 {
		t.Errorf("upstream got %v after the caller gave up", up.paths())
	}
}

func TestParseURL(t *testing.T) {
	for s, want := range map[string]string{
		"http://127.0.0.1:65001":       "http://127.0.0.1:65001",
		"https://mirror.example/":      "https://mirror.example",
		"https://mirror.example/cache": "https://mirror.example/cache",
	} {
		u, err := mirror.ParseURL(s)
		if err != nil || u.String() != want {
			t.Errorf("ParseURL(%q) = %v, %v; want %s", s, u, err, want)
		}
	}
	for _, s := range []string{"", "127.0.0.1:65001", "ftp://m", "http://", "http://u:p@m", "http://m/?x=1", "http://m/#f",
		"http://m/v2", "unix:///run/d.sock", "http://m/%zz"} {
		if _, err := mirror.ParseURL(s); !errors.Is(err, mirror.ErrBadURL) {
			t.Errorf("ParseURL(%q): %v, want ErrBadURL", s, err)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestNewRefusesCredentialHeaders(t *testing.T) {
	m := mustURL(t, "http://127.0.0.1:65001")
	for _, h := range []string{"authorization", "Cookie"} {
		_, err := mirror.New(mirror.Config{Registry: "r:5000", Mirrors: []*url.URL{m}, Header: http.Header{h: {"x"}}})
		if err == nil {
			t.Errorf("New with Header %s: no error", h)
		}
	}
}
