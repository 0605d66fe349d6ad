package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/clientip"
	"github.com/fpga-faas/faas/services/registry/keyrelease"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultLimit        = 50
	MaxLimit            = 200
	// DefaultPlatformFeeBasisPoints is the platform's share of what ISVs'
	// listings earn: 20%.
	DefaultPlatformFeeBasisPoints = 2000
)

// Sentinels; store and handler errors wrap them.
var (
	ErrNotFound        = errors.New("api: not found")
	ErrForbidden       = errors.New("api: forbidden")
	ErrInvalid         = errors.New("api: invalid")
	ErrConflict        = errors.New("api: conflict")
	ErrUnauthenticated = errors.New("api: unauthenticated")
	ErrConfig          = errors.New("api: invalid configuration")
	// ErrNodeUntrusted: the node is not approved or is revoked (403,
	// code node_untrusted), told apart so that a node can say so.
	ErrNodeUntrusted = errors.New("api: node untrusted")
)

// FieldError is a validation error naming the offending field; it wraps
// ErrInvalid.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return "api: invalid " + e.Field + ": " + e.Msg }
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Config configures the API.
type Config struct {
	DB *pgxpool.Pool // migrated database (required)
	// Accounts checks credentials and hashes the passwords of accounts
	// created through the API, under its own limits (required).
	Accounts *auth.Store
	Meta     *meta.Store // manifests of versions (required)
	// MaxBodyBytes caps request bodies. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// RequestID returns the request id of a request context (for the audit
	// log); nil: the X-Request-Id header is used.
	RequestID func(context.Context) string
	// Logger receives internal errors. Default: discard.
	Logger *slog.Logger
	// Attach configures the accelerator pool (/attachments); its zero
	// value is the documented defaults.
	Attach AttachConfig
	// KeyRelease releases sealed images' data keys to nodes
	// (POST /keys/release); nil: that route answers 404.
	KeyRelease *keyrelease.Releaser
	// PlatformFeeBasisPoints is the platform's fee on ISVs' revenue, in
	// hundredths of a percent, for months closed from now on (a closed
	// month keeps the fee it closed with). Default
	// DefaultPlatformFeeBasisPoints; negative: no fee; at most 10000.
	PlatformFeeBasisPoints int
	// WebhookAllowLoopback admits webhook URLs on loopback, plain http
	// included: for tests and development only (package webhooks).
	WebhookAllowLoopback bool
}

// API is the marketplace API; it is an http.Handler for paths under
// registryapi.Prefix.
type API struct {
	cfg  Config
	log  *slog.Logger
	st   *store
	e    *echo.Echo
	wake *wake // long polls of attachments and assignments
}

