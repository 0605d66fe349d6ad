package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults of Config's zero values.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultIdleTimeout  = 30 * time.Second
	DefaultMaxRedirects = 3
)

// Errors of a mirror's answer. They reach a caller only as the error of a
// body read that stalled; everything before the body falls back to the
// registry.
var (
	// ErrTimeout: a mirror did not answer with headers in time.
	ErrTimeout = errors.New("registry mirror did not answer in time")
	// ErrStalled: a mirror's body sent nothing for Config.IdleTimeout.
	ErrStalled = errors.New("registry mirror stalled")
	// ErrRedirect: a mirror redirected too often or somewhere unusable.
	ErrRedirect = errors.New("registry mirror redirect refused")
)

// Config configures a Transport. Registry and Mirrors are required.
type Config struct {
	// Registry is the upstream registry's host[:port], as in image
	// references; requests to any other host pass through untouched.
	Registry string
	// Mirrors are tried in order (see ParseURL), then the registry.
	Mirrors []*url.URL
	// Base carries every request, to mirrors and to the registry; nil
	// means http.DefaultTransport. It should not follow redirects itself
	// (no http.RoundTripper does).
	Base http.RoundTripper
	// Timeout bounds the wait for a mirror's response headers, redirects
	// included; zero means DefaultTimeout.
	Timeout time.Duration
	// IdleTimeout bounds a silence while reading a mirror's body; zero
	// means DefaultIdleTimeout. A stall mid-body fails the read (the
	// bytes already given to the caller cannot be taken back).
	IdleTimeout time.Duration
	// MaxRedirects bounds the redirects followed from one mirror; zero
	// means DefaultMaxRedirects, negative none.
	MaxRedirects int
	// Header is added to every request to a mirror, as containerd's
	// [host.header] in hosts.toml; e.g. X-Dragonfly-Registry, which tells
	// dfdaemon the registry's scheme and host (ns has no scheme).
	Header http.Header
	// Metrics, if not nil, counts per mirror (NewMetrics).
	Metrics *Metrics
	Logger  *slog.Logger
}

// Transport sends blob GETs to mirrors first. See the package doc.
type Transport struct {
	cfg     Config
	log     *slog.Logger
	mirrors []*url.URL
	names   []string
}

