package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fpga-faas/faas/services/registry/meta"
)

// Policy decides what an account may do. Allowed returns the subset of
// actions (e.g. "pull", "push", "delete") that acct may perform on the
// repository repo; acct is nil for an anonymous request. An error is a
// failure to decide (the request fails), not a refusal.
type Policy interface {
	Allowed(ctx context.Context, acct *Account, repo string, actions []string) ([]string, error)
}

// Authenticator checks a request's credentials; *Store is one.
type Authenticator interface {
	AuthenticateRequest(r *http.Request) (*Account, error)
}

// DefaultTokenTTL is the lifetime of tokens from TokenHandler unless set.
const DefaultTokenTTL = 5 * time.Minute

// Limits on a token request.
const (
	maxScopes     = 32
	maxScopeLen   = 512
	maxActions    = 8
	maxRequestURI = 8 << 10
)

var (
	actionRE = regexp.MustCompile(`^(\*|[a-z]{1,32})$`)
	// Repository names as OCI distribution defines them.
	repoRE = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
)

// TokenHandler serves the Docker token endpoint (GET /auth/token, the
// distribution "token authentication specification"):
//
//	GET /auth/token?service=SERVICE&scope=repository:NAME:pull,push&scope=…[&account=NAME]
//
// Credentials come in HTTP Basic: the account name and either its password or
// one of its API tokens (a password starting with TokenPrefix is taken as an
// API token, and the user name must then be the token's account). Without an
// Authorization header the request is anonymous. For each repository scope,
// Policy decides which of the requested actions are granted; the token holds
// only those (possibly none, which is not an error, as the spec requires).
// Scopes of other types (e.g. registry:catalog:*) are granted nothing.
//
// Bad credentials answer 401 with a JSON error; the response never echoes a
// secret.
type TokenHandler struct {
	Keyring  *Keyring
	Accounts Authenticator
	Policy   Policy
	Service  string        // the audience of issued tokens; requests naming another service are refused
	TTL      time.Duration // DefaultTokenTTL when zero; capped at MaxTTL
	// DenyAnonymous refuses requests without credentials instead of asking
	// Policy with a nil account.
	DenyAnonymous bool
}

type tokenResponse struct {
	Token       string `json:"token"`
	AccessToken string `json:"access_token"`
	ExpiresIn   int    `json:"expires_in"`
	IssuedAt    string `json:"issued_at"`
}

// ServeHTTP implements http.Handler.
func (h *TokenHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		// POST (OAuth2 password grant) is not supported; containerd falls back to GET on 405.
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "use GET")
		return
	}
	if len(r.URL.RawQuery) > maxRequestURI {
		writeError(w, http.StatusBadRequest, "DENIED", "query too long")
		return
	}
	q := r.URL.Query()
	if svc := q.Get("service"); svc != "" && svc != h.Service {
		writeError(w, http.StatusBadRequest, "DENIED", "unknown service")
		return
	}
	scopes, err := parseScopes(q["scope"])
	if err != nil {
		writeError(w, http.StatusBadRequest, "DENIED", err.Error())
		return
	}

	acct, err := h.authenticate(r)
	if err != nil {
		switch {
		case errors.Is(err, ErrUnauthenticated):
			w.Header().Set("WWW-Authenticate", `Basic realm="`+quote(h.Service)+`"`)
			writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
		case errors.Is(err, ErrRateLimited):
			setRetryAfter(w, err)
			writeError(w, http.StatusTooManyRequests, "TOOMANYREQUESTS", "too many failed login attempts, try again later")
		case errors.Is(err, ErrBusy):
			setRetryAfter(w, err)
			writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "too many logins at once, try again later")
		case unavailable(w, err):
		default:
			writeError(w, http.StatusInternalServerError, "UNKNOWN", "authentication failed")
		}
		return
	}
	if a := q.Get("account"); a != "" && (acct == nil || a != acct.Name) {
		writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", "account does not match the credentials")
		return
	}

	var granted []Access
	for _, s := range scopes {
		if s.Type != "repository" {
			continue
		}
		allowed, err := h.Policy.Allowed(r.Context(), acct, s.Name, slices.Clone(s.Actions))
		if err != nil {
			if !unavailable(w, err) {
				writeError(w, http.StatusInternalServerError, "UNKNOWN", "authorization failed")
			}
			return
		}
		// Grant only what was both requested and allowed, whatever the policy returned.
		var acts []string
		for _, a := range s.Actions {
			if slices.Contains(allowed, a) {
				acts = append(acts, a)
			}
		}
		if len(acts) > 0 {
			granted = mergeAccess(granted, Access{Type: s.Type, Name: s.Name, Actions: acts})
		}
	}

	subject := ""
	if acct != nil {
		subject = acct.Name
	}
	ttl := h.TTL
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	tok, claims, err := h.Keyring.Issue(subject, h.Service, granted, ttl)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "UNKNOWN", "cannot issue token")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	_ = json.NewEncoder(w).Encode(tokenResponse{
		Token:       tok,
		AccessToken: tok,
		ExpiresIn:   int(claims.ExpiresAt.Sub(claims.IssuedAt.Time) / time.Second),
		IssuedAt:    claims.IssuedAt.UTC().Format(time.RFC3339),
	})
}

// authenticate returns the account of r's credentials (Basic, as the
// distribution token flow has clients send them; Bearer works too), nil
// when r has none (and anonymous requests are allowed), or an error
// wrapping ErrUnauthenticated.
func (h *TokenHandler) authenticate(r *http.Request) (*Account, error) {
	a, err := h.Accounts.AuthenticateRequest(r)
	if err == nil && a == nil && h.DenyAnonymous {
		return nil, ErrUnauthenticated
	}
	return a, err
}

