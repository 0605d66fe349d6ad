// Command registry runs the FaaS registry service: the OCI registry at /v2/
// with the Docker token flow at /auth/token, health, readiness and metrics
// endpoints (see package services/registry/server).
//
//	registry serve [flags]              run the service
//	registry users add NAME --role ROLE create an account; password on stdin
//	registry nodes list|approve|revoke|repin|enroll
//	                                    which nodes the registry trusts with keys
//	registry attachments list|show|detach
//	                                    the pool's attachments: filter, history, end one
//	registry gc [--dry-run] [--json]    collect garbage once (package gc)
//	registry keys list|rotate|retire    the JWT signing keys replicas share
//
// Every flag of serve defaults from the environment: FAAS_DATABASE_URL,
// FAAS_S3_ENDPOINT, FAAS_S3_ACCESS_KEY, FAAS_S3_SECRET_KEY, FAAS_S3_BUCKET
// (S3 blob store when an endpoint is set), FAAS_S3_REDIRECT and
// FAAS_S3_PUBLIC_ENDPOINT (redirect blob downloads to presigned S3 URLs, on
// the endpoint clients reach), FAAS_DATA_DIR (directory blob
// store and default key directory), FAAS_LISTEN, FAAS_TLS_CERT, FAAS_TLS_KEY,
// FAAS_KEY_DIR, FAAS_TRUSTED_PROXIES. users add reads FAAS_DATABASE_URL (or --database-url) and
// applies the migrations too.
//
// serve prints "registry listening on URL" on stdout once it accepts
// connections, then "registry metrics on URL" for the Prometheus metrics,
// which it serves on a listener of their own (--metrics-listen,
// FAAS_METRICS_LISTEN; loopback 127.0.0.1:5001 by default, "off" for none),
// never on the public one. It logs JSON to stderr and shuts down gracefully
// on SIGINT or SIGTERM. It also collects garbage every --gc-interval.
//
// gc removes the blobs no manifest references and nothing pushed within
// --grace-period, and uploads idle for longer than --upload-ttl, safely
// while registries serve pushes; manifests, tagged or not, are kept (see
// package gc). It prints one line per blob and upload removed ("would
// remove" with --dry-run, which removes nothing) and a summary on stdout,
// or with --json one JSON object (gc.Report); progress goes to stderr.
// It takes the same storage flags as serve.
//
// Exit codes: 0 success (including a graceful shutdown); 1 the account
// already exists (users add); 2 usage error or any other failure; 3 another
// garbage collection is running (gc).
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/clientip"
	"github.com/fpga-faas/faas/services/registry/meta"
	"github.com/fpga-faas/faas/services/registry/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRoot(os.Stdin, os.Stdout, os.Stderr).ExecuteContext(ctx)
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "registry:", err)
	switch {
	case errors.Is(err, auth.ErrExists):
		os.Exit(1)
	case errors.Is(err, meta.ErrGCBusy):
		os.Exit(3)
	}
	os.Exit(2)
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "registry",
		Short:         "FaaS registry: OCI registry and marketplace control plane",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	users := &cobra.Command{Use: "users", Short: "manage accounts"}
	users.AddCommand(usersAddCommand())
	root.AddCommand(serveCommand(), users, nodesCommand(), attachmentsCommand(), gcCommand(), keysCommand())
	return root
}

// secretsFromEnv fills the flags whose values are secrets from the
// environment when not given: they are not flag defaults, so that --help
// never prints them.
func secretsFromEnv(cfg *server.Config) {
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = os.Getenv("FAAS_DATABASE_URL")
	}
	if cfg.S3SecretKey == "" {
		cfg.S3SecretKey = os.Getenv("FAAS_S3_SECRET_KEY")
	}
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// envBool reads a boolean variable; unset, empty or unparsable is false
// (serve refuses an unparsable one, see checkEnvBool).
func envBool(name string) bool {
	v, _ := strconv.ParseBool(os.Getenv(name))
	return v
}

// checkEnvBool fails on a set but unparsable boolean variable.
func checkEnvBool(name string) error {
	if v := os.Getenv(name); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%s=%q: not a boolean", name, v)
		}
	}
	return nil
}

