package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/fpga-faas/faas/services/registry/webhooks"
)

// envAnnotation is the pflag annotation naming a flag's environment
// variable (see bindEnv).
const envAnnotation = "faas-env"

// envName is the environment variable of a flag: FAAS_ and the flag's name
// in capitals with underscores (--max-staged-bytes: FAAS_MAX_STAGED_BYTES).
func envName(flag string) string {
	return "FAAS_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv names envName(name) as the variable flag name takes its value
// from when the command line does not give it (applyEnv), and says so in
// its usage.
func bindEnv(f *pflag.FlagSet, name string) {
	env := envName(name)
	f.Lookup(name).Usage += " [" + env + "]"
	_ = f.SetAnnotation(name, envAnnotation, []string{env}) // the flag was just defined
}

// applyEnv sets every flag bound to a variable (bindEnv) that the command
// line did not give from that variable, when it is set and not empty. The
// values are parsed as the flag's own, so a bad one is refused the same
// way, naming the variable.
func applyEnv(f *pflag.FlagSet) error {
	var errs []error
	f.VisitAll(func(fl *pflag.Flag) {
		env := fl.Annotations[envAnnotation]
		if fl.Changed || len(env) == 0 {
			return
		}
		if v := os.Getenv(env[0]); v != "" {
			if err := f.Set(fl.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", env[0], v, err))
			}
		}
	})
	return errors.Join(errs...)
}

func durationFlag(f *pflag.FlagSet, p *time.Duration, name, usage string) {
	f.DurationVar(p, name, 0, usage)
	bindEnv(f, name)
}

func intFlag(f *pflag.FlagSet, p *int, name, usage string) {
	f.IntVar(p, name, 0, usage)
	bindEnv(f, name)
}

func int64Flag(f *pflag.FlagSet, p *int64, name, usage string) {
	f.Int64Var(p, name, 0, usage)
	bindEnv(f, name)
}

// limitFlags defines a flag, with its environment variable, for every
// limit, timeout and interval of server.Config (TestEveryLimitHasAFlag
// holds every numeric field of it to having one). Zero, the flags'
// default, means the server's default, named in each usage.
func limitFlags(f *pflag.FlagSet, o *serveOptions) {
	cfg := &o.cfg
	// HTTP server.
	durationFlag(f, &cfg.ReadHeaderTimeout, "read-header-timeout", "time to read a request's headers (default 10s; negative: none)")
	durationFlag(f, &cfg.ReadTimeout, "read-timeout", "time to read a whole request, body included (default 15m; negative: none)")
	durationFlag(f, &cfg.WriteTimeout, "write-timeout", "time to write a response (default 15m; negative: none)")
	durationFlag(f, &cfg.IdleTimeout, "idle-timeout", "how long an idle keep-alive connection stays open (default 2m; negative: none)")
	durationFlag(f, &cfg.ShutdownTimeout, "shutdown-timeout", "how long a graceful shutdown waits for requests in flight (default 30s)")
	durationFlag(f, &cfg.ReadyTimeout, "ready-timeout", "bound of the checks of /readyz (default 5s)")
	int64Flag(f, &cfg.MaxBodyBytes, "max-body-bytes", "bytes of a request body outside blob uploads (default 1 MiB)")
	int64Flag(f, &cfg.MaxChunkBytes, "max-chunk-bytes", "bytes of the body of one blob upload request (default 8 GiB)")
	int64Flag(f, &cfg.MaxManifestBytes, "max-manifest-bytes", "bytes of a manifest (default 4 MiB)")

	// Upload bodies and sessions.
	int64Flag(f, &cfg.MinBodyRate, "min-body-rate", "slowest upload or manifest body, in bytes per second over --min-body-rate-window, before it is cut with 408 (default 16 KiB/s; negative: no minimum)")
	durationFlag(f, &cfg.MinBodyRateWindow, "min-body-rate-window", "window of --min-body-rate (default 30s)")
	intFlag(f, &cfg.MaxConcurrentUploads, "max-concurrent-uploads", "upload bodies one account sends at a time, across all replicas (default 8; negative: no limit)")
	intFlag(f, &cfg.MaxUploadSessions, "max-upload-sessions", "open upload sessions of one account (default 64; negative: no limit)")
	int64Flag(f, &cfg.MaxStagedBytes, "max-staged-bytes", "bytes one account has staged in open uploads and bodies in flight, across all replicas (default 10 GiB; negative: no limit)")
	durationFlag(f, &cfg.UploadIdleTimeout, "upload-idle-timeout", "how long an upload session may stay without activity before it expires (default 1h)")
	durationFlag(f, &cfg.UploadSweepInterval, "upload-sweep-interval", "how often expired upload sessions and orphaned staging are removed (default 10m; negative: never)")
	durationFlag(f, &cfg.UploadBodyLease, "upload-body-lease", "how long a replica's upload bodies keep counting toward the shared limits after its last renewal; a crashed replica's stop counting after it (default 1m)")

	// Passwords: hashing memory, queues and lockouts.
	int64Flag(f, &o.hashMemoryMiB, "password-hash-memory", "MiB of memory all concurrent password hashes may hold together (default 256); checks beyond it wait, then answer 503")
	pl := &cfg.PasswordLimits
	intFlag(f, &pl.MaxWaiting, "password-max-waiting", "password checks that may wait for hashing memory, and as many for their turn at an account or address (default 64)")
	durationFlag(f, &pl.MaxWait, "password-max-wait", "how long a password check waits for either before it is refused (default 10s)")
	intFlag(f, &pl.Account.Free, "login-account-free", "failed password checks of one account before lockouts begin (default 5)")
	durationFlag(f, &pl.Account.Base, "login-account-lockout", "first lockout of an account, doubling with each further failure (default 1s)")
	durationFlag(f, &pl.Account.Max, "login-account-max-lockout", "longest lockout of an account (default 15m)")
	intFlag(f, &pl.Source.Free, "login-source-free", "failed password checks from one client address (IPv6: /64) before lockouts begin (default 20)")
	durationFlag(f, &pl.Source.Base, "login-source-lockout", "first lockout of a client address, doubling with each further failure (default 1s)")
	durationFlag(f, &pl.Source.Max, "login-source-max-lockout", "longest lockout of a client address (default 15m)")
	intFlag(f, &pl.MaxTracked, "login-max-tracked", "accounts, and as many addresses, whose failures are remembered (default 65536)")

	// Tokens, keys and background work.
	durationFlag(f, &cfg.TokenTTL, "token-ttl", "lifetime of access tokens (default 5m)")
	durationFlag(f, &cfg.KeyReloadInterval, "key-reload-interval", "how often to re-read the key directory, which replicas share (default 30s; negative: never)")
	durationFlag(f, &cfg.KeyPublishDelay, "key-publish-delay", "age a new key must reach before it signs; must exceed the reload interval plus the directory's propagation to every replica (default 2m; negative: none)")
	durationFlag(f, &cfg.ValidationLease, "validation-lease", "how long a validation job stays claimed (default 5m); a crashed registry's job is retried after it")
	durationFlag(f, &cfg.GCInterval, "gc-interval", "interval of garbage collection (default 24h; negative: never)")
	durationFlag(f, &cfg.GCGracePeriod, "gc-grace-period", "spare blobs pushed more recently than this (default 2h); must exceed the longest push")
	durationFlag(f, &cfg.S3RedirectExpiry, "s3-redirect-expiry", "validity of redirect URLs (default 10m)")

	// The accelerator pool.
	durationFlag(f, &cfg.Attach.NodeLostAfter, "node-lost-after", "how long a node may go without a heartbeat before its pool attachments are marked lost (default 90s; a few heartbeat periods)")
	durationFlag(f, &cfg.Attach.ReapInterval, "lease-check-interval", "how often expired attachment leases and silent nodes are looked for (default 1s)")
	intFlag(f, &cfg.Attach.MaxPerTenant, "max-attachments-per-tenant", "live pool attachments one tenant may hold (default 16)")
	durationFlag(f, &cfg.Attach.KeepWarm, "keep-warm", "how long nodes keep a detached attachment's image loaded for its tenant; must match faasd's --keep-warm (default 2m)")

	webhookFlags(f, &cfg.Webhooks)

	// Money.
	intFlag(f, &cfg.PlatformFeeBasisPoints, "platform-fee-bps", "the platform's fee on ISVs' revenue in basis points, for months closed from now on (default 2000, 20%; negative: none; at most 10000)")
}

// webhookFlags defines the flags of webhook deliveries (server.Config.Webhooks).
func webhookFlags(f *pflag.FlagSet, c *webhooks.Config) {
	durationFlag(f, &c.Timeout, "webhook-timeout", "how long one webhook delivery attempt may take (default 10s)")
	durationFlag(f, &c.Backoff, "webhook-backoff", "delay after a webhook delivery's first failed attempt, doubled after each further one (default 10m)")
	durationFlag(f, &c.MaxBackoff, "webhook-max-backoff", "longest delay between two attempts of a webhook delivery (default 12h)")
	intFlag(f, &c.MaxAttempts, "webhook-max-attempts", "attempts of a webhook delivery before it is failed (default 8)")
	durationFlag(f, &c.Lease, "webhook-lease", "how long a webhook delivery stays claimed by a replica (default 1m, at least twice the timeout)")
	durationFlag(f, &c.Poll, "webhook-poll", "pause between looks for due webhook deliveries when none is due (default 2s)")
	intFlag(f, &c.Concurrency, "webhook-concurrency", "webhook deliveries one replica sends at once (default 4)")
	durationFlag(f, &c.ScanInterval, "webhook-scan-interval", "how often API tokens are scanned for expiry and old events deleted (default 1h)")
	durationFlag(f, &c.ExpiryNotice, "webhook-expiry-notice", "how long before an API token expires its owner is told (default 168h)")
	durationFlag(f, &c.Retention, "webhook-retention", "how long events and their deliveries are kept (default 2160h)")
	f.BoolVar(&c.AllowLoopback, "webhook-allow-loopback", false, "let webhooks go to loopback addresses, over plain http too: for development only")
	bindEnv(f, "webhook-allow-loopback")
}
