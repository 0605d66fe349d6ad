package distribution

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxManifestBytes     = 4 << 20
	DefaultMinBodyRate          = 16 << 10 // bytes per second
	DefaultMinBodyRateWindow    = 30 * time.Second
	DefaultMaxConcurrentUploads = 8
	DefaultMaxUploadSessions    = 64
	DefaultMaxStagedBytes       = 10 << 30
	DefaultUploadIdleTimeout    = time.Hour
	DefaultUploadBodyLease      = time.Minute
)

// Config configures the API. Meta, Blobs and Authorizer are required; the
// other zero values are the documented defaults.
type Config struct {
	Meta       *meta.Store
	Blobs      blob.Store
	Authorizer Authorizer // AllowAll for tests; see the package doc
	// MaxManifestBytes caps a manifest PUT body; larger ones answer 413.
	// 0: DefaultMaxManifestBytes.
	MaxManifestBytes int64
	// MaxChunkBytes caps the body of one upload request (POST, PATCH or
	// PUT); larger ones answer 413 SIZE_INVALID. 0: no limit of this
	// package (the caller's request limits apply).
	MaxChunkBytes int64
	// MinBodyRate is the slowest, in bytes per second averaged over each
	// MinBodyRateWindow the registry spends waiting for it, that an upload
	// or manifest body may arrive at; a slower one is cut and answers 408.
	// Time the registry spends elsewhere (storing what it read) does not
	// count. 0: DefaultMinBodyRate (16 KiB/s); negative: no minimum.
	MinBodyRate int64
	// MinBodyRateWindow: see MinBodyRate. 0: DefaultMinBodyRateWindow
	// (30 s).
	MinBodyRateWindow time.Duration
	// MaxConcurrentUploads bounds the requests of one account that send
	// upload bodies at a time (a POST with a digest, PATCH, PUT), across
	// all processes serving the API on the database; more answer 429
	// TOOMANYREQUESTS with Retry-After. 0: DefaultMaxConcurrentUploads
	// (8); negative: no limit.
	MaxConcurrentUploads int
	// MaxUploadSessions bounds the upload sessions one account has open
	// (monolithic uploads count while their body arrives); a POST beyond
	// answers 429 TOOMANYREQUESTS. 0: DefaultMaxUploadSessions (64);
	// negative: no limit.
	MaxUploadSessions int
	// MaxStagedBytes bounds the bytes one account has staged in open
	// uploads, counting the bodies in flight on every process; a body
	// that would go past it answers 429 TOOMANYREQUESTS (keeping what was
	// staged before the limit). 0: DefaultMaxStagedBytes (10 GiB);
	// negative: no limit.
	MaxStagedBytes int64
	// UploadBodyLease is how long an upload body in flight keeps counting
	// against its account's limits on other processes without a renewal
	// (Handler.RenewUploadLeases renews every third of it): a crashed
	// process's bodies stop counting once it has passed. 0:
	// DefaultUploadBodyLease (1 minute).
	UploadBodyLease time.Duration
	// UploadIdleTimeout is how long an upload session may go without
	// activity: then it is unknown (404 BLOB_UPLOAD_UNKNOWN), and
	// Handler.SweepUploads removes it and its staging. Sweeps must run
	// well within it: they also mark the sessions this process is writing
	// to as active. 0: DefaultUploadIdleTimeout (1 h).
	UploadIdleTimeout time.Duration
	// BlobRedirects answers a GET of a whole blob with 307 Temporary
	// Redirect to a short-lived URL of the blob store, when Blobs implements
	// blob.Redirector (s3store: a presigned URL), instead of streaming the
	// bytes through this process; authorization and the repository check
	// happen first as always. HEAD and GETs with a Range header are still
	// answered directly, so their semantics stay exactly this package's.
	// Off by default: it only works when every client can reach the store's
	// endpoint (see s3store.Options.PublicClient), the URL lets anyone who
	// holds it read the blob until it expires, and clients that resend
	// their Authorization header on redirects to the same host name (Go's
	// http.Client does, whatever the port) send it to the store too; see
	// the package doc.
	BlobRedirects bool
	// BlobRedirectExpiry is how long a redirect URL stays valid.
	// 0: blob.DefaultRedirectExpiry.
	BlobRedirectExpiry time.Duration
	// Logger receives one record per request. nil: no request logs.
	Logger *slog.Logger
}