// New returns a Transport.
func New(cfg Config) (*Transport, error) {
	if cfg.Registry == "" || len(cfg.Mirrors) == 0 {
		return nil, errors.New("mirror: Registry and Mirrors are required")
	}
	if cfg.Base == nil {
		cfg.Base = http.DefaultTransport
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	switch {
	case cfg.MaxRedirects == 0:
		cfg.MaxRedirects = DefaultMaxRedirects
	case cfg.MaxRedirects < 0:
		cfg.MaxRedirects = 0
	}
	for k := range cfg.Header {
		if k := http.CanonicalHeaderKey(k); k == "Authorization" || k == "Cookie" {
			return nil, fmt.Errorf("mirror: Header %s: mirrors get no credentials of their own", k)
		}
	}
	cfg.Header = cfg.Header.Clone()
	t := &Transport{cfg: cfg, log: cfg.Logger}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	for _, m := range cfg.Mirrors {
		// Revalidate: a Config may be built without ParseURL.
		u, err := ParseURL(m.String())
		if err != nil {
			return nil, err
		}
		t.mirrors, t.names = append(t.mirrors, u), append(t.names, u.String())
	}
	return t, nil
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || !strings.EqualFold(req.URL.Host, t.cfg.Registry) {
		return t.cfg.Base.RoundTrip(req)
	}
	_, digest, ok := blobPath(req.URL.Path)
	if !ok {
		return t.cfg.Base.RoundTrip(req)
	}
	ctx := req.Context()
	if a := req.Header.Get("Authorization"); a != "" && !isBearer(a) {
		// Long-lived credentials are for the registry only.
		for _, name := range t.names {
			t.cfg.Metrics.result(name, "skipped")
		}
		t.log.DebugContext(ctx, "registry mirror skipped: the request carries non-token credentials", "digest", digest)
		return t.cfg.Base.RoundTrip(req)
	}
	for i, m := range t.mirrors {
		resp, err := t.try(req, m, t.names[i], digest)
		if err == nil {
			t.cfg.Metrics.result(t.names[i], "served")
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		t.cfg.Metrics.result(t.names[i], "fallback")
		t.log.WarnContext(ctx, "registry mirror failed; trying the next source", "mirror", t.names[i], "digest", digest, "err", err)
	}
	return t.cfg.Base.RoundTrip(req)
}

func isBearer(a string) bool {
	scheme, _, ok := strings.Cut(a, " ")
	return ok && strings.EqualFold(scheme, "bearer")
}

// try asks mirror m for req's blob, following redirects within limits. It
// returns a response only for a 200 (206 to a range request), with a body
// that fails reads stalled longer than IdleTimeout.
func (t *Transport) try(req *http.Request, m *url.URL, name, digest string) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	headers := time.AfterFunc(t.cfg.Timeout, func() { cancel(fmt.Errorf("%w (%s)", ErrTimeout, t.cfg.Timeout)) })
	resp, via, err := t.follow(ctx, req, m)
	if !headers.Stop() || err != nil {
		if err == nil {
			resp.Body.Close()
		}
		if c := context.Cause(ctx); c != nil && req.Context().Err() == nil {
			err = c
		}
		cancel(nil)
		return nil, err
	}
	want := http.StatusOK
	if req.Header.Get("Range") != "" {
		want = http.StatusPartialContent
	}
	if resp.StatusCode != want {
		drain(resp.Body)
		cancel(nil)
		return nil, fmt.Errorf("registry mirror answered %s", resp.Status)
	}
	// Only the host a redirect led to: a presigned URL's query is a credential.
	t.log.InfoContext(ctx, "blob from registry mirror", "mirror", name, "digest", digest, "via", via)
	resp.Body = newBody(ctx, cancel, resp.Body, t.cfg.IdleTimeout, name, t.cfg.Metrics)
	resp.Request = req
	return resp, nil
}

// follow GETs the blob from mirror m and follows up to MaxRedirects
// redirects; via is the host that answered.
func (t *Transport) follow(ctx context.Context, req *http.Request, m *url.URL) (resp *http.Response, via string, err error) {
	u := *m
	u.Path = m.Path + req.URL.Path
	u.RawQuery = url.Values{"ns": {req.URL.Host}}.Encode()
	mreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", err
	}
	for k, v := range t.cfg.Header {
		mreq.Header[http.CanonicalHeaderKey(k)] = v
	}
	for _, h := range []string{"Accept", "Range", "User-Agent", "Authorization"} {
		if v := req.Header.Values(h); len(v) > 0 {
			mreq.Header[h] = v
		}
	}
	for hops := 0; ; hops++ {
		resp, err := t.cfg.Base.RoundTrip(mreq)
		if err != nil {
			return nil, "", err
		}
		switch resp.StatusCode {
		case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		default:
			return resp, mreq.URL.Host, nil
		}
		loc := resp.Header.Get("Location")
		drain(resp.Body)
		if hops >= t.cfg.MaxRedirects {
			return nil, "", fmt.Errorf("%w: more than %d redirects", ErrRedirect, t.cfg.MaxRedirects)
		}
		next, err := redirect(mreq.URL, loc)
		if err != nil {
			return nil, "", err
		}
		nreq, _ := http.NewRequestWithContext(ctx, http.MethodGet, next.String(), nil)
		nreq.Header = mreq.Header.Clone()
		if !strings.EqualFold(next.Host, mreq.URL.Host) {
			// A presigned URL or a peer carries its own authority; the
			// registry's token stays with the mirror it was given to.
			nreq.Header.Del("Authorization")
		}
		mreq = nreq
	}
}

// redirect resolves a mirror's Location against the URL it answered.
func redirect(from *url.URL, loc string) (*url.URL, error) {
	if loc == "" {
		return nil, fmt.Errorf("%w: no Location", ErrRedirect)
	}
	if len(loc) > 8192 {
		return nil, fmt.Errorf("%w: Location of %d bytes", ErrRedirect, len(loc))
	}
	l, err := url.Parse(loc)
	if err != nil {
		return nil, fmt.Errorf("%w: Location: %v", ErrRedirect, err)
	}
	next := from.ResolveReference(l)
	switch {
	case next.Scheme != "http" && next.Scheme != "https":
		return nil, fmt.Errorf("%w: to scheme %q", ErrRedirect, next.Scheme)
	case next.Host == "":
		return nil, fmt.Errorf("%w: to no host", ErrRedirect)
	case next.User != nil:
		return nil, fmt.Errorf("%w: to a URL with credentials", ErrRedirect)
	}
	next.Fragment, next.RawFragment = "", ""
	return next, nil
}

// drain reads a little of an unwanted body so that its connection can be
// reused, and closes it.
func drain(b io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(b, 64<<10))
	b.Close()
}
