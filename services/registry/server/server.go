package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fpga-faas/faas/migrations"
	"github.com/fpga-faas/faas/services/registry/api"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/dirstore"
	"github.com/fpga-faas/faas/services/registry/blob/s3store"
	"github.com/fpga-faas/faas/services/registry/clientip"
	"github.com/fpga-faas/faas/services/registry/distribution"
	"github.com/fpga-faas/faas/services/registry/meta"
	"github.com/fpga-faas/faas/services/registry/portal"
	"github.com/fpga-faas/faas/services/registry/validation"
	"github.com/fpga-faas/faas/services/registry/webhooks"
)

// Defaults for the zero values of Config.
const (
	DefaultListen              = ":5000"
	DefaultDataDir             = "/var/lib/faas-registry"
	DefaultS3Bucket            = "faas-registry"
	DefaultS3Region            = "us-east-1"
	DefaultIssuer              = "faas-registry"
	DefaultService             = "faas-registry"
	DefaultReadHeaderTimeout   = 10 * time.Second
	DefaultReadTimeout         = 15 * time.Minute
	DefaultWriteTimeout        = 15 * time.Minute
	DefaultIdleTimeout         = 2 * time.Minute
	DefaultShutdownTimeout     = 30 * time.Second
	DefaultMaxBodyBytes        = 1 << 20 // 1 MiB
	DefaultMaxChunkBytes       = 8 << 30 // 8 GiB
	DefaultReadyTimeout        = 5 * time.Second
	DefaultMetricsListen       = "127.0.0.1:5001" // distribution's debug address, where it serves its metrics
	DefaultGCInterval          = 24 * time.Hour
	DefaultGCGracePeriod       = blob.DefaultGracePeriod // 2 hours
	DefaultUploadSweepInterval = 10 * time.Minute
	DefaultKeyReloadInterval   = 30 * time.Second
	DefaultKeyPublishDelay     = 2 * time.Minute
)

// MetricsOff as Config.MetricsListen serves no metrics.
const MetricsOff = "off"

// ErrConfig marks an unusable Config.
var ErrConfig = errors.New("server: invalid configuration")