// server holds the configured dependencies of the handlers.
type server struct {
	cfg    Config
	active *activeUploads
	// replica names this process in the records of its upload bodies.
	replica string
	// redirector is Blobs as a blob.Redirector when Config.BlobRedirects
	// is set and it is one; nil otherwise.
	redirector blob.Redirector
}

// New returns the handler of the API. It expects the full request path,
// so mount it at /v2/ without stripping the prefix.
func New(cfg Config) (*Handler, error) {
	if cfg.Meta == nil || cfg.Blobs == nil || cfg.Authorizer == nil {
		return nil, errors.New("distribution: Config needs Meta, Blobs and Authorizer")
	}
	if cfg.MaxManifestBytes <= 0 {
		cfg.MaxManifestBytes = DefaultMaxManifestBytes
	}
	if cfg.MinBodyRate == 0 {
		cfg.MinBodyRate = DefaultMinBodyRate
	}
	if cfg.MinBodyRateWindow <= 0 {
		cfg.MinBodyRateWindow = DefaultMinBodyRateWindow
	}
	if cfg.MaxConcurrentUploads == 0 {
		cfg.MaxConcurrentUploads = DefaultMaxConcurrentUploads
	}
	if cfg.MaxUploadSessions == 0 {
		cfg.MaxUploadSessions = DefaultMaxUploadSessions
	}
	if cfg.MaxStagedBytes == 0 {
		cfg.MaxStagedBytes = DefaultMaxStagedBytes
	}
	if cfg.UploadIdleTimeout <= 0 {
		cfg.UploadIdleTimeout = DefaultUploadIdleTimeout
	}
	if cfg.UploadBodyLease <= 0 {
		cfg.UploadBodyLease = DefaultUploadBodyLease
	}
	replica, err := replicaName()
	if err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, active: newActiveUploads(cfg.MaxConcurrentUploads), replica: replica}
	if r, ok := cfg.Blobs.(blob.Redirector); ok && cfg.BlobRedirects {
		s.redirector = r
	}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleEchoError
	e.Use(s.logRequests, s.commonHeaders)
	for _, p := range []string{"/v2", "/v2/"} {
		e.GET(p, s.base)
		e.HEAD(p, s.base)
	}
	// Repository names contain slashes, so everything else is routed by
	// route, on the whole path.
	e.Any("/v2/*", s.route)
	return &Handler{Handler: e, s: s}, nil
}

func (s *server) commonHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		return next(c)
	}
}

func (s *server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.cfg.Logger == nil {
			return next(c)
		}
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err) // write the answer now, so that the status is known
		}
		r := c.Request()
		s.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", c.Response().Status), slog.Int64("bytes", c.Response().Size),
			slog.Duration("duration", time.Since(start)))
		return nil
	}
}

// base answers the API version check.
func (s *server) base(c echo.Context) error {
	if err := s.authorize(c, ""); err != nil {
		return err
	}
	return c.JSONBlob(http.StatusOK, []byte("{}"))
}

// Path grammar of the specification.
var (
	nameRe   = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
	tagRe    = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)
	routeRes = []struct {
		re   *regexp.Regexp
		kind string
	}{
		{regexp.MustCompile(`^(.+)/tags/list$`), "tags"},
		{regexp.MustCompile(`^(.+)/manifests/([^/]+)$`), "manifest"},
		{regexp.MustCompile(`^(.+)/blobs/uploads/?$`), "uploads"},
		{regexp.MustCompile(`^(.+)/blobs/uploads/([^/]+)$`), "upload"},
		{regexp.MustCompile(`^(.+)/blobs/([^/]+)$`), "blob"},
		{regexp.MustCompile(`^(.+)/referrers/([^/]+)$`), "referrers"},
	}
)