func serveCommand() *cobra.Command {
	var cfg server.Config
	var logLevel, trustedProxies string
	var hashMemoryMiB int64
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run the registry service",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			if err := checkEnvBool("FAAS_S3_REDIRECT"); err != nil {
				return err
			}
			var err error
			if cfg.TrustedProxies, err = clientip.ParsePrefixes(trustedProxies); err != nil {
				return fmt.Errorf("--trusted-proxies: %w", err)
			}
			if hashMemoryMiB < 0 || hashMemoryMiB > 1<<20 {
				return fmt.Errorf("--password-hash-memory %d: want MiB in [0, %d]", hashMemoryMiB, 1<<20)
			}
			cfg.PasswordLimits.HashMemory = hashMemoryMiB << 20
			secretsFromEnv(&cfg)
			cfg.Logger = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			srv, err := server.Open(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			ln, err := net.Listen("tcp", srv.Config().Listen)
			if err != nil {
				return err
			}
			var mln net.Listener
			if addr := srv.Config().MetricsListen; addr != server.MetricsOff {
				if mln, err = net.Listen("tcp", addr); err != nil {
					ln.Close()
					return fmt.Errorf("--metrics-listen: %w", err)
				}
			}
			scheme := "http"
			if cfg.TLSCert != "" {
				scheme = "https"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "registry listening on %s://%s\n", scheme, ln.Addr())
			if mln == nil {
				return srv.Serve(cmd.Context(), ln)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "registry metrics on http://%s/metrics\n", mln.Addr())
			return serveBoth(cmd.Context(), srv, ln, mln)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", env("FAAS_LISTEN", server.DefaultListen), "listen address [FAAS_LISTEN]")
	f.StringVar(&cfg.MetricsListen, "metrics-listen", env("FAAS_METRICS_LISTEN", server.DefaultMetricsListen),
		`address of the /metrics listener, apart from the public one; "off": none [FAAS_METRICS_LISTEN]`)
	f.StringVar(&cfg.DatabaseURL, "database-url", "", "PostgreSQL URL [FAAS_DATABASE_URL]")
	f.StringVar(&cfg.DataDir, "data-dir", env("FAAS_DATA_DIR", server.DefaultDataDir), "data directory [FAAS_DATA_DIR]")
	f.StringVar(&cfg.S3Endpoint, "s3-endpoint", env("FAAS_S3_ENDPOINT", ""), "S3 endpoint host:port; empty: directory store [FAAS_S3_ENDPOINT]")
	f.StringVar(&cfg.S3AccessKey, "s3-access-key", env("FAAS_S3_ACCESS_KEY", ""), "S3 access key [FAAS_S3_ACCESS_KEY]")
	f.StringVar(&cfg.S3SecretKey, "s3-secret-key", "", "S3 secret key [FAAS_S3_SECRET_KEY]")
	f.StringVar(&cfg.S3Bucket, "s3-bucket", env("FAAS_S3_BUCKET", server.DefaultS3Bucket), "S3 bucket [FAAS_S3_BUCKET]")
	f.BoolVar(&cfg.S3Secure, "s3-tls", false, "reach the S3 endpoint over HTTPS")
	f.BoolVar(&cfg.S3Redirect, "s3-redirect", envBool("FAAS_S3_REDIRECT"), "answer blob GETs with 307 redirects to presigned S3 URLs instead of proxying the bytes [FAAS_S3_REDIRECT]")
	f.StringVar(&cfg.S3PublicEndpoint, "s3-public-endpoint", env("FAAS_S3_PUBLIC_ENDPOINT", ""), "S3 endpoint clients reach, for redirect URLs: host:port or http(s)://host[:port]; its host name should differ from the registry's; default --s3-endpoint [FAAS_S3_PUBLIC_ENDPOINT]")
	f.DurationVar(&cfg.S3RedirectExpiry, "s3-redirect-expiry", 0, "validity of redirect URLs (default 10m)")
	f.StringVar(&cfg.TLSCert, "tls-cert", env("FAAS_TLS_CERT", ""), "TLS certificate PEM file [FAAS_TLS_CERT]")
	f.StringVar(&cfg.TLSKey, "tls-key", env("FAAS_TLS_KEY", ""), "TLS key PEM file [FAAS_TLS_KEY]")
	f.BoolVar(&cfg.SecureCookies, "secure-cookies", envBool("FAAS_SECURE_COOKIES"), "mark the portal's cookies Secure when a proxy in front ends TLS (always so with --tls-cert) [FAAS_SECURE_COOKIES]")
	f.StringVar(&cfg.KeyDir, "key-dir", env("FAAS_KEY_DIR", ""), "JWT signing key directory; default DATA_DIR/keys [FAAS_KEY_DIR]")
	f.DurationVar(&cfg.KeyReloadInterval, "key-reload-interval", 0, "how often to re-read the key directory, which replicas share (default 30s; negative: never)")
	f.DurationVar(&cfg.KeyPublishDelay, "key-publish-delay", 0, "age a new key must reach before it signs; must exceed the reload interval plus the directory's propagation to every replica (default 2m; negative: none)")
	f.StringVar(&cfg.PlatformKeyDir, "platform-key-dir", env("FAAS_PLATFORM_KEY_DIR", ""), "platform countersigning and sealing keys; default DATA_DIR/platform-keys [FAAS_PLATFORM_KEY_DIR]")
	f.DurationVar(&cfg.ValidationLease, "validation-lease", 0, "how long a validation job stays claimed (default 5m); a crashed registry's job is retried after it")
	f.StringVar(&cfg.Service, "service", server.DefaultService, "token service name (audience)")
	f.StringVar(&cfg.Issuer, "issuer", server.DefaultIssuer, "token issuer")
	f.StringVar(&cfg.Realm, "realm", "", "absolute token endpoint URL for challenges; default derived from each request")
	f.DurationVar(&cfg.Attach.NodeLostAfter, "node-lost-after", 0, "how long a node may go without a heartbeat before its pool attachments are marked lost (default 90s; a few heartbeat periods)")
	f.DurationVar(&cfg.Attach.ReapInterval, "lease-check-interval", 0, "how often expired attachment leases and silent nodes are looked for (default 1s)")
	f.IntVar(&cfg.Attach.MaxPerTenant, "max-attachments-per-tenant", 0, "live pool attachments one tenant may hold (default 16)")
	f.DurationVar(&cfg.Attach.KeepWarm, "keep-warm", 0, "how long nodes keep a detached attachment's image loaded for its tenant; must match faasd's --keep-warm (default 2m)")
	f.DurationVar(&cfg.GCInterval, "gc-interval", 0, "interval of garbage collection (default 24h; negative: never)")
	f.DurationVar(&cfg.GCGracePeriod, "gc-grace-period", 0, "spare blobs pushed more recently than this (default 2h); must exceed the longest push")
	f.StringVar(&trustedProxies, "trusted-proxies", env("FAAS_TRUSTED_PROXIES", ""), "comma-separated addresses or CIDR networks of reverse proxies whose X-Forwarded-For / X-Real-IP name the client; default none: those headers are ignored [FAAS_TRUSTED_PROXIES]")
	f.Int64Var(&hashMemoryMiB, "password-hash-memory", 0, "MiB of memory all concurrent password hashes may hold together (default 256); checks beyond it wait, then answer 503")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

// serveBoth runs the registry on ln and its metrics on mln until ctx ends
// or either fails, which stops the other.
func serveBoth(ctx context.Context, srv *server.Server, ln, mln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ctx, ln) }()
	go func() { errc <- srv.ServeMetrics(ctx, mln) }()
	err := <-errc
	cancel()
	return errors.Join(err, <-errc)
}

