package portal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// Defaults of Config's zero values.
const (
	DefaultSessionTTL  = 12 * time.Hour
	DefaultSessionIdle = time.Hour
	DefaultMaxSessions = 16
	DefaultMaxUpload   = 2 << 30 // 2 GiB
	DefaultMaxUploads  = 2
)

// Tokens issues a registry access token for acct on repo with those of
// actions the registry's policy grants it, as /auth/token would.
type Tokens func(ctx context.Context, acct auth.Account, repo string, actions []string) (string, error)

// ErrConfig marks an unusable Config.
var ErrConfig = errors.New("portal: invalid configuration")

// Config configures the portal. API, Accounts and Pool are required; every
// other zero value is the default its comment names.
type Config struct {
	// API serves the marketplace API in process as a signed-in account.
	API API
	// Accounts checks sign-in passwords, under the registry's login
	// limits (per account and per client address).
	Accounts *auth.Store
	// Pool holds the sessions (migration 005).
	Pool *pgxpool.Pool
	// Registry is the registry's /v2 handler, through which browser
	// uploads are pushed in process; Tokens authorizes those pushes. Both
	// are required.
	Registry http.Handler
	Tokens   Tokens
	// UploadDir holds uploads while they are unpacked and pushed. Default
	// os.TempDir().
	UploadDir string
	// MaxUploadBytes bounds one uploaded image layout. Default
	// DefaultMaxUpload (2 GiB).
	MaxUploadBytes int64
	// MaxUploads bounds the uploads unpacked at once, over all accounts;
	// one account has one at a time. Default DefaultMaxUploads (2).
	MaxUploads int
	// Secure marks cookies Secure and names the session cookie with the
	// __Host- prefix: set it when the registry serves TLS (directly or
	// behind a proxy that does). Default false.
	Secure bool
	// SessionTTL is a session's absolute lifetime. Default
	// DefaultSessionTTL (12 h).
	SessionTTL time.Duration
	// SessionIdle ends a session unused this long. Default
	// DefaultSessionIdle (1 h).
	SessionIdle time.Duration
	// MaxSessions bounds the sessions of one account; signing in once
	// more ends the oldest. Default DefaultMaxSessions (16).
	MaxSessions int
	// Logger receives internal errors. Default: discard.
	Logger *slog.Logger
}

// Portal is the web portal, an http.Handler for every path the registry
// does not serve otherwise.
type Portal struct {
	cfg      Config
	api      *registryclient.Client // apiAs gives it its in-process transport
	log      *slog.Logger
	sessions *sessions
	uploads  *uploads
	pages    *pages
	table    []route
	handler  http.Handler
}

// New returns the portal over cfg.
func New(cfg Config) (*Portal, error) {
	if cfg.API == nil || cfg.Accounts == nil || cfg.Pool == nil || cfg.Registry == nil || cfg.Tokens == nil {
		return nil, fmt.Errorf("%w: API, Accounts, Pool, Registry and Tokens are required", ErrConfig)
	}
	if cfg.MaxUploadBytes <= 0 {
		cfg.MaxUploadBytes = DefaultMaxUpload
	}
	if cfg.MaxUploads <= 0 {
		cfg.MaxUploads = DefaultMaxUploads
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	pg, err := loadPages()
	if err != nil {
		return nil, err
	}
	api, err := registryclient.New(apiBase)
	if err != nil {
		return nil, err
	}
	p := &Portal{cfg: cfg, api: api, log: cfg.Logger, pages: pg, uploads: newUploads(cfg.MaxUploads),
		sessions: &sessions{pool: cfg.Pool, ttl: cfg.SessionTTL, idle: cfg.SessionIdle, max: cfg.MaxSessions}}
	p.handler = p.routes()
	return p, nil
}

// ServeHTTP implements http.Handler.
func (p *Portal) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.handler.ServeHTTP(w, r) }

// SweepSessions removes expired sessions; the registry runs it with its
// other sweeps.
func (p *Portal) SweepSessions(ctx context.Context) (int64, error) { return p.sessions.sweep(ctx) }

// cookieName is the session cookie's name: __Host- binds it to this host,
// path / and Secure, where browsers support it.
func (p *Portal) cookieName() string {
	if p.cfg.Secure {
		return "__Host-faas_session"
	}
	return "faas_session"
}

// signinCookie carries the sign-in form's CSRF token before a session exists
// (double submit).
func (p *Portal) signinCookie() string {
	if p.cfg.Secure {
		return "__Host-faas_signin"
	}
	return "faas_signin"
}

func (p *Portal) setCookie(w http.ResponseWriter, name, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: int(maxAge / time.Second),
		HttpOnly: true, Secure: p.cfg.Secure, SameSite: http.SameSiteLaxMode})
}

func (p *Portal) clearCookie(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: p.cfg.Secure, SameSite: http.SameSiteLaxMode})
}

// contentSecurityPolicy forbids inline script and style, and every origin
// but our own: what a listing's description smuggles in cannot run.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// secure sets the headers every answer carries.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

type sessionKey struct{}

// sessionOf returns the request's session, or nil when signed out.
func sessionOf(r *http.Request) *session {
	se, _ := r.Context().Value(sessionKey{}).(*session)
	return se
}