// operations are the endpoints under a repository name, by route kind and
// method; the argument is the reference, digest or upload id of the path.
var operations = map[string]func(s *server, c echo.Context, name, arg string) error{
	"tags GET":        func(s *server, c echo.Context, name, _ string) error { return s.tags(c, name) },
	"manifest GET":    (*server).getManifest,
	"manifest HEAD":   (*server).getManifest,
	"manifest PUT":    (*server).putManifest,
	"manifest DELETE": (*server).deleteManifest,
	"uploads POST":    func(s *server, c echo.Context, name, _ string) error { return s.startUpload(c, name) },
	"upload GET":      (*server).uploadStatus,
	"upload PATCH":    (*server).patchUpload,
	"upload PUT":      (*server).putUpload,
	"upload DELETE":   (*server).cancelUpload,
	"blob GET":        (*server).getBlob,
	"blob HEAD":       (*server).getBlob,
	"blob DELETE":     (*server).deleteBlob,
	"referrers GET":   (*server).referrers,
}

// Operations returns the endpoints under /v2/<name>/ as "kind METHOD"
// (kinds: tags, manifest, uploads, upload, blob, referrers), plus
// "catalog GET" for /v2/_catalog, so that tests can prove each is covered.
func Operations() []string {
	ops := []string{"catalog GET"}
	for k := range operations {
		ops = append(ops, k)
	}
	slices.Sort(ops)
	return ops
}

// maxNameLength is the schema's limit on repository names.
const maxNameLength = 255

func (s *server) route(c echo.Context) error {
	path := strings.TrimPrefix(c.Request().URL.Path, "/v2/")
	if path == "_catalog" {
		if c.Request().Method != http.MethodGet {
			return errUnsupported()
		}
		return s.catalog(c)
	}
	for _, rt := range routeRes {
		m := rt.re.FindStringSubmatch(path)
		if m == nil {
			continue
		}
		name := m[1]
		if len(name) > maxNameLength || !nameRe.MatchString(name) {
			return apiError(http.StatusBadRequest, codeNameInvalid, "invalid repository name", name)
		}
		arg := ""
		if len(m) > 2 {
			arg = m[2]
		}
		method := c.Request().Method
		if op, ok := operations[rt.kind+" "+method]; ok {
			return op(s, c, name, arg)
		}
		return errUnsupported()
	}
	return apiError(http.StatusNotFound, codeNotFound, "no such endpoint", nil)
}

// authorize asks the Authorizer and turns its refusal into an API error.
func (s *server) authorize(c echo.Context, repo string, actions ...string) error {
	_, err := s.authorizeAccount(c, repo, actions...)
	return err
}

// authorizeAccount is authorize that also returns the account the request
// is authorized as ("" when the Authorizer does not tell), along with an
// error of status 403 too.
func (s *server) authorizeAccount(c echo.Context, repo string, actions ...string) (string, error) {
	var account string
	var err error
	if aa, ok := s.cfg.Authorizer.(AccountAuthorizer); ok {
		account, err = aa.AuthorizeAccount(c.Request(), repo, actions...)
	} else {
		err = s.cfg.Authorizer.Authorize(c.Request(), repo, actions...)
	}
	return account, s.authError(c, err, repo, actions)
}

// authError turns an Authorizer's refusal into an API error.
func (s *server) authError(c echo.Context, err error, repo string, actions []string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrUnauthorized):
		if ch, ok := s.cfg.Authorizer.(Challenger); ok {
			if v := ch.Challenge(c.Request(), repo, actions...); v != "" {
				c.Response().Header().Set("WWW-Authenticate", v)
			}
		}
		return apiError(http.StatusUnauthorized, codeUnauthorized, "authentication required", nil)
	case errors.Is(err, ErrDenied):
		return apiError(http.StatusForbidden, codeDenied, "requested access to the resource is denied", nil)
	default:
		return fmt.Errorf("authorize: %w", err)
	}
}

// Error codes of the specification.
const (
	codeBlobUnknown         = "BLOB_UNKNOWN"
	codeBlobUploadInvalid   = "BLOB_UPLOAD_INVALID"
	codeBlobUploadUnknown   = "BLOB_UPLOAD_UNKNOWN"
	codeDigestInvalid       = "DIGEST_INVALID"
	codeManifestBlobUnknown = "MANIFEST_BLOB_UNKNOWN"
	codeManifestInvalid     = "MANIFEST_INVALID"
	codeManifestUnknown     = "MANIFEST_UNKNOWN"
	codeNameInvalid         = "NAME_INVALID"
	codeNameUnknown         = "NAME_UNKNOWN"
	codeSizeInvalid         = "SIZE_INVALID"
	codeUnauthorized        = "UNAUTHORIZED"
	codeDenied              = "DENIED"
	codeUnsupported         = "UNSUPPORTED"
	codeRangeInvalid        = "RANGE_INVALID"
	codeTooManyRequests     = "TOOMANYREQUESTS"
	codeTagInvalid          = "TAG_INVALID" // ECR's, for a tag that may not move (docker knows it)
	codeNotFound            = "NOT_FOUND"   // a path outside the API
	codeUnknown             = "UNKNOWN"     // no better code: internal errors, full storage
	codeUnavailable         = "UNAVAILABLE" // ours: the database cannot answer for now (503)
)

