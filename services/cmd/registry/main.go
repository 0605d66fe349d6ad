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
// FAAS_KEY_DIR, FAAS_TRUSTED_PROXIES. Every limit, timeout and interval
// has a flag and a variable named after it, FAAS_ and the flag's name in
// capitals with underscores (--max-staged-bytes, FAAS_MAX_STAGED_BYTES; see
// limitFlags); a flag given on the command line wins over its variable.
// users add reads FAAS_DATABASE_URL (or --database-url) and applies the
// migrations too.
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
	root.AddCommand(serveCommand(), users, nodesCommand(), attachmentsCommand(), monthsCommand(), gcCommand(), keysCommand())
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

// serveOptions are the flags of serve, read into a server.Config by config.
type serveOptions struct {
	cfg            server.Config
	logLevel       string
	trustedProxies string
	hashMemoryMiB  int64
}

// config returns the server configuration the flags and the environment
// name (every flag given on the command line wins over its variable), and
// the log level; the Logger is left to the caller.
func (o *serveOptions) config(f *pflag.FlagSet) (server.Config, slog.Level, error) {
	var level slog.Level
	if err := applyEnv(f); err != nil {
		return server.Config{}, level, err
	}
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return server.Config{}, level, fmt.Errorf("--log-level: %w", err)
	}
	if err := checkEnvBool("FAAS_S3_REDIRECT"); err != nil {
		return server.Config{}, level, err
	}
	cfg := o.cfg
	var err error
	if cfg.TrustedProxies, err = clientip.ParsePrefixes(o.trustedProxies); err != nil {
		return server.Config{}, level, fmt.Errorf("--trusted-proxies: %w", err)
	}
	if o.hashMemoryMiB < 0 || o.hashMemoryMiB > 1<<20 {
		return server.Config{}, level, fmt.Errorf("--password-hash-memory %d: want MiB in [0, %d]", o.hashMemoryMiB, 1<<20)
	}
	cfg.PasswordLimits.HashMemory = o.hashMemoryMiB << 20
	secretsFromEnv(&cfg)
	return cfg, level, nil
}

func serveCommand() *cobra.Command {
	cmd, _ := newServeCommand()
	return cmd
}

// newServeCommand returns serve and the options its flags set.
func newServeCommand() (*cobra.Command, *serveOptions) {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run the registry service",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, level, err := o.config(cmd.Flags())
			if err != nil {
				return err
			}
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
	cfg := &o.cfg
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
	f.StringVar(&cfg.TLSCert, "tls-cert", env("FAAS_TLS_CERT", ""), "TLS certificate PEM file [FAAS_TLS_CERT]")
	f.StringVar(&cfg.TLSKey, "tls-key", env("FAAS_TLS_KEY", ""), "TLS key PEM file [FAAS_TLS_KEY]")
	f.BoolVar(&cfg.SecureCookies, "secure-cookies", envBool("FAAS_SECURE_COOKIES"), "mark the portal's cookies Secure when a proxy in front ends TLS (always so with --tls-cert) [FAAS_SECURE_COOKIES]")
	f.StringVar(&cfg.KeyDir, "key-dir", env("FAAS_KEY_DIR", ""), "JWT signing key directory; default DATA_DIR/keys [FAAS_KEY_DIR]")
	f.StringVar(&cfg.PlatformKeyDir, "platform-key-dir", env("FAAS_PLATFORM_KEY_DIR", ""), "platform countersigning and sealing keys; default DATA_DIR/platform-keys [FAAS_PLATFORM_KEY_DIR]")
	f.StringVar(&cfg.Service, "service", server.DefaultService, "token service name (audience)")
	f.StringVar(&cfg.Issuer, "issuer", server.DefaultIssuer, "token issuer")
	f.StringVar(&cfg.Realm, "realm", "", "absolute token endpoint URL for challenges; default derived from each request")
	f.StringVar(&o.trustedProxies, "trusted-proxies", env("FAAS_TRUSTED_PROXIES", ""), "comma-separated addresses or CIDR networks of reverse proxies whose X-Forwarded-For / X-Real-IP name the client; default none: those headers are ignored [FAAS_TRUSTED_PROXIES]")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	limitFlags(f, &o)
	return cmd, &o
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
	var role, passwordFile, tokenFile string
	var ifAbsent bool
	cmd := &cobra.Command{
		Use:   "add NAME --role ROLE",
		Short: "create an account; the password is read from the first line of stdin (or --password-file)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if passwordFile != "" {
				f, err := os.Open(passwordFile)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			line, err := bufio.NewReader(io.LimitReader(in, auth.MaxPasswordLen+2)).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("reading password: %w", err)
			}
			password := strings.TrimRight(line, "\r\n")
			if password == "" {
				return errors.New("no password on stdin (or in --password-file)")
			}
			var token string
			if tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return err
				}
				token = strings.TrimSpace(string(b))
				if err := auth.CheckTokenFormat(token); err != nil {
					return fmt.Errorf("--token-file %s: %w", tokenFile, err)
				}
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
			if ifAbsent && errors.Is(err, auth.ErrExists) {
				fmt.Fprintf(cmd.OutOrStdout(), "account %s exists; left as it is\n", args[0])
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s account %s (%s)\n", acct.Role, acct.Name, acct.ID)
			if token != "" {
				if err := srv.Accounts().ImportToken(cmd.Context(), acct.ID, "bootstrap", token); err != nil {
					return fmt.Errorf("--token-file %s: %w", tokenFile, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "with API token \"bootstrap\" of --token-file\n")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&role, "role", "", "role: isv, tenant, admin or node")
	_ = cmd.MarkFlagRequired("role")
	f.StringVar(&passwordFile, "password-file", "", "read the password from the first line of this file instead of stdin (a mounted Secret)")
	// For bootstrap steps that run at every start, such as the dev
	// overlay's init container (deploy/k8s/overlays/dev).
	f.StringVar(&tokenFile, "token-file", "", "also give the account this API token (faas_ and 43 base64url characters), read from the file: for bootstrap steps that must know a token before the registry runs, such as a development cluster's published one")
	f.BoolVar(&ifAbsent, "if-absent", false, "an account of that name existing already is no error (its role and password are not changed)")
	storeFlags(f, &cfg)
	return cmd
}

// addOperatorCommands adds subcommands to cmd, each with the store flags
// (into cfg) and --json (into asJSON): the operator's commands that open
// the registry's stores outside serve.
func addOperatorCommands(cmd *cobra.Command, cfg *server.Config, asJSON *bool, subs ...*cobra.Command) {
	for _, c := range subs {
		storeFlags(c.Flags(), cfg)
		c.Flags().BoolVar(asJSON, "json", false, "print JSON")
		cmd.AddCommand(c)
	}
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