// Config configures a registry server. Every zero value means the default
// named in its comment.
type Config struct {
	// Listen is the address the command listens on; Serve itself takes a
	// listener. Default DefaultListen (":5000").
	Listen string
	// MetricsListen is the address the command serves /metrics on
	// (ServeMetrics), apart from the public listener, which answers 404
	// there: metrics tell request rates, storage state and process details
	// to whoever reaches them, so they are exposed deliberately. MetricsOff
	// ("off") serves none. Default DefaultMetricsListen ("127.0.0.1:5001",
	// loopback only).
	MetricsListen string
	// DataDir holds the directory blob store (DataDir/blobs, when no S3
	// endpoint is set) and the default key directory. Default DefaultDataDir.
	DataDir string

	// S3Endpoint ("host:port") selects the S3 blob store; empty: dirstore
	// under DataDir/blobs.
	S3Endpoint  string
	S3AccessKey string
	S3SecretKey string
	// S3Bucket is created when missing. Default DefaultS3Bucket.
	S3Bucket string
	// S3Region default DefaultS3Region.
	S3Region string
	// S3Secure uses HTTPS to reach the S3 endpoint. Default false.
	S3Secure bool
	// S3Redirect answers GETs of whole blobs with 307 Temporary Redirect
	// to a presigned URL of the blob's S3 object, so that the bytes do not
	// pass through the registry (see distribution.Config.BlobRedirects;
	// HEAD and Range GETs are still served). It needs S3Endpoint, and every
	// client must be able to reach S3PublicEndpoint. Default false.
	S3Redirect bool
	// S3PublicEndpoint is where clients reach S3, for the redirect URLs:
	// "host:port" (HTTPS when S3Secure) or "http(s)://host[:port]". Its
	// host name should differ from the registry's: clients such as Go's
	// http.Client resend their Authorization header to the same host name
	// on any port, and S3 refuses a presigned URL that comes with one, so
	// the registry serves such requests itself instead of redirecting.
	// Default S3Endpoint.
	S3PublicEndpoint string
	// S3RedirectExpiry is the validity of redirect URLs. Default
	// blob.DefaultRedirectExpiry (10 minutes).
	S3RedirectExpiry time.Duration

	// DatabaseURL is the PostgreSQL connection string (required).
	DatabaseURL string

	// KeyDir holds the JWT signing keys (created with a first key when
	// missing). Default DataDir/keys. Replicas share it (a Kubernetes
	// Secret copied into every pod, say): each re-reads it every
	// KeyReloadInterval, and a key added there verifies from then on and
	// signs once it is older than KeyPublishDelay; a key marked retired or
	// removed stops verifying.
	KeyDir string
	// Attach configures the accelerator pool (api.AttachConfig: how long
	// a node may be silent, how often leases are checked); zero values are
	// its defaults.
	Attach api.AttachConfig
	// PlatformFeeBasisPoints is the platform's fee on ISVs' revenue, in
	// hundredths of a percent, for the months closed from now on
	// (api.Config). Default api.DefaultPlatformFeeBasisPoints (20%);
	// negative: no fee.
	PlatformFeeBasisPoints int
	// KeyReloadInterval is how often Serve re-reads KeyDir. Default
	// DefaultKeyReloadInterval (30 s); negative: never.
	KeyReloadInterval time.Duration
	// KeyPublishDelay is the age a key must reach before it signs; it must
	// exceed KeyReloadInterval plus the time a change of KeyDir takes to
	// reach every replica, so that all of them verify a key before any
	// signs with it. Default DefaultKeyPublishDelay (2 minutes); negative:
	// none, for a single registry.
	KeyPublishDelay time.Duration
	// PlatformKeyDir holds the platform's countersigning key and the X25519
	// key ISVs seal data keys to (created when missing; see
	// validation.LoadPlatformKeys). Default DataDir/platform-keys.
	PlatformKeyDir string

	// ValidationLease is how long a validation job stays claimed by this
	// process; after a crash its job waits this long before another worker
	// takes it over. Zero means validation.DefaultLease.
	ValidationLease time.Duration

	// Webhooks configures the delivery of webhooks (webhooks.Config; Pool
	// and Logger are the server's). Its AllowLoopback also lets the API
	// register loopback URLs: for tests and development only.
	Webhooks webhooks.Config

	// TLSCert and TLSKey are PEM files; when both are set Serve speaks TLS.
	TLSCert, TLSKey string
	// SecureCookies marks the portal's cookies Secure when TLS ends at a
	// proxy in front of the registry (with TLSCert they always are).
	// Default false.
	SecureCookies bool

	// Issuer is the iss of access tokens. Default DefaultIssuer.
	Issuer string
	// Service is the token audience and the service of challenges.
	// Default DefaultService.
	Service string
	// Realm is the absolute URL of the token endpoint put into challenges.
	// Default: derived from each request (scheme, Host, "/auth/token").
	Realm string
	// TokenTTL is the lifetime of access tokens. Default auth.DefaultTokenTTL.
	TokenTTL time.Duration

	// HTTP server timeouts. Defaults DefaultReadHeaderTimeout,
	// DefaultReadTimeout, DefaultWriteTimeout, DefaultIdleTimeout; a negative
	// value means no timeout.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// ShutdownTimeout bounds the graceful shutdown of Serve.
	// Default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// ReadyTimeout bounds the checks of /readyz. Default DefaultReadyTimeout.
	ReadyTimeout time.Duration

	// MaxBodyBytes caps request bodies of every endpoint except blob upload
	// chunks. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxChunkBytes caps the body of one blob upload request.
	// Default DefaultMaxChunkBytes.
	MaxChunkBytes int64
	// MaxManifestBytes caps a manifest. Default
	// distribution.DefaultMaxManifestBytes.
	MaxManifestBytes int64

	// GCInterval is how often Serve collects garbage (package gc): the
	// first collection runs min(GCInterval, 5 minutes) after the start,
	// then one every GCInterval; a replica that finds another collecting
	// skips its turn. Default DefaultGCInterval (24 hours); negative: never.
	GCInterval time.Duration
	// GCGracePeriod spares blobs committed, linked or held more recently;
	// it must exceed the longest push, from its first blob to its
	// manifest. Default (also for negative values) DefaultGCGracePeriod
	// (2 hours).
	GCGracePeriod time.Duration
	// MinBodyRate and MinBodyRateWindow: upload and manifest bodies slower
	// than MinBodyRate bytes per second over a window are cut (408).
	// Defaults distribution.DefaultMinBodyRate (16 KiB/s) and
	// distribution.DefaultMinBodyRateWindow (30 s); a negative rate: no
	// minimum.
	MinBodyRate       int64
	MinBodyRateWindow time.Duration
	// MaxConcurrentUploads bounds the upload bodies one account sends at a
	// time; more answer 429. Default
	// distribution.DefaultMaxConcurrentUploads (8); negative: no limit.
	MaxConcurrentUploads int
	// MaxUploadSessions and MaxStagedBytes bound the open upload sessions
	// of one account and the bytes staged in them. Defaults
	// distribution.DefaultMaxUploadSessions (64) and
	// distribution.DefaultMaxStagedBytes (10 GiB); negative: no limit.
	MaxUploadSessions int
	MaxStagedBytes    int64
	// UploadIdleTimeout is how long an upload session may stay without
	// activity before it expires. Default
	// distribution.DefaultUploadIdleTimeout (1 h).
	UploadIdleTimeout time.Duration
	// UploadBodyLease is how long the upload bodies a replica receives
	// keep counting against their accounts' limits (MaxConcurrentUploads,
	// MaxStagedBytes, shared by all replicas through the database) after
	// its last renewal; Serve renews every third of it, and a crashed
	// replica's bodies stop counting once it has passed. Default
	// distribution.DefaultUploadBodyLease (1 minute).
	UploadBodyLease time.Duration
	// UploadSweepInterval is how often Serve sweeps upload sessions: it
	// ends expired ones and removes their staging, and removes staging no
	// session names (distribution.Handler.SweepUploads); it also sweeps
	// once at start. Keep it well within UploadIdleTimeout. Default
	// DefaultUploadSweepInterval (10 minutes); negative: never.
	UploadSweepInterval time.Duration

	// PasswordParams are the argon2id costs of new password hashes; the zero
	// value means auth.DefaultParams. Tests lower them.
	PasswordParams auth.Params
	// PasswordLimits guard every password check (token endpoint, /api/v1,
	// key release): the memory budget of concurrent hashing and the
	// lockouts after failures, per account and per client address. Zero
	// fields take the defaults of auth.Limits.
	PasswordLimits auth.Limits

	// TrustedProxies are the networks of reverse proxies whose
	// X-Forwarded-For and X-Real-IP headers name the client (for the audit
	// log, the request log and the per-address login limits). Default none:
	// the client is the socket peer and those headers are ignored.
	TrustedProxies []netip.Prefix

	// Logger receives request logs and errors. Default: discard.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	defD := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		} else if *p < 0 {
			*p = 0
		}
	}
	def(&c.Listen, DefaultListen)
	def(&c.MetricsListen, DefaultMetricsListen)
	def(&c.DataDir, DefaultDataDir)
	def(&c.S3Bucket, DefaultS3Bucket)
	def(&c.S3Region, DefaultS3Region)
	def(&c.KeyDir, filepath.Join(c.DataDir, "keys"))
	def(&c.PlatformKeyDir, filepath.Join(c.DataDir, "platform-keys"))
	def(&c.Issuer, DefaultIssuer)
	def(&c.Service, DefaultService)
	defD(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	defD(&c.ReadTimeout, DefaultReadTimeout)
	defD(&c.WriteTimeout, DefaultWriteTimeout)
	defD(&c.IdleTimeout, DefaultIdleTimeout)
	defD(&c.ShutdownTimeout, DefaultShutdownTimeout)
	defD(&c.ReadyTimeout, DefaultReadyTimeout)
	defD(&c.GCInterval, DefaultGCInterval)
	if c.GCGracePeriod <= 0 {
		c.GCGracePeriod = DefaultGCGracePeriod
	}
	if c.UploadSweepInterval == 0 {
		c.UploadSweepInterval = DefaultUploadSweepInterval
	}
	if c.KeyReloadInterval == 0 {
		c.KeyReloadInterval = DefaultKeyReloadInterval
	}
	defD(&c.KeyPublishDelay, DefaultKeyPublishDelay)
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxChunkBytes <= 0 {
		c.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if c.PasswordParams == (auth.Params{}) {
		c.PasswordParams = auth.DefaultParams
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Server is an opened registry: its database pool, blob store and keyring.
type Server struct {
	cfg      Config
	log      *slog.Logger
	pool     *pgxpool.Pool
	meta     *meta.Store
	blobs    blob.Store
	accounts *auth.Store
	keyring  *auth.Keyring
	platform validation.PlatformKeys
	worker   *validation.Worker
	hooks    *webhooks.Worker
	metrics  *metrics
	clients  clientip.Resolver
	dist     *distribution.Handler
	portal   *portal.Portal
	market   *api.API
	handler  http.Handler
}

// Open connects to the database, applies the migrations, opens the blob store
// (creating the S3 bucket when missing) and loads the keyring from
// Config.KeyDir, creating a first key when there is none. Close releases it.
func Open(ctx context.Context, cfg Config) (_ *Server, err error) {
	cfg.setDefaults()
	if cfg.DatabaseURL == "" {
		return nil, fmt.Errorf("%w: no database URL", ErrConfig)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, fmt.Errorf("%w: TLS needs both a certificate and a key", ErrConfig)
	}
	if cfg.S3Redirect && cfg.S3Endpoint == "" {
		return nil, fmt.Errorf("%w: S3 redirects need an S3 endpoint", ErrConfig)
	}
	pubHost, pubSecure := cfg.S3Endpoint, cfg.S3Secure
	if cfg.S3Redirect && cfg.S3PublicEndpoint != "" {
		if pubHost, pubSecure, err = parseEndpoint(cfg.S3PublicEndpoint, cfg.S3Secure); err != nil {
			return nil, fmt.Errorf("%w: S3 public endpoint: %v", ErrConfig, err)
		}
	}
	s := &Server{cfg: cfg, log: slog.New(requestIDHandler{cfg.Logger.Handler()}), metrics: newMetrics(),
		clients: clientip.Resolver{Trusted: cfg.TrustedProxies}}
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		// The URL may hold a password: do not quote it.
		return nil, fmt.Errorf("%w: unparsable database URL", ErrConfig)
	}
	s.pool, err = pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("server: database: %w", err)
	}
	defer func() {
		if err != nil {
			s.pool.Close()
		}
	}()
	if err := s.pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("server: database: %w", err)
	}
	if err := migrations.ApplyPool(ctx, s.pool); err != nil {
		return nil, fmt.Errorf("server: migrations: %w", err)
	}
	s.meta = meta.New(s.pool)
	s.accounts, err = auth.NewStore(s.pool, auth.WithParams(cfg.PasswordParams), auth.WithLimits(cfg.PasswordLimits))
	if err != nil {
		return nil, fmt.Errorf("server: accounts: %w", err)
	}
	if cfg.S3Endpoint != "" {
		client, err := minio.New(cfg.S3Endpoint, &minio.Options{
			Creds:  credentials.NewStaticV4(cfg.S3AccessKey, cfg.S3SecretKey, ""),
			Secure: cfg.S3Secure,
			Region: cfg.S3Region,
		})
		if err != nil {
			return nil, fmt.Errorf("server: s3: %w", err)
		}
		opt := s3store.Options{}
		if cfg.S3Redirect && (pubHost != cfg.S3Endpoint || pubSecure != cfg.S3Secure) {
			// Signs only: with the region set it makes no requests.
			opt.PublicClient, err = minio.New(pubHost, &minio.Options{
				Creds:  credentials.NewStaticV4(cfg.S3AccessKey, cfg.S3SecretKey, ""),
				Secure: pubSecure,
				Region: cfg.S3Region,
			})
			if err != nil {
				return nil, fmt.Errorf("server: s3 public endpoint: %w", err)
			}
		}
		st := s3store.New(client, cfg.S3Bucket, opt)
		if err := st.EnsureBucket(ctx, cfg.S3Region); err != nil {
			return nil, fmt.Errorf("server: s3 bucket %s: %w", cfg.S3Bucket, err)
		}
		s.blobs = st
	} else {
		st, err := dirstore.New(filepath.Join(cfg.DataDir, "blobs"))
		if err != nil {
			return nil, fmt.Errorf("server: blob directory: %w", err)
		}
		s.blobs = st
	}
	if sc, ok := s.blobs.(blob.SpaceChecker); ok {
		s.metrics.watchSpace(sc.CheckSpace, cfg.ReadyTimeout)
	}
	s.keyring, err = auth.LoadKeyring(cfg.KeyDir, cfg.Issuer, auth.WithPublishDelay(cfg.KeyPublishDelay))
	if err != nil {
		return nil, fmt.Errorf("server: keyring: %w", err)
	}
	if s.platform, err = validation.LoadPlatformKeys(cfg.PlatformKeyDir); err != nil {
		return nil, fmt.Errorf("server: platform keys: %w", err)
	}
	s.worker, err = validation.New(validation.Config{Pool: s.pool, Meta: s.meta, Blobs: s.blobs,
		Signer: s.platform.Signing, Logger: s.log, Lease: cfg.ValidationLease})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	hooks := cfg.Webhooks
	hooks.Pool, hooks.Logger = s.pool, s.log
	if s.hooks, err = webhooks.New(hooks); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.handler, err = s.buildHandler()
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Close releases the database pool and the blob store's idle
// connections. Call it after Serve returned.
func (s *Server) Close() error {
	s.pool.Close()
	if c, ok := s.blobs.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Handler returns the registry's HTTP handler (all endpoints, middleware
// included).
func (s *Server) Handler() http.Handler { return s.handler }

// Config returns the configuration with its defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Keyring returns the JWT keyring (for rotation by operators and tests).
func (s *Server) Keyring() *auth.Keyring { return s.keyring }

// Portal returns the web portal.
func (s *Server) Portal() *portal.Portal { return s.portal }

// Accounts returns the account store.
func (s *Server) Accounts() *auth.Store { return s.accounts }

// Pool returns the database pool.
func (s *Server) Pool() *pgxpool.Pool { return s.pool }

// Market returns the marketplace API, whose pool functions (Attachments,
// AttachmentHistory, DetachAttachment) the registry command's operators use.
func (s *Server) Market() *api.API { return s.market }

// CreateUser adds an account with a password; see auth.Store.Create. Errors
// wrap auth.ErrExists and auth.ErrInvalid.
func (s *Server) CreateUser(ctx context.Context, name string, role auth.Role, password string) (auth.Account, error) {
	if !role.Valid() {
		return auth.Account{}, fmt.Errorf("%w: role %q (want isv, tenant, admin or node)", auth.ErrInvalid, role)
	}
	if password == "" {
		return auth.Account{}, fmt.Errorf("%w: empty password", auth.ErrInvalid)
	}
	return s.accounts.Create(ctx, name, role, password)
}

// Serve serves the registry on ln until ctx is cancelled, then shuts down
// gracefully: it stops accepting, waits up to Config.ShutdownTimeout for
// requests in flight, and returns nil. It speaks TLS when Config.TLSCert and
// TLSKey are set. Any other failure of the server is returned. /metrics is
// not among its endpoints: see ServeMetrics.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// The validation worker, the scheduled garbage collection and the
	// upload sweeps run while the server does.
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		_ = s.worker.Run(wctx)
	}()
	gcDone := make(chan struct{})
	go func() {
		defer close(gcDone)
		s.collectPeriodically(wctx)
	}()
	// So do the sweeps of upload sessions, the first one now.
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		if s.cfg.UploadSweepInterval > 0 {
			s.sweepUploads(wctx)
		}
	}()
	// And the renewals of the leases of the upload bodies in flight.
	leasesDone := make(chan struct{})
	go func() {
		defer close(leasesDone)
		s.dist.RenewUploadLeases(wctx)
	}()
	// And the reloads of the shared key directory.
	keysDone := make(chan struct{})
	go func() {
		defer close(keysDone)
		if s.cfg.KeyReloadInterval > 0 {
			s.reloadKeys(wctx)
		}
	}()
	// And the accelerator pool's reaper of leases and silent nodes.
	poolDone := make(chan struct{})
	go func() {
		defer close(poolDone)
		s.market.RunPool(wctx)
	}()
	// And the webhook deliveries and the scan for expiring tokens.
	hooksDone := make(chan struct{})
	go func() {
		defer close(hooksDone)
		s.hooks.Run(wctx)
	}()
	defer func() {
		stopWorker()
		<-workerDone
		<-hooksDone
		<-gcDone
		<-sweepDone
		<-leasesDone
		<-keysDone
		<-poolDone
	}()
	return s.serveHTTP(ctx, ln, s.handler, s.cfg.TLSCert != "")
}