// New returns the API over cfg.
func New(cfg Config) (*API, error) {
	if cfg.DB == nil || cfg.Accounts == nil || cfg.Meta == nil {
		return nil, fmt.Errorf("%w: DB, Accounts and Meta are required", ErrConfig)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	switch {
	case cfg.PlatformFeeBasisPoints == 0:
		cfg.PlatformFeeBasisPoints = DefaultPlatformFeeBasisPoints
	case cfg.PlatformFeeBasisPoints < 0:
		cfg.PlatformFeeBasisPoints = 0
	case cfg.PlatformFeeBasisPoints > 10000:
		return nil, fmt.Errorf("%w: PlatformFeeBasisPoints %d is over 100%%", ErrConfig, cfg.PlatformFeeBasisPoints)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a := &API{
		cfg:  cfg,
		log:  cfg.Logger,
		st:   &store{db: cfg.DB, meta: cfg.Meta, accounts: cfg.Accounts, catalogIdx: &catalogIndex{db: cfg.DB}},
		wake: newWake(),
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Logger.SetOutput(io.Discard)
	e.HTTPErrorHandler = a.errorHandler
	e.Binder = nil
	a.e = e
	for _, res := range a.resources() {
		for _, rt := range res.routes {
			a.handle(rt)
		}
	}
	a.e.RouteNotFound(registryapi.Prefix+"/*", func(c echo.Context) error { return echo.ErrNotFound })
	return a, nil
}

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.e.ServeHTTP(w, r) }

// Route is a method and an echo path pattern (":id" parameters).
type Route struct{ Method, Path string }

// Routes lists the registered routes.
func (a *API) Routes() []Route {
	var out []Route
	for _, r := range a.e.Routes() {
		if strings.HasPrefix(r.Path, registryapi.Prefix) && r.Method != echo.RouteNotFound {
			out = append(out, Route{r.Method, r.Path})
		}
	}
	return out
}

type handler func(c echo.Context, p *principal) error

// paramRE matches an OpenAPI path parameter, "{id}", which echo writes ":id".
var paramRE = regexp.MustCompile(`\{(\w+)\}`)

// access says who may call a route at all: anonymous callers (with or
// without credentials), or authenticated ones of the listed roles (none:
// every role).
type access struct {
	anonymous bool
	roles     []auth.Role
	// refused, when set, is told of each authenticated caller refused:
	// for routes whose every attempt is audited.
	refused func(c echo.Context, p *principal, reason string)
}

// audited returns acc telling f of each caller it refuses.
func (acc access) audited(f func(c echo.Context, p *principal, reason string)) access {
	acc.refused = f
	return acc
}

func anyone() access              { return access{anonymous: true} }
func authed() access              { return access{} }
func roles(r ...auth.Role) access { return access{roles: r} }

// anonymousOr: anonymous callers, and authenticated ones of roles r.
func anonymousOr(r ...auth.Role) access { return access{anonymous: true, roles: r} }

// handle registers rt with echo, behind authentication and its access.
func (a *API) handle(rt route) {
	acc, method, path := rt.who, rt.method, rt.path
	echoPath := registryapi.Prefix + paramRE.ReplaceAllString(path, ":$1")
	a.e.Add(method, echoPath, func(c echo.Context) error {
		p, err := a.authenticate(c)
		if err != nil {
			return err
		}
		if p == nil && !acc.anonymous {
			return fmt.Errorf("%w: credentials required", ErrUnauthenticated)
		}
		if p != nil && len(acc.roles) > 0 {
			ok := false
			for _, r := range acc.roles {
				ok = ok || p.Role == r
			}
			if !ok {
				err := fmt.Errorf("%w: role %s may not %s %s", ErrForbidden, p.Role, method, path)
				if acc.refused != nil {
					acc.refused(c, p, message(err, ErrForbidden))
				}
				return err
			}
		}
		return rt.serve(c, p)
	})
}

// principal is the authenticated caller with request metadata for auditing.
type principal struct {
	auth.Account
	requestID string
	remote    string
}

func (p *principal) is(r auth.Role) bool { return p != nil && p.Role == r }

func (a *API) authenticate(c echo.Context) (*principal, error) {
	r := c.Request()
	ctx := r.Context()
	var acct auth.Account
	var err error
	if as, ok := serveAsAccount(ctx); ok {
		if as == nil {
			return nil, nil
		}
		// Looked up again, so that an account disabled since sign-in
		// stops at once.
		acct, err = a.cfg.Accounts.Lookup(ctx, as.Name)
		if errors.Is(err, auth.ErrNotFound) || (err == nil && acct.ID != as.ID) {
			return nil, fmt.Errorf("%w: account no longer exists", ErrUnauthenticated)
		}
		if err != nil {
			return nil, err
		}
		return a.principalOf(r, acct)
	}
	ap, err := a.cfg.Accounts.AuthenticateRequest(r)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return nil, fmt.Errorf("%w: %s", ErrUnauthenticated, auth.Reason(err))
	}
	if err != nil || ap == nil {
		return nil, err
	}
	return a.principalOf(r, *ap)
}

// principalOf makes the principal of an authenticated request.
func (a *API) principalOf(r *http.Request, acct auth.Account) (*principal, error) {
	ctx := r.Context()
	if acct.Disabled {
		return nil, fmt.Errorf("%w: invalid credentials", ErrUnauthenticated)
	}
	// Not c.RealIP(): it believes X-Forwarded-For from anyone.
	p := &principal{Account: acct, remote: clientip.String(clientip.FromRequest(r))}
	if a.cfg.RequestID != nil {
		p.requestID = a.cfg.RequestID(ctx)
	}
	if p.requestID == "" {
		p.requestID = r.Header.Get("X-Request-Id")
	}
	return p, nil
}

// setRetryAfter sets the Retry-After header of an auth.RetryError.
func setRetryAfter(c echo.Context, err error) {
	if s, ok := auth.RetryAfter(err); ok {
		c.Response().Header().Set("Retry-After", strconv.Itoa(s))
	}
}

func (a *API) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, info := a.classify(err, c)
	if status == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", `Basic realm="faas-registry", charset="UTF-8"`)
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = c.JSON(status, registryapi.ErrorBody{Error: info})
}

