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
	if err := cfg.check(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: slog.New(requestIDHandler{cfg.Logger.Handler()}), metrics: newMetrics(),
		clients: clientip.Resolver{Trusted: cfg.TrustedProxies}}
	if err := s.openDatabase(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.pool.Close()
		}
	}()
	if s.blobs, err = openBlobs(ctx, cfg); err != nil {
		return nil, err
	}
	if sc, ok := s.blobs.(blob.SpaceChecker); ok {
		s.metrics.watchSpace(sc.CheckSpace, cfg.ReadyTimeout)
	}
	if err := s.openWorkers(); err != nil {
		return nil, err
	}
	s.handler, err = s.buildHandler()
	if err != nil {
		return nil, err
	}
	return s, nil
}

// openDatabase connects, migrates and opens the stores on the database.
// On error the pool, if made, is closed.
func (s *Server) openDatabase(ctx context.Context) (err error) {
	pcfg, err := pgxpool.ParseConfig(s.cfg.DatabaseURL)
	if err != nil {
		// The URL may hold a password: do not quote it.
		return fmt.Errorf("%w: unparsable database URL", ErrConfig)
	}
	s.pool, err = pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("server: database: %w", err)
	}
	defer func() {
		if err != nil {
			s.pool.Close()
		}
	}()
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("server: database: %w", err)
	}
	if err := migrations.ApplyPool(ctx, s.pool); err != nil {
		return fmt.Errorf("server: migrations: %w", err)
	}
	s.meta = meta.New(s.pool)
	s.accounts, err = auth.NewStore(s.pool, auth.WithParams(s.cfg.PasswordParams), auth.WithLimits(s.cfg.PasswordLimits))
	if err != nil {
		return fmt.Errorf("server: accounts: %w", err)
	}
	return nil
}

// openBlobs opens the blob store: the S3 bucket when an endpoint is set,
// else a directory under DataDir.
func openBlobs(ctx context.Context, cfg Config) (blob.Store, error) {
	if cfg.S3Endpoint == "" {
		st, err := dirstore.New(filepath.Join(cfg.DataDir, "blobs"))
		if err != nil {
			return nil, fmt.Errorf("server: blob directory: %w", err)
		}
		return st, nil
	}
	client, err := minio.New(cfg.S3Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.S3AccessKey, cfg.S3SecretKey, ""),
		Secure: cfg.S3Secure,
		Region: cfg.S3Region,
	})
	if err != nil {
		return nil, fmt.Errorf("server: s3: %w", err)
	}
	opt := s3store.Options{}
	pubHost, pubSecure := cfg.S3Endpoint, cfg.S3Secure
	if cfg.S3Redirect && cfg.S3PublicEndpoint != "" {
		pubHost, pubSecure, _ = parseEndpoint(cfg.S3PublicEndpoint, cfg.S3Secure) // checked by Config.check
	}
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
	return st, nil
}

// openWorkers loads the keys and makes the background workers: the
// validator and the webhook sender.
func (s *Server) openWorkers() (err error) {
	cfg := s.cfg
	s.keyring, err = auth.LoadKeyring(cfg.KeyDir, cfg.Issuer, auth.WithPublishDelay(cfg.KeyPublishDelay))
	if err != nil {
		return fmt.Errorf("server: keyring: %w", err)
	}
	if s.platform, err = validation.LoadPlatformKeys(cfg.PlatformKeyDir); err != nil {
		return fmt.Errorf("server: platform keys: %w", err)
	}
	s.worker, err = validation.New(validation.Config{Pool: s.pool, Meta: s.meta, Blobs: s.blobs,
		Signer: s.platform.Signing, Logger: s.log, Lease: cfg.ValidationLease})
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	hooks := cfg.Webhooks
	hooks.Pool, hooks.Logger = s.pool, s.log
	if s.hooks, err = webhooks.New(hooks); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return nil
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