// httpError is an API error answer: an HTTP status and one entry of the
// specification's error list.
type httpError struct {
	Status  int
	Code    string
	Message string
	Detail  any
}

func (e *httpError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func apiError(status int, code, message string, detail any) *httpError {
	return &httpError{Status: status, Code: code, Message: message, Detail: detail}
}

// storageFull answers a write the blob store refused for want of space:
// 507 Insufficient Storage, as MinIO answers the same condition. The
// specification has no error code for it, so the code is its catch-all
// UNKNOWN and the message says what is wrong.
func storageFull() *httpError {
	return apiError(http.StatusInsufficientStorage, codeUnknown,
		"storage full: the registry has no space left to store this upload; retry once space has been freed", nil)
}

// databaseUnavailable answers a request the metadata database could not
// serve for now (meta.ErrUnavailable): 503 with code UNAVAILABLE, which
// the specification does not list (clients show the message of codes they
// do not know) and which /auth/token already answers when logins are
// over their budget. The message names the cause; the caller sets
// Retry-After.
func databaseUnavailable(cause string) *httpError {
	return apiError(http.StatusServiceUnavailable, codeUnavailable, meta.UnavailableMessage(cause), nil)
}

func errUnsupported() *httpError {
	return apiError(http.StatusMethodNotAllowed, codeUnsupported, "the operation is unsupported", nil)
}

type errorBody struct {
	Errors []errorEntry `json:"errors"`
}

type errorEntry struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Detail  any    `json:"detail,omitempty"`
}

// handleEchoError writes every error, ours or echo's, in the spec's form.
func (s *server) handleEchoError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var ae *httpError
	var he *echo.HTTPError
	err = meta.Unavailable(err) // what the meta store left unclassified
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, meta.ErrUnavailable):
		cause, _ := meta.Cause(err)
		ae = databaseUnavailable(cause)
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(meta.RetryAfter/time.Second)))
		if s.cfg.Logger != nil {
			s.cfg.Logger.WarnContext(c.Request().Context(), "database unavailable",
				slog.String("method", c.Request().Method), slog.String("path", c.Request().URL.Path), slog.Any("err", err))
		}
	case errors.Is(err, blob.ErrStorageFull):
		ae = storageFull()
		if s.cfg.Logger != nil {
			s.cfg.Logger.ErrorContext(c.Request().Context(), "blob storage full",
				slog.String("method", c.Request().Method), slog.String("path", c.Request().URL.Path), slog.Any("err", err))
		}
	case errors.As(err, &he):
		switch he.Code {
		case http.StatusNotFound:
			ae = apiError(he.Code, codeNotFound, "no such endpoint", nil)
		case http.StatusMethodNotAllowed:
			ae = errUnsupported()
		default:
			ae = apiError(he.Code, codeUnsupported, fmt.Sprint(he.Message), nil)
		}
	default:
		ae = apiError(http.StatusInternalServerError, codeUnknown, "internal error", nil)
		if s.cfg.Logger != nil {
			s.cfg.Logger.ErrorContext(c.Request().Context(), "request failed",
				slog.String("method", c.Request().Method), slog.String("path", c.Request().URL.Path), slog.Any("err", err))
		}
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(ae.Status)
		return
	}
	body, _ := json.Marshal(errorBody{Errors: []errorEntry{{ae.Code, ae.Message, ae.Detail}}})
	_ = c.JSONBlob(ae.Status, body)
}

// drain reads what is left of a request body so that the connection can be
// reused after an early answer; it gives up after a bounded amount.
func drain(r io.Reader) { _, _ = io.CopyN(io.Discard, r, 1<<20) }