// message strips the "api: <sentinel>: " prefixes off a user-facing error.
func message(err error, sentinel error) string {
	m := err.Error()
	if i := strings.Index(m, sentinel.Error()+": "); i >= 0 {
		return m[i+len(sentinel.Error())+2:]
	}
	return strings.TrimPrefix(m, "api: ")
}

func (a *API) classify(err error, c echo.Context) (int, registryapi.ErrorInfo) {
	var fe *FieldError
	var he *echo.HTTPError
	var mbe *http.MaxBytesError
	// A fault of the database comes first: a store may have wrapped it in
	// a sentinel of the request (not found, conflict) on its way here, and
	// the client should retry rather than believe that answer. The stores
	// classify what they can; what reaches here unclassified is classified
	// by the same function.
	err = meta.Unavailable(err)
	if cause, ok := meta.Cause(err); ok {
		a.log.WarnContext(c.Request().Context(), "api: database unavailable",
			slog.String("method", c.Request().Method), slog.String("path", c.Path()), slog.Any("err", err))
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(meta.RetryAfter/time.Second)))
		return http.StatusServiceUnavailable, registryapi.ErrorInfo{Code: registryapi.CodeUnavailable, Message: meta.UnavailableMessage(cause)}
	}
	switch {
	case errors.As(err, &fe):
		return http.StatusUnprocessableEntity, registryapi.ErrorInfo{Code: registryapi.CodeInvalid, Message: fe.Field + ": " + fe.Msg, Field: fe.Field}
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, registryapi.ErrorInfo{Code: registryapi.CodeTooLarge, Message: fmt.Sprintf("request body larger than %d bytes", mbe.Limit)}
	case errors.Is(err, ErrUnsupportedType):
		return http.StatusUnsupportedMediaType, registryapi.ErrorInfo{Code: registryapi.CodeUnsupportedType, Message: message(err, ErrUnsupportedType)}
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized, registryapi.ErrorInfo{Code: registryapi.CodeUnauthenticated, Message: message(err, ErrUnauthenticated)}
	case errors.Is(err, ErrNodeUntrusted):
		return http.StatusForbidden, registryapi.ErrorInfo{Code: registryapi.CodeNodeUntrusted, Message: message(err, ErrNodeUntrusted)}
	case errors.Is(err, auth.ErrRateLimited):
		setRetryAfter(c, err)
		return http.StatusTooManyRequests, registryapi.ErrorInfo{Code: registryapi.CodeRateLimited, Message: "too many failed login attempts, try again later"}
	case errors.Is(err, auth.ErrBusy):
		setRetryAfter(c, err)
		return http.StatusServiceUnavailable, registryapi.ErrorInfo{Code: registryapi.CodeUnavailable, Message: "too many logins at once, try again later"}
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden, registryapi.ErrorInfo{Code: registryapi.CodeForbidden, Message: message(err, ErrForbidden)}
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, registryapi.ErrorInfo{Code: registryapi.CodeNotFound, Message: message(err, ErrNotFound)}
	case errors.Is(err, keyrelease.ErrNodeUntrusted):
		return http.StatusForbidden, registryapi.ErrorInfo{Code: registryapi.CodeNodeUntrusted, Message: message(err, keyrelease.ErrNodeUntrusted)}
	case errors.Is(err, keyrelease.ErrGrantInvalid):
		return http.StatusForbidden, registryapi.ErrorInfo{Code: registryapi.CodeGrantInvalid, Message: message(err, keyrelease.ErrGrantInvalid)}
	case errors.Is(err, keyrelease.ErrForbidden):
		return http.StatusForbidden, registryapi.ErrorInfo{Code: registryapi.CodeForbidden, Message: message(err, keyrelease.ErrForbidden)}
	case errors.Is(err, keyrelease.ErrNotFound):
		return http.StatusNotFound, registryapi.ErrorInfo{Code: registryapi.CodeNotFound, Message: message(err, keyrelease.ErrNotFound)}
	case errors.Is(err, keyrelease.ErrConflict):
		return http.StatusConflict, registryapi.ErrorInfo{Code: registryapi.CodeConflict, Message: message(err, keyrelease.ErrConflict)}
	case errors.Is(err, keyrelease.ErrInvalid):
		return http.StatusBadRequest, registryapi.ErrorInfo{Code: registryapi.CodeInvalid, Message: message(err, keyrelease.ErrInvalid)}
	case errors.Is(err, ErrSpendLimit):
		return http.StatusPaymentRequired, registryapi.ErrorInfo{Code: registryapi.CodeSpendLimit, Message: message(err, ErrSpendLimit)}
	case errors.Is(err, ErrGone):
		return http.StatusGone, registryapi.ErrorInfo{Code: registryapi.CodeAttachmentEnded, Message: message(err, ErrGone)}
	case errors.Is(err, ErrConflict):
		return http.StatusConflict, registryapi.ErrorInfo{Code: registryapi.CodeConflict, Message: message(err, ErrConflict)}
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest, registryapi.ErrorInfo{Code: registryapi.CodeInvalid, Message: message(err, ErrInvalid)}
	case errors.As(err, &he):
		switch he.Code {
		case http.StatusNotFound:
			return he.Code, registryapi.ErrorInfo{Code: registryapi.CodeNotFound, Message: "no such endpoint"}
		case http.StatusMethodNotAllowed:
			return he.Code, registryapi.ErrorInfo{Code: registryapi.CodeMethodNotAllowed, Message: "method not allowed"}
		case http.StatusServiceUnavailable:
			return he.Code, registryapi.ErrorInfo{Code: registryapi.CodeUnavailable, Message: "busy, try again"}
		}
		return he.Code, registryapi.ErrorInfo{Code: "error", Message: http.StatusText(he.Code)}
	}
	a.log.ErrorContext(c.Request().Context(), "api: internal error",
		slog.String("method", c.Request().Method), slog.String("path", c.Path()), slog.Any("err", err))
	return http.StatusInternalServerError, registryapi.ErrorInfo{Code: registryapi.CodeInternal, Message: "internal error"}
}

