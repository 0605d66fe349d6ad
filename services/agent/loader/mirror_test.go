package loader_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"

	"log/slog"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/cache"
	"github.com/fpga-faas/faas/services/agent/mirror"
)

// pullThrough is a caching registry mirror in the manner of dfdaemon or a
// registry's proxy mode: it answers blob GETs by digest, from its cache or
// else from the registry its ns parameter names, with the token the request
// carried; it can be told to flip a byte of some blobs it serves.
type pullThrough struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	blobs   map[string][]byte
	hits    map[string]int // served from its cache
	origin  map[string]int // fetched from the registry
	tamper  map[string]bool
	headers []http.Header
	urls    []string
}

func startPullThrough(t *testing.T) *pullThrough {
	p := &pullThrough{t: t, blobs: map[string][]byte{}, hits: map[string]int{}, origin: map[string]int{}, tamper: map[string]bool{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pullThrough) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.headers, p.urls = append(p.headers, r.Header.Clone()), append(p.urls, r.URL.String())
	p.mu.Unlock()
	ns := r.URL.Query().Get("ns")
	i := strings.LastIndex(r.URL.Path, "/blobs/")
	if r.Method != http.MethodGet || ns == "" || i < 0 {
		http.Error(w, "not a blob GET", http.StatusBadRequest)
		return
	}
	d := r.URL.Path[i+len("/blobs/"):]
	p.mu.Lock()
	b, ok := p.blobs[d]
	p.mu.Unlock()
	if ok {
		p.mu.Lock()
		p.hits[d]++
		p.mu.Unlock()
	} else {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+ns+r.URL.Path, nil)
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			http.Error(w, "origin: "+resp.Status, resp.StatusCode)
			return
		}
		if b, err = io.ReadAll(io.LimitReader(resp.Body, 64<<20)); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		p.mu.Lock()
		p.blobs[d] = b
		p.origin[d]++
		p.mu.Unlock()
	}
	p.mu.Lock()
	if p.tamper[d] {
		b = append([]byte(nil), b...)
		b[len(b)/2] ^= 0x01
	}
	p.mu.Unlock()
	w.Write(b)
}

func (p *pullThrough) count(m map[string]int, d string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return m[d]
}

func layersOf(t *testing.T, reg *registry, ref string) []string {
	t.Helper()
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, reg.isvAuth())
	if err != nil {
		t.Fatal(err)
	}
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range ls {
		d, _ := l.Digest()
		out = append(out, d.String())
	}
	return out
}

// mirrorLog collects log lines written from several goroutines.
type mirrorLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *mirrorLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *mirrorLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func mirrorTransport(t *testing.T, reg *registry, p *pullThrough, log *mirrorLog) (*mirror.Transport, *prometheus.Registry) {
	t.Helper()
	u, err := mirror.ParseURL(p.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	pr := prometheus.NewRegistry()
	tr, err := mirror.New(mirror.Config{Registry: reg.host, Mirrors: []*url.URL{u}, Metrics: mirror.NewMetrics(pr),
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return tr, pr
}

// TestLoadThroughMirror: a fleet's nodes pull layers from a caching
// mirror; a mirror that serves altered bytes fails the load with a digest
// error before any chip or record changes and leaves nothing in the node
// cache; a mirror that is down costs nothing but the fallback.
func TestLoadThroughMirror(t *testing.T) {
	f := newFixture(t)
	p := startPullThrough(t)
	var log mirrorLog
	tr, _ := mirrorTransport(t, f.reg, p, &log)
	a := newAgent(t, f.reg, agentOptions{boards: 2, transport: tr})

	if _, err := a.load("alice", f.loop.ref, intp(0)); err != nil {
		t.Fatal(err)
	}
	loopLayers := layersOf(t, f.reg, f.loop.ref)
	for _, d := range loopLayers {
		if p.count(p.origin, d) != 1 || !a.cache.Has(d) {
			t.Fatalf("layer %s: the mirror fetched it %d times from the registry (want 1), in the node cache: %v",
				d, p.count(p.origin, d), a.cache.Has(d))
		}
	}
	// A second node pulls the same image: the mirror serves it from its
	// cache, the registry serves no layer again.
	b := newAgent(t, f.reg, agentOptions{boards: 1, transport: tr})
	if _, err := b.load("alice", f.loop.ref, nil); err != nil {
		t.Fatal(err)
	}
	for _, d := range loopLayers {
		if p.count(p.hits, d) != 1 || p.count(p.origin, d) != 1 {
			t.Errorf("layer %s for the second node: %d mirror cache hits, %d registry fetches; want 1 and 1",
				d, p.count(p.hits, d), p.count(p.origin, d))
		}
	}

	// The mirror alters the dual image's layers.
	dualLayers := layersOf(t, f.reg, f.dual.ref)
	p.mu.Lock()
	for _, d := range dualLayers {
		p.tamper[d] = true
	}
	p.mu.Unlock()
	before := a.states()
	_, err := a.load("alice", f.dual.ref, nil)
	if !errors.Is(err, cache.ErrDigestMismatch) || code(err) != agentapi.CodeSignature {
		t.Fatalf("load through a tampering mirror: %v (code %q), want a digest mismatch, code %q", err, code(err), agentapi.CodeSignature)
	}
	if after := a.states(); !reflect.DeepEqual(after, before) {
		t.Fatalf("slots after the refused load:\n%+v\nwant as before:\n%+v", after, before)
	}
	for _, d := range dualLayers {
		if a.cache.Has(d) {
			t.Errorf("the node cache keeps tampered layer %s", d)
		}
		// The operator can tell which mirror served the bad bytes.
		if !strings.Contains(log.String(), `msg="blob from registry mirror" mirror=`+p.srv.URL+" digest="+d) {
			t.Errorf("no log line names the mirror that served layer %s:\n%s", d, log.String())
		}
	}

	// The mirror goes away: the layers come from the registry.
	p.srv.Close()
	res, err := a.load("alice", f.dual.ref, nil)
	if err != nil {
		t.Fatalf("load with the mirror down: %v", err)
	}
	if len(res.Slots) != 2 || res.Image.Digest != f.dual.digest {
		t.Fatalf("load with the mirror down: %+v", res)
	}
	for _, d := range dualLayers {
		if !a.cache.Has(d) {
			t.Errorf("layer %s not cached after the fallback load", d)
		}
	}

	// What the mirror saw: blob GETs with the registry's scoped token, never
	// a tenant's or the node's API token.
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range p.headers {
		if !strings.Contains(p.urls[i], "/blobs/sha256:") {
			t.Errorf("mirror got %s", p.urls[i])
		}
		if a := h.Get("Authorization"); !strings.HasPrefix(a, "Bearer ") {
			t.Errorf("mirror got Authorization %q for %s, want a bearer token", a, p.urls[i])
		}
		for who, secret := range f.reg.tokens {
			for k, vs := range h {
				for _, v := range vs {
					if strings.Contains(v, secret) {
						t.Errorf("mirror got %s's API token in %s", who, k)
					}
				}
			}
			if strings.Contains(p.urls[i], secret) {
				t.Errorf("mirror got %s's API token in %s", who, p.urls[i])
			}
		}
	}
}
