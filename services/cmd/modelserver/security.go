package main

import (
	"cmp"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/modelartifact"
	"github.com/fpga-faas/faas/services/modelserver"
)

// securityFlags are the flags of authentication, TLS and registry models.
type securityFlags struct {
	tokens, tlsCert, tlsKey, clientCA string
	insecureNoAuth                    bool

	models        map[string]string
	cacheDir      string
	registryUser  string
	registryToken string // a file
	maxModelBytes int64
}

func addSecurityFlags() *securityFlags {
	f := &securityFlags{models: map[string]string{}}
	flag.StringVar(&f.tokens, "tokens", "", `file of bearer tokens, a line "ROLE TOKEN" each (roles: metadata, infer, admin)`)
	flag.StringVar(&f.tlsCert, "tls-cert", "", "serve both APIs over TLS with this certificate (PEM)")
	flag.StringVar(&f.tlsKey, "tls-key", "", "the TLS certificate's key (PEM)")
	flag.StringVar(&f.clientCA, "client-ca", "", "require client certificates verified by this CA (mTLS; needs -tls-cert)")
	flag.BoolVar(&f.insecureNoAuth, "insecure-no-auth", false, "allow listening on a non-loopback address without -tokens or -client-ca")
	flag.Func("model", "serve a model from the registry: NAME=REGISTRY/NS/REPO@sha256:DIGEST or :TAG (repeatable)", func(v string) error {
		name, ref, ok := strings.Cut(v, "=")
		if !ok || name == "" || ref == "" {
			return errors.New("want NAME=REGISTRY/NS/REPO@sha256:DIGEST or NAME=REGISTRY/NS/REPO:TAG")
		}
		if _, dup := f.models[name]; dup {
			return fmt.Errorf("model %q given twice", name)
		}
		if _, err := modelartifact.ParseRef(ref); err != nil {
			return err
		}
		f.models[name] = ref
		return nil
	})
	flag.StringVar(&f.cacheDir, "model-cache", "", "folder of the registry models' cache (default faas-modelserver in the user's cache directory)")
	flag.StringVar(&f.registryUser, "registry-user", "", "registry account of -model pulls (default $MODELSERVER_REGISTRY_USER, else faas login's)")
	flag.StringVar(&f.registryToken, "registry-token-file", "", "file holding that account's API token (default $MODELSERVER_REGISTRY_TOKEN, else faas login's)")
	flag.Int64Var(&f.maxModelBytes, "max-model-bytes", modelartifact.DefaultMaxModelBytes, "largest model a -model artifact may hold, in bytes")
	return f
}

// apply sets cfg's Auth, Models and Cache, and returns the gRPC options
// and the TLS configuration of the listeners (nil: plain).
func (f *securityFlags) apply(cfg *modelserver.Config, log *slog.Logger) ([]grpc.ServerOption, *tls.Config, error) {
	var tcfg *tls.Config
	if (f.tlsCert == "") != (f.tlsKey == "") || (f.clientCA != "" && f.tlsCert == "") {
		return nil, nil, usageError("-tls-cert and -tls-key go together, and -client-ca needs them")
	}
	if f.tlsCert != "" {
		var err error
		if tcfg, err = modelserver.ServerTLS(f.tlsCert, f.tlsKey, f.clientCA); err != nil {
			return nil, nil, err
		}
	}
	var tokens []modelserver.Token
	if f.tokens != "" {
		var err error
		if tokens, err = modelserver.ReadTokens(f.tokens); err != nil {
			return nil, nil, err
		}
	}
	if len(tokens) > 0 || f.clientCA != "" {
		a, err := modelserver.NewAuth(tokens, f.clientCA != "")
		if err != nil {
			return nil, nil, err
		}
		cfg.Auth = a
	}
	if len(f.models) > 0 {
		cache, err := f.openCache(log)
		if err != nil {
			return nil, nil, err
		}
		cfg.Models, cfg.Cache = f.models, cache
	}
	var gopts []grpc.ServerOption
	if tcfg != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(tcfg)))
	}
	return gopts, tcfg, nil
}

// openCache opens the registry models' cache with the registry
// credentials; the token is read here and never logged.
func (f *securityFlags) openCache(log *slog.Logger) (*modelserver.ModelCache, error) {
	dir := f.cacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil, usageError("no cache directory (give -model-cache): " + err.Error())
		}
		dir = filepath.Join(base, "faas-modelserver")
	}
	user := cmp.Or(f.registryUser, os.Getenv("MODELSERVER_REGISTRY_USER"))
	token := os.Getenv("MODELSERVER_REGISTRY_TOKEN")
	if f.registryToken != "" {
		b, err := os.ReadFile(f.registryToken)
		if err != nil {
			return nil, fmt.Errorf("registry token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if user == "" && token == "" {
		login, err := faas.StoredLogin()
		if err != nil {
			return nil, err
		}
		user, token = login.User, login.Token
	}
	return modelserver.NewModelCache(dir, modelartifact.Remote{User: user, Token: token},
		modelartifact.Limits{MaxModelBytes: f.maxModelBytes}, log)
}

// checkExposure refuses to serve a non-loopback address with no
// credential to ask, unless -insecure-no-auth: anyone who reaches the port
// could run models and, with the repository extension, load and unload
// them. Plain tokens off the loopback interface are allowed with a warning:
// TLS is the operator's choice (a mesh may provide it).
func (f *securityFlags) checkExposure(cfg modelserver.Config, tcfg *tls.Config, log *slog.Logger, addrs ...string) error {
	for _, a := range addrs {
		if a == "" || loopback(a) {
			continue
		}
		switch {
		case cfg.Auth == nil && !f.insecureNoAuth:
			return usageError(fmt.Sprintf("%s is not a loopback address and there is no authentication: give -tokens or -client-ca, or -insecure-no-auth", a))
		case cfg.Auth == nil:
			log.Warn("serving without authentication on a non-loopback address (-insecure-no-auth)", "addr", a)
		case tcfg == nil:
			log.Warn("bearer tokens over plain text on a non-loopback address: anyone on the path can read them; give -tls-cert", "addr", a)
		}
	}
	return nil
}

// loopback reports whether addr's host is a loopback address or localhost
// (an empty host listens on every interface).
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// usageErr is a bad flag, exit code 2.
type usageErr string

func (e usageErr) Error() string { return string(e) }

func usageError(s string) error { return usageErr(s) }