// decode reads the JSON body strictly into v.
func (a *API) decode(c echo.Context, v any) error {
	r := c.Request()
	body := http.MaxBytesReader(c.Response(), r.Body, a.cfg.MaxBodyBytes)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		var ute *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &mbe):
			return err
		case errors.Is(err, io.EOF):
			return fmt.Errorf("%w: empty body, want a JSON object", ErrInvalid)
		case errors.As(err, &ute):
			return fieldErr(ute.Field, "want %s", ute.Type)
		case errors.As(err, &se):
			return fmt.Errorf("%w: malformed JSON at offset %d", ErrInvalid, se.Offset)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return fieldErr(f, "unknown field")
		}
		return fmt.Errorf("%w: malformed JSON", ErrInvalid)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after the JSON object", ErrInvalid)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: trailing data after the JSON object", ErrInvalid)
	}
	return nil
}

// cursor is the keyset position of a page: the sort time and id of the
// last row returned.
type cursor struct {
	T  time.Time `json:"t"`
	ID string    `json:"i"`
}

func (k cursor) String() string {
	b, _ := json.Marshal(k)
	return base64.RawURLEncoding.EncodeToString(b)
}

type pageReq struct {
	limit int
	after *cursor
}

func parsePage(c echo.Context) (pageReq, error) {
	p := pageReq{limit: DefaultLimit}
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return p, fieldErr("limit", "want an integer in [1, %d]", MaxLimit)
		}
		p.limit = n
	}
	if s := c.QueryParam("cursor"); s != "" {
		b, err := base64.RawURLEncoding.DecodeString(s)
		var k cursor
		if err != nil || len(b) > 256 || json.Unmarshal(b, &k) != nil || k.ID == "" {
			return p, fieldErr("cursor", "malformed")
		}
		p.after = &k
	}
	return p, nil
}

// pageOf cuts rows (fetched with limit+1) to the page and sets next_cursor.
func pageOf[T any](rows []T, limit int, key func(T) cursor) registryapi.Page[T] {
	out := registryapi.Page[T]{Items: rows}
	if out.Items == nil {
		out.Items = []T{}
	}
	if len(rows) > limit {
		out.Items = rows[:limit]
		out.NextCursor = key(rows[limit-1]).String()
	}
	return out
}