// scope is one parsed "type:name:actions" request.
type scope struct {
	Type    string
	Name    string
	Actions []string
}

// parseScopes parses scope parameters; one parameter may hold several
// space-separated scopes (as some clients send them).
func parseScopes(params []string) ([]scope, error) {
	var out []scope
	for _, p := range params {
		for _, s := range strings.Fields(p) {
			if len(out) == maxScopes {
				return nil, fmt.Errorf("more than %d scopes", maxScopes)
			}
			if len(s) > maxScopeLen {
				return nil, errors.New("scope too long")
			}
			typ, rest, ok1 := strings.Cut(s, ":")
			i := strings.LastIndexByte(rest, ':')
			if !ok1 || i < 0 {
				return nil, fmt.Errorf("malformed scope %q", s)
			}
			name, acts := rest[:i], rest[i+1:]
			if typ == "" || name == "" {
				return nil, fmt.Errorf("malformed scope %q", s)
			}
			if typ == "repository" && !repoRE.MatchString(name) {
				return nil, fmt.Errorf("malformed repository name in scope %q", s)
			}
			var actions []string
			for _, a := range strings.Split(acts, ",") {
				if !actionRE.MatchString(a) {
					return nil, fmt.Errorf("malformed action in scope %q", s)
				}
				if !slices.Contains(actions, a) {
					actions = append(actions, a)
				}
			}
			if len(actions) > maxActions {
				return nil, fmt.Errorf("too many actions in scope %q", s)
			}
			out = append(out, scope{Type: typ, Name: name, Actions: actions})
		}
	}
	return out, nil
}

// mergeAccess adds a to list, joining the actions of an entry for the same resource.
func mergeAccess(list []Access, a Access) []Access {
	for i := range list {
		if list[i].Type == a.Type && list[i].Name == a.Name {
			for _, act := range a.Actions {
				if !slices.Contains(list[i].Actions, act) {
					list[i].Actions = append(list[i].Actions, act)
				}
			}
			return list
		}
	}
	return append(list, a)
}

// ErrorBody is the JSON of error responses, in the distribution spec's shape.
type ErrorBody struct {
	Errors []ErrorEntry `json:"errors"`
}

// ErrorEntry is one error of an ErrorBody.
type ErrorEntry struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ErrorBody{Errors: []ErrorEntry{{Code: code, Message: msg}}})
}

// unavailable answers err when the database cannot serve requests for now
// (meta.ErrUnavailable): 503, code UNAVAILABLE as for a busy login, with
// Retry-After and the cause. It reports whether it answered.
func unavailable(w http.ResponseWriter, err error) bool {
	cause, ok := meta.Cause(meta.Unavailable(err))
	if !ok {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(meta.RetryAfter/time.Second)))
	writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", meta.UnavailableMessage(cause))
	return true
}

// setRetryAfter sets the Retry-After header of a *RetryError.
func setRetryAfter(w http.ResponseWriter, err error) {
	if s, ok := RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(s))
	}
}

// quote escapes s for a quoted-string of an HTTP auth parameter.
func quote(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// Challenge returns a WWW-Authenticate value for Bearer token auth:
// Bearer realm="…",service="…",scope="…" (scope omitted when empty).
func Challenge(realm, service, scope string) string {
	s := `Bearer realm="` + quote(realm) + `",service="` + quote(service) + `"`
	if scope != "" {
		s += `,scope="` + quote(scope) + `"`
	}
	return s
}

// Scope formats a repository scope, "repository:NAME:a,b".
func Scope(repo string, actions []string) string {
	return "repository:" + repo + ":" + strings.Join(actions, ",")
}

// BearerAuthorizer checks the bearer tokens of registry requests.
type BearerAuthorizer struct {
	Keyring  *Keyring
	Audience string // the service name; tokens must carry it in aud
	// Realm is the absolute URL of the token endpoint for challenges. When
	// empty it is derived from the request: scheme (https when r.TLS is set)
	// + Host + "/auth/token".
	Realm string
}

// Authorize checks r's "Authorization: Bearer" token and that it grants every
// one of actions on repository repo (with repo "" only a valid token is
// required, as for GET /v2/). It returns the token's claims, or an error
// wrapping ErrUnauthorized (no or invalid token) or ErrDenied (valid token
// without the scope).
func (a BearerAuthorizer) Authorize(r *http.Request, repo string, actions ...string) (*Claims, error) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return nil, fmt.Errorf("%w: no bearer token", ErrUnauthorized)
	}
	c, err := a.Keyring.Verify(strings.TrimSpace(tok), a.Audience)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	if repo != "" && !c.Allows("repository", repo, actions...) {
		return c, fmt.Errorf("%w: token does not grant %s", ErrDenied, Scope(repo, actions))
	}
	return c, nil
}

// Challenge returns the WWW-Authenticate value of a 401 answer to r for
// repository repo and actions (no scope when repo is "").
func (a BearerAuthorizer) Challenge(r *http.Request, repo string, actions []string) string {
	realm := a.Realm
	if realm == "" {
		u := url.URL{Scheme: "http", Host: r.Host, Path: "/auth/token"}
		if r.TLS != nil {
			u.Scheme = "https"
		}
		realm = u.String()
	}
	scope := ""
	if repo != "" {
		scope = Scope(repo, actions)
	}
	return Challenge(realm, a.Audience, scope)
}
