package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/fpga-faas/faas/services/registry/api"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/blob"
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

// check refuses a Config no registry can run with.
func (cfg *Config) check() error {
	if cfg.DatabaseURL == "" {
		return fmt.Errorf("%w: no database URL", ErrConfig)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return fmt.Errorf("%w: TLS needs both a certificate and a key", ErrConfig)
	}
	if cfg.S3Redirect && cfg.S3Endpoint == "" {
		return fmt.Errorf("%w: S3 redirects need an S3 endpoint", ErrConfig)
	}
	if cfg.S3Redirect && cfg.S3PublicEndpoint != "" {
		if _, _, err := parseEndpoint(cfg.S3PublicEndpoint, cfg.S3Secure); err != nil {
			return fmt.Errorf("%w: S3 public endpoint: %v", ErrConfig, err)
		}
	}
	return nil
}