func usersAddCommand() *cobra.Command {
	var cfg server.Config
	var role string
	cmd := &cobra.Command{
		Use:   "add NAME --role ROLE",
		Short: "create an account; the password is read from the first line of stdin",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			line, err := bufio.NewReader(io.LimitReader(cmd.InOrStdin(), auth.MaxPasswordLen+2)).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("reading password: %w", err)
			}
			password := strings.TrimRight(line, "\r\n")
			if password == "" {
				return errors.New("no password on stdin")
			}
			// Open as serve does (same flags): it applies the migrations,
			// so users add also bootstraps an empty database.
			secretsFromEnv(&cfg)
			srv, err := server.Open(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer srv.Close()
			acct, err := srv.CreateUser(cmd.Context(), args[0], auth.Role(role), password)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s account %s (%s)\n", acct.Role, acct.Name, acct.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&role, "role", "", "role: isv, tenant, admin or node")
	_ = cmd.MarkFlagRequired("role")
	storeFlags(f, &cfg)
	return cmd
}

// storeFlags are the flags of the commands that open the registry's stores
// as serve does, outside serve.
func storeFlags(f *pflag.FlagSet, cfg *server.Config) {
	f.StringVar(&cfg.DatabaseURL, "database-url", "", "PostgreSQL URL [FAAS_DATABASE_URL]")
	f.StringVar(&cfg.DataDir, "data-dir", env("FAAS_DATA_DIR", server.DefaultDataDir), "data directory [FAAS_DATA_DIR]")
	f.BoolVar(&cfg.SecureCookies, "secure-cookies", envBool("FAAS_SECURE_COOKIES"), "mark the portal's cookies Secure when a proxy in front ends TLS (always so with --tls-cert) [FAAS_SECURE_COOKIES]")
	f.StringVar(&cfg.KeyDir, "key-dir", env("FAAS_KEY_DIR", ""), "JWT signing key directory [FAAS_KEY_DIR]")
	f.StringVar(&cfg.PlatformKeyDir, "platform-key-dir", env("FAAS_PLATFORM_KEY_DIR", ""), "platform keys directory [FAAS_PLATFORM_KEY_DIR]")
	f.StringVar(&cfg.S3Endpoint, "s3-endpoint", env("FAAS_S3_ENDPOINT", ""), "S3 endpoint [FAAS_S3_ENDPOINT]")
	f.StringVar(&cfg.S3AccessKey, "s3-access-key", env("FAAS_S3_ACCESS_KEY", ""), "S3 access key [FAAS_S3_ACCESS_KEY]")
	f.StringVar(&cfg.S3SecretKey, "s3-secret-key", "", "S3 secret key [FAAS_S3_SECRET_KEY]")
	f.StringVar(&cfg.S3Bucket, "s3-bucket", env("FAAS_S3_BUCKET", server.DefaultS3Bucket), "S3 bucket [FAAS_S3_BUCKET]")
	f.BoolVar(&cfg.S3Secure, "s3-tls", false, "reach the S3 endpoint over HTTPS")
}
