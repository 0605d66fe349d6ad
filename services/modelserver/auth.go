package modelserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// The errors of a request without the credential it needs.
var (
	ErrUnauthenticated = errors.New("unauthenticated")   // 401, Unauthenticated
	ErrPermission      = errors.New("permission denied") // 403, PermissionDenied
)

// Role is what a credential may do; each role may do what the ones before
// it may.
type Role int

const (
	roleNone Role = iota
	// RoleMetadata: server and model metadata and readiness (dashboards,
	// clients that only look).
	RoleMetadata
	// RoleInfer: also inference.
	RoleInfer
	// RoleAdmin: also the repository extension (index, load, unload).
	RoleAdmin
)

var roleNames = map[string]Role{"metadata": RoleMetadata, "infer": RoleInfer, "admin": RoleAdmin}

func (r Role) String() string {
	for n, v := range roleNames {
		if v == r {
			return n
		}
	}
	return "none"
}

// minTokenLen refuses tokens short enough to guess.
const minTokenLen = 16

// maxTokenFileBytes bounds a token file.
const maxTokenFileBytes = 1 << 20

// Token is a bearer token of a token file, kept as its hash, with its role.
type Token struct {
	sum  [sha256.Size]byte
	role Role
}

// Auth is the server's authentication: bearer tokens with a role each,
// and whether clients must present certificates verified by a client CA
// (mTLS, see ServerTLS). Every request but the health checks needs what is
// configured: a verified certificate with mTLS, a token with tokens, whose
// role decides; with mTLS alone the certificate may do everything.
type Auth struct {
	tokens []Token
	mtls   bool
}

// NewAuth returns the authentication of tokens (ParseTokens) and, if
// mtls, of verified client certificates. Neither is an error: a server
// with no credential to ask is configured with a nil *Auth.
func NewAuth(tokens []Token, mtls bool) (*Auth, error) {
	if len(tokens) == 0 && !mtls {
		return nil, errors.New("modelserver: authentication needs tokens or client certificates")
	}
	return &Auth{tokens: tokens, mtls: mtls}, nil
}

// ReadTokens reads a token file: a line per token, "ROLE TOKEN", ROLE one
// of metadata, infer and admin; blank lines and lines starting with # are
// skipped. A token shorter than 16 bytes, a repeated token or an unknown
// role is an error naming the line; the tokens never appear in errors.
func ReadTokens(path string) ([]Token, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("modelserver: tokens: %w", err)
	}
	if len(b) > maxTokenFileBytes {
		return nil, fmt.Errorf("modelserver: tokens: %s: more than %d bytes", path, maxTokenFileBytes)
	}
	return ParseTokens(path, b)
}

// ParseTokens parses a token file's contents (see ReadTokens); path names
// it in errors.
func ParseTokens(path string, b []byte) ([]Token, error) {
	var out []Token
	seen := map[[sha256.Size]byte]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("modelserver: tokens: %s:%d: want ROLE TOKEN", path, n)
		}
		role, ok := roleNames[f[0]]
		if !ok {
			return nil, fmt.Errorf("modelserver: tokens: %s:%d: role %q: want metadata, infer or admin", path, n, f[0])
		}
		if len(f[1]) < minTokenLen {
			return nil, fmt.Errorf("modelserver: tokens: %s:%d: a token of %d bytes; at least %d are required", path, n, len(f[1]), minTokenLen)
		}
		sum := sha256.Sum256([]byte(f[1]))
		if seen[sum] {
			return nil, fmt.Errorf("modelserver: tokens: %s:%d: the token of an earlier line again", path, n)
		}
		seen[sum] = true
		out = append(out, Token{sum: sum, role: role})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("modelserver: tokens: %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("modelserver: tokens: %s holds no token", path)
	}
	return out, nil
}

