package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/api"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/clientip"
	"github.com/fpga-faas/faas/services/registry/keyrelease"
	"github.com/fpga-faas/faas/services/registry/meta"
	"github.com/fpga-faas/faas/services/registry/portal"
)

// RequestIDHeader carries the request id in requests and responses.
const RequestIDHeader = "X-Request-Id"

type ctxKey struct{}

// RequestID returns the request id of ctx (set by the server's middleware),
// or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

func (s *Server) buildHandler() (http.Handler, error) {
	dist, err := s.newDistribution()
	if err != nil {
		return nil, err
	}
	s.dist = dist
	policy := NewPolicy(s.pool)
	tokens := &auth.TokenHandler{
		Keyring:       s.keyring,
		Accounts:      s.accounts,
		Policy:        policy,
		Service:       s.cfg.Service,
		TTL:           s.cfg.TokenTTL,
		DenyAnonymous: true,
	}
	release, err := keyrelease.New(keyrelease.Config{Pool: s.pool, Meta: s.meta, Blobs: s.blobs,
		Recipient: s.platform.Recipient, Logger: slog.New(minLevelHandler{s.log.Handler(), slog.LevelWarn})})
	if err != nil {
		return nil, err
	}
	market, err := api.New(api.Config{DB: s.pool, Accounts: s.accounts, Meta: s.meta,
		MaxBodyBytes: s.cfg.MaxBodyBytes, RequestID: RequestID, Attach: s.cfg.Attach, KeyRelease: release,
		PlatformFeeBasisPoints: s.cfg.PlatformFeeBasisPoints, WebhookAllowLoopback: s.cfg.Webhooks.AllowLoopback,
		Logger: slog.New(minLevelHandler{s.log.Handler(), slog.LevelWarn})})
	if err != nil {
		return nil, err
	}
	s.market = market
	s.metrics.reg.MustRegister(market.PoolCollector())

	site, err := portal.New(portal.Config{API: market, Accounts: s.accounts, Pool: s.pool,
		Registry: dist, Tokens: s.portalTokens(policy),
		Secure: s.cfg.TLSCert != "" || s.cfg.SecureCookies,
		Logger: slog.New(minLevelHandler{s.log.Handler(), slog.LevelWarn})})
	if err != nil {
		return nil, err
	}
	s.portal = site

	mux := http.NewServeMux()
	// The portal answers every path no other endpoint claims.
	mux.Handle("/", site)
	mux.Handle("/v2/", dist)
	mux.Handle(registryapi.Prefix+"/", market)
	mux.Handle("/auth/token", tokens)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := s.ready(r.Context()); err != nil {
			s.log.WarnContext(r.Context(), "not ready", slog.Any("err", err))
			w.WriteHeader(http.StatusServiceUnavailable)
			// Only this reason is told to anonymous callers; the others
			// may name hosts and are in the log.
			if errors.Is(err, blob.ErrStorageFull) {
				_, _ = io.WriteString(w, "not ready: blob storage is full\n")
				return
			}
			// The cause of a database fault names no host either.
			if cause, ok := meta.Cause(meta.Unavailable(err)); ok {
				_, _ = io.WriteString(w, "not ready: "+cause+"\n")
				return
			}
			_, _ = io.WriteString(w, "not ready\n")
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	return s.middleware(mux, s.metrics), nil
}

// portalTokens issues the portal's in-process pushes their registry
// tokens: what policy grants the account, as /auth/token would, for one
// repository and a few minutes.
func (s *Server) portalTokens(policy *Policy) portal.Tokens {
	return func(ctx context.Context, acct auth.Account, repo string, actions []string) (string, error) {
		granted, err := policy.Allowed(ctx, &acct, repo, actions)
		if err != nil {
			return "", err
		}
		tok, _, err := s.keyring.Issue(acct.Name, s.cfg.Service,
			[]auth.Access{{Type: "repository", Name: repo, Actions: granted}}, 5*time.Minute)
		return tok, err
	}
}

// routeClass names the kind of endpoint of path, a bounded label set.
func routeClass(path string) string {
	switch {
	case path == "/v2/" || path == "/v2":
		return "v2_base"
	case path == "/v2/_catalog":
		return "v2_catalog"
	case strings.HasPrefix(path, "/v2/"):
		switch {
		case strings.Contains(path, "/blobs/uploads"):
			return "v2_upload"
		case strings.Contains(path, "/blobs/"):
			return "v2_blob"
		case strings.Contains(path, "/manifests/"):
			return "v2_manifest"
		case strings.HasSuffix(path, "/tags/list"):
			return "v2_tags"
		case strings.Contains(path, "/referrers/"):
			return "v2_referrers"
		}
		return "v2_other"
	case path == "/auth/token":
		return "auth_token"
	case path == registryapi.Prefix+registryapi.KeyReleasePath:
		return "key_release"
	case strings.HasPrefix(path, registryapi.Prefix+"/"):
		return "api"
	case path == "/healthz", path == "/readyz":
		return path[1:]
	case path == portal.PublishPath:
		return "portal_upload"
	}
	return "portal"
}

func (s *Server) middleware(next http.Handler, m *metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		r.Header.Set(RequestIDHeader, id)
		w.Header().Set(RequestIDHeader, id)
		client := s.clients.Addr(r)
		ctx := clientip.NewContext(context.WithValue(r.Context(), ctxKey{}, id), client)
		r = r.WithContext(ctx)
		route := routeClass(r.URL.Path)
		// Blob upload bodies and manifests are limited by the distribution
		// API (MaxChunkBytes, MaxManifestBytes), browser uploads by the
		// portal (MaxUploadBytes); everything else here.
		if route != "v2_upload" && route != "v2_manifest" && route != "portal_upload" && r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		}
		rw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(rw, r)
		if rw.status == 0 {
			rw.status = http.StatusOK
		}
		d := time.Since(start)
		method := methodLabel(r.Method)
		m.requests.WithLabelValues(route, method, strconv.Itoa(rw.status)).Inc()
		if rw.status == http.StatusInsufficientStorage {
			m.storageRefused.Inc()
		}
		m.duration.WithLabelValues(route, method).Observe(d.Seconds())
		level := slog.LevelInfo
		if rw.status >= 500 {
			level = slog.LevelError
		}
		// No header values and no query string: they may hold credentials
		// or account names.
		attrs := []slog.Attr{
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.String("route", route),
			slog.Int("status", rw.status),
			slog.Int64("bytes", rw.bytes),
			slog.Duration("duration", d),
			slog.String("remote", clientip.String(client)),
		}
		if peer, _ := netip.ParseAddrPort(r.RemoteAddr); peer.Addr().Unmap() != client {
			attrs = append(attrs, slog.String("peer", r.RemoteAddr)) // a trusted proxy's
		}
		s.log.LogAttrs(ctx, level, "request", attrs...)
	})
}

func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// statusWriter records the status and size of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// ReadFrom implements io.ReaderFrom, so that the http.Server's own ReadFrom
// (sendfile, splice) stays reachable through the middleware.
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	rf, ok := w.ResponseWriter.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{w}, r)
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := rf.ReadFrom(r)
	w.bytes += n
	return n, err
}

// Flush implements http.Flusher.
func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestIDHandler adds the request id of a record's context.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// minLevelHandler drops records below min.
type minLevelHandler struct {
	slog.Handler
	min slog.Level
}

func (h minLevelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevelHandler{h.Handler.WithAttrs(as), h.min}
}

func (h minLevelHandler) WithGroup(name string) slog.Handler {
	return minLevelHandler{h.Handler.WithGroup(name), h.min}
}