// withSession loads the session named by the cookie and, on every request
// that changes state, requires its CSRF token (form field csrf or header
// X-CSRF-Token); the sign-in form has its own (double submit).
func (p *Portal) withSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var se *session
		if c, err := r.Cookie(p.cookieName()); err == nil {
			se, err = p.sessions.get(r.Context(), c.Value)
			switch {
			case errors.Is(err, errNoSession):
				p.clearCookie(w, p.cookieName())
			case err != nil:
				p.fail(w, r, err)
				return
			}
		}
		if se != nil {
			r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, se))
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.URL.Path != "/signin" {
			if se == nil {
				p.redirectSignin(w, r)
				return
			}
			tok := r.Header.Get("X-CSRF-Token")
			if tok == "" && r.URL.Path == PublishPath {
				// The upload is streamed: its handler reads the token from
				// the form's first part before anything else.
				next.ServeHTTP(w, r)
				return
			}
			if tok == "" {
				tok = r.PostFormValue("csrf")
			}
			if !se.validCSRF(tok) {
				p.render(w, r, http.StatusForbidden, pageError, errorPage{Title: "Request refused",
					Message: "This form is out of date or did not come from this site. Reload the page and try again."})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// uploads bounds the uploads being ingested: MaxUploads in all, one an
// account.
type uploads struct {
	slots  chan struct{}
	mu     sync.Mutex
	active map[string]bool
}

func newUploads(n int) *uploads {
	return &uploads{slots: make(chan struct{}, n), active: map[string]bool{}}
}

// acquire takes a slot for account, or reports false when the account has
// one already or all are taken.
func (u *uploads) acquire(account string) (release func(), ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.active[account] {
		return nil, false
	}
	select {
	case u.slots <- struct{}{}:
	default:
		return nil, false
	}
	u.active[account] = true
	return func() {
		u.mu.Lock()
		delete(u.active, account)
		u.mu.Unlock()
		<-u.slots
	}, true
}

// redirectSignin sends a signed-out browser to sign in, and back after.
func (p *Portal) redirectSignin(w http.ResponseWriter, r *http.Request) {
	to := "/signin"
	if r.Method == http.MethodGet && r.URL.Path != "/" {
		to += "?next=" + urlQueryEscape(r.URL.RequestURI())
	}
	if r.Header.Get("HX-Request") == "true" {
		w.Header().Set("HX-Redirect", to)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// localPath reports whether next is a path on this site (no scheme, no
// host, no protocol-relative "//"), so that sign-in cannot redirect away.
func localPath(next string) bool {
	return strings.HasPrefix(next, "/") && !strings.HasPrefix(next, "//") && !strings.HasPrefix(next, "/\\") &&
		!strings.ContainsAny(next, "\r\n")
}

// requireRole wraps h: signed-out browsers go to sign-in; other roles than
// those listed get 403 (none listed: any signed-in account).
func (p *Portal) requireRole(h http.HandlerFunc, roles ...auth.Role) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		se := sessionOf(r)
		if se == nil {
			p.redirectSignin(w, r)
			return
		}
		if len(roles) > 0 {
			ok := false
			for _, role := range roles {
				ok = ok || se.account.Role == role
			}
			if !ok {
				p.render(w, r, http.StatusForbidden, pageError, errorPage{Title: "Not for this account",
					Message: fmt.Sprintf("This page is for %s accounts; you are signed in as %s (%s).", roleList(roles), se.account.Name, se.account.Role)})
				return
			}
		}
		h(w, r)
	}
}

func roleList(roles []auth.Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, " or ")
}

// apiRefusal returns err's refusal by the API: an answer other than a
// success, whose message is written for users. A call that got no
// answer, or a malformed one, is not one.
func apiRefusal(err error) (*registryclient.Error, bool) {
	var e *registryclient.Error
	return e, errors.As(err, &e) && e.Status >= 300
}

// fail answers an error: API refusals with their message and status (and
// Retry-After), a database that cannot serve requests for now
// (meta.ErrUnavailable, from the portal's own session store) with 503 and
// its cause as the API would, anything else as an internal error, logged.
func (p *Portal) fail(w http.ResponseWriter, r *http.Request, err error) {
	err = meta.Unavailable(err)
	if cause, ok := meta.Cause(err); ok {
		p.log.WarnContext(r.Context(), "portal: database unavailable", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.Any("err", err))
		err = &registryclient.Error{Status: http.StatusServiceUnavailable, Code: registryapi.CodeUnavailable,
			Message: meta.UnavailableMessage(cause), RetryAfter: meta.RetryAfter}
	}
	if ae, ok := apiRefusal(err); ok {
		if ae.Status == http.StatusUnauthorized {
			p.redirectSignin(w, r)
			return
		}
		title := http.StatusText(ae.Status)
		switch ae.Status {
		case http.StatusNotFound:
			title = "Not found"
		case http.StatusServiceUnavailable:
			title = "Unavailable for now"
		}
		if ae.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(ae.RetryAfter/time.Second)))
		}
		p.render(w, r, ae.Status, pageError, errorPage{Title: title, Message: ae.Message})
		return
	}
	p.log.ErrorContext(r.Context(), "portal: internal error", slog.String("method", r.Method),
		slog.String("path", r.URL.Path), slog.Any("err", err))
	p.render(w, r, http.StatusInternalServerError, pageError, errorPage{Title: "Something went wrong",
		Message: "The portal could not answer. Try again; if it persists, tell the operator the time of the error."})
}