// roleOf is the role of a request's bearer token (its value without
// "Bearer ") and verified client certificate. With mTLS a verified
// certificate is required; with tokens a valid token is, and its role
// decides; with mTLS alone the certificate may do everything. Every token
// is compared, in constant time over hashes of equal length, so that
// neither the time nor the order of the file tells how much of a guess was
// right.
func (a *Auth) roleOf(bearer string, verifiedCert bool) (Role, error) {
	if a.mtls && !verifiedCert {
		return roleNone, fmt.Errorf("%w: a client certificate is required", ErrUnauthenticated)
	}
	if len(a.tokens) == 0 {
		return RoleAdmin, nil
	}
	if bearer == "" {
		return roleNone, fmt.Errorf("%w: a bearer token is required", ErrUnauthenticated)
	}
	sum := sha256.Sum256([]byte(bearer))
	role := roleNone
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			role = t.role
		}
	}
	if role == roleNone {
		return roleNone, fmt.Errorf("%w: the bearer token is not valid", ErrUnauthenticated)
	}
	return role, nil
}

// allow checks that a request's credential has role need.
func (a *Auth) allow(bearer string, verifiedCert bool, need Role) error {
	if a == nil || need == roleNone {
		return nil
	}
	role, err := a.roleOf(bearer, verifiedCert)
	if err != nil {
		return err
	}
	if role < need {
		return fmt.Errorf("%w: a token of role %s may not do what needs role %s", ErrPermission, role, need)
	}
	return nil
}

// restRole is the role a REST request needs. The health checks need none:
// Kubernetes probes and load balancers send no credentials, and they tell
// nothing but that the process answers and its models are loaded.
func restRole(r *http.Request) Role {
	p := r.URL.Path
	switch {
	case p == "/v2/health/live" || p == "/v2/health/ready":
		return roleNone
	case strings.HasPrefix(p, "/v2/repository/"):
		return RoleAdmin
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/infer"):
		return RoleInfer
	}
	return RoleMetadata
}

// authenticate refuses REST requests without the credential they need,
// with the protocol's error object: 401 with a Bearer challenge, or 403.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.cfg.Auth == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bearer, _ := cutBearer(r.Header.Get("Authorization"))
		verified := r.TLS != nil && len(r.TLS.VerifiedChains) > 0
		if err := s.cfg.Auth.allow(bearer, verified, restRole(r)); err != nil {
			if errors.Is(err, ErrUnauthenticated) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="modelserver"`)
			}
			s.log.Debug("request refused", "path", r.URL.Path, "err", err)
			writeError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cutBearer is the token of an Authorization value "Bearer TOKEN" (the
// scheme's case ignored, as RFC 9110 says).
func cutBearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// grpcRole is the role an RPC of the service needs: ServerLive and
// ServerReady none, as the REST health checks.
func grpcRole(method string) Role {
	switch method[strings.LastIndexByte(method, '/')+1:] {
	case "ServerLive", "ServerReady":
		return roleNone
	case "ModelInfer", "ModelStreamInfer":
		return RoleInfer
	}
	return RoleMetadata
}

// grpcAllow checks an RPC's credential: the "authorization" metadata,
// "Bearer TOKEN", and the peer's verified certificate.
func (s *Server) grpcAllow(ctx context.Context, method string) error {
	if s.cfg.Auth == nil {
		return nil
	}
	var bearer string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			bearer, _ = cutBearer(v[0])
		}
	}
	verified := false
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			verified = len(ti.State.VerifiedChains) > 0
		}
	}
	err := s.cfg.Auth.allow(bearer, verified, grpcRole(method))
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, ErrPermission):
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return err
}

func (s *Server) grpcUnaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.grpcAllow(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) grpcStreamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := s.grpcAllow(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}

// ServerTLS is the TLS configuration of both listeners: the server's
// certificate and key, and, if clientCA is not "", client certificates
// verified against it (mTLS). A certificate the CA did not sign fails the
// handshake. A client without one passes the handshake, so that probes
// reach the health checks, and every other request it makes is refused
// (401, Unauthenticated): NewAuth(…, true) requires the certificate.
func ServerTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("modelserver: TLS certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		b, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, fmt.Errorf("modelserver: client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("modelserver: client CA: %s holds no PEM certificate", clientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}