// MetricsHandler returns the Prometheus handler of the server's metrics
// (see the package doc), which no endpoint of Handler serves.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// ServeMetrics serves GET /metrics (MetricsHandler) on ln, in plain HTTP,
// and 404 for every other path, until ctx is cancelled; it shuts down as
// Serve does. The command runs it on Config.MetricsListen.
func (s *Server) ServeMetrics(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.MetricsHandler())
	return s.serveHTTP(ctx, ln, mux, false)
}

// serveHTTP runs an http.Server with the configured timeouts on ln until
// ctx is cancelled, then shuts it down gracefully.
func (s *Server) serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, useTLS bool) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if useTLS {
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	errc := make(chan error, 1)
	go func() {
		if useTLS {
			errc <- srv.ServeTLS(ln, s.cfg.TLSCert, s.cfg.TLSKey)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down", slog.String("addr", ln.Addr().String()), slog.Duration("timeout", s.cfg.ShutdownTimeout))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("server: shutdown: %w", err)
	}
	return nil
}

// SweepUploads ends expired upload sessions and removes their staging, and
// removes staging that no session names; see
// distribution.Handler.SweepUploads. Serve runs it at start and every
// Config.UploadSweepInterval.
func (s *Server) SweepUploads(ctx context.Context) (distribution.SweepResult, error) {
	return s.dist.SweepUploads(ctx)
}

// sweepUploads sweeps now and then every UploadSweepInterval until ctx ends.
func (s *Server) sweepUploads(ctx context.Context) {
	t := time.NewTicker(s.cfg.UploadSweepInterval)
	defer t.Stop()
	for {
		if n, err := s.portal.SweepSessions(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "portal session sweep failed", slog.Any("err", err))
		} else if n > 0 {
			s.log.InfoContext(ctx, "portal session sweep", slog.Int64("expired", n))
		}
		res, err := s.SweepUploads(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.WarnContext(ctx, "upload sweep failed", slog.Any("err", err))
		case res != (distribution.SweepResult{}):
			s.log.InfoContext(ctx, "upload sweep", slog.Int("expired", res.Expired),
				slog.Int("orphans", res.Orphans), slog.Int64("freed_bytes", res.FreedBytes))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reloadKeys re-reads the key directory every KeyReloadInterval until ctx
// ends, logging the keys when they change and the failures (the ring then
// keeps its keys).
func (s *Server) reloadKeys(ctx context.Context) {
	t := time.NewTicker(s.cfg.KeyReloadInterval)
	defer t.Stop()
	last := s.keyring.Keys()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.keyring.Reload(s.cfg.KeyDir); err != nil {
			s.log.WarnContext(ctx, "reloading the signing keys failed; keeping the keys loaded before", slog.Any("err", err))
			continue
		}
		keys := s.keyring.Keys()
		if !slices.EqualFunc(keys, last, func(a, b auth.KeyInfo) bool {
			return a.Kid == b.Kid && a.Retired == b.Retired && a.Current == b.Current
		}) {
			s.log.InfoContext(ctx, "signing keys changed", slog.Any("verifying", s.keyring.Kids()),
				slog.String("signing", s.keyring.Current()))
		}
		last = keys
	}
}

// ready checks the database and the blob store, which must be reachable
// and, when it can tell (blob.SpaceChecker), not full: an error wraps
// blob.ErrStorageFull then.
func (s *Server) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if p, ok := s.blobs.(interface{ Ping(context.Context) error }); ok {
		if err := p.Ping(ctx); err != nil {
			return fmt.Errorf("blob store: %w", err)
		}
	} else {
		// A Stat of a blob that cannot exist reaches the store without reading.
		_, err := s.blobs.Stat(ctx, blob.FromBytes([]byte("faas-registry readiness probe")))
		if err != nil && !errors.Is(err, blob.ErrNotFound) {
			return fmt.Errorf("blob store: %w", err)
		}
	}
	if sc, ok := s.blobs.(blob.SpaceChecker); ok {
		if err := sc.CheckSpace(ctx); err != nil {
			return fmt.Errorf("blob store: %w", err)
		}
	}
	return nil
}

func (s *Server) newDistribution() (*distribution.Handler, error) {
	return distribution.New(distribution.Config{
		Meta:                 s.meta,
		Blobs:                s.blobs,
		Authorizer:           &authorizer{bearer: auth.BearerAuthorizer{Keyring: s.keyring, Audience: s.cfg.Service, Realm: s.cfg.Realm}, accounts: s.accounts},
		MaxManifestBytes:     s.cfg.MaxManifestBytes,
		MaxChunkBytes:        s.cfg.MaxChunkBytes,
		MinBodyRate:          s.cfg.MinBodyRate,
		MinBodyRateWindow:    s.cfg.MinBodyRateWindow,
		MaxConcurrentUploads: s.cfg.MaxConcurrentUploads,
		MaxUploadSessions:    s.cfg.MaxUploadSessions,
		MaxStagedBytes:       s.cfg.MaxStagedBytes,
		UploadIdleTimeout:    s.cfg.UploadIdleTimeout,
		UploadBodyLease:      s.cfg.UploadBodyLease,
		// Only the S3 store redirects (dirstore is no blob.Redirector).
		BlobRedirects:      s.cfg.S3Redirect,
		BlobRedirectExpiry: s.cfg.S3RedirectExpiry,
		// Only warnings and errors: the request log is written by the
		// middleware of this package.
		Logger: slog.New(minLevelHandler{s.log.Handler(), slog.LevelWarn}),
	})
}

// parseEndpoint reads an S3 endpoint, "host:port" (secure as given) or an
// "http://" or "https://" URL without a path, into minio-go's form.
func parseEndpoint(s string, secure bool) (host string, _ bool, _ error) {
	if !strings.Contains(s, "://") {
		if s == "" || strings.ContainsAny(s, "/?#") {
			return "", false, fmt.Errorf("%q is neither host:port nor a URL", s)
		}
		return s, secure, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", false, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", false, fmt.Errorf("%q: want http(s)://host[:port]", s)
	}
	return u.Host, u.Scheme == "https", nil
}
