package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// balancer is the round-robin reverse proxy of the replica tests, in front
// of registry processes. It records every request: which backend process
// served it and how it ended. A backend taken out (kill) gets no new
// requests; the requests it had in flight are marked, being the only ones
// allowed to fail.
type balancer struct {
	srv *httptest.Server

	mu       sync.Mutex
	backends []*backend
	next     int
	log      []*served
}

type backend struct {
	url      *url.URL
	gen      int // incarnation: restarts count up
	up       bool
	inflight map[*served]struct{}
}

// served is one proxied request.
type served struct {
	Backend, Gen int
	Method, Path string
	Status       int    // as answered (502 when the backend failed)
	Err          string // a transport or body error
	OnKilled     bool   // in flight on a backend when it was killed
	// ClientGone: the client cancelled the request (oras and crane cancel
	// a push's other requests when one fails).
	ClientGone bool
}

func newBalancer(t *testing.T, urls ...string) *balancer {
	t.Helper()
	b := &balancer{}
	for _, u := range urls {
		b.backends = append(b.backends, &backend{url: mustURL(t, u), up: true, inflight: map[*served]struct{}{}})
	}
	b.srv = httptest.NewServer(b)
	t.Cleanup(b.srv.Close)
	return b
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// host is where clients reach the balancer (host:port).
func (b *balancer) host() string { return b.srv.Listener.Addr().String() }

func (b *balancer) pick(r *http.Request) (*backend, *served, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for range b.backends {
		i := b.next % len(b.backends)
		b.next++
		be := b.backends[i]
		if !be.up {
			continue
		}
		rec := &served{Backend: i, Gen: be.gen, Method: r.Method, Path: r.URL.Path}
		be.inflight[rec] = struct{}{}
		b.log = append(b.log, rec)
		return be, rec, true
	}
	return nil, nil, false
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	be, rec, ok := b.pick(r)
	if !ok {
		http.Error(w, "no backend", http.StatusServiceUnavailable)
		return
	}
	defer func() {
		b.mu.Lock()
		delete(be.inflight, rec)
		b.mu.Unlock()
	}()
	target := be.url
	p := &httputil.ReverseProxy{
		// The registry derives its token realm and upload locations from
		// the Host the client used: keep it.
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			b.setResult(rec, resp.StatusCode, "")
			resp.Body = &recordingBody{ReadCloser: resp.Body, b: b, rec: rec}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				b.mu.Lock()
				rec.ClientGone = true
				b.mu.Unlock()
			}
			b.setResult(rec, http.StatusBadGateway, err.Error())
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.ServeHTTP(w, r)
}

func (b *balancer) setResult(rec *served, status int, err string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rec.Status = status
	if err != "" && rec.Err == "" {
		rec.Err = err
	}
}

// recordingBody records an answer body cut short (the backend died).
type recordingBody struct {
	io.ReadCloser
	b   *balancer
	rec *served
}

func (r *recordingBody) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		r.b.setResult(r.rec, r.rec.Status, "body: "+err.Error())
	}
	return n, err
}

// takeOut stops routing to backend i and marks its requests in flight.
func (b *balancer) takeOut(i int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	be := b.backends[i]
	be.up = false
	for rec := range be.inflight {
		rec.OnKilled = true
	}
	return len(be.inflight)
}

// putBack routes to backend i again, now at u.
func (b *balancer) putBack(t *testing.T, i int, u string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	be := b.backends[i]
	be.url, be.up = mustURL(t, u), true
	be.gen++
	be.inflight = map[*served]struct{}{}
}

// requests returns a copy of the log.
func (b *balancer) requests() []served {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]served, len(b.log))
	for i, r := range b.log {
		out[i] = *r
	}
	return out
}

func (b *balancer) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.log)
}
