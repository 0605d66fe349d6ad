// Package server is the node agent's API (sdk/agentapi): HTTP on a unix
// socket for the CLI and the SDK, optionally on TCP with TLS for remote
// attach, plus the heartbeat that tells the registry about the node's slots.
//
// # Who is calling
//
// On the unix socket the kernel's peer credentials give the caller's uid:
// uid 0, the agent's own uid and Config.Operators are the operator; uids in
// Config.Tenants map to tenant names. A request may instead carry a tenant's
// registry API token (Authorization: Bearer faas_…), which the agent checks
// with the registry (answers are cached for a minute); on TCP the token is
// required. Loads and pulls need the token, because the agent pulls with it.
// A request with a token acts as its tenant alone, even from an operator's
// uid: the operator's rights come with calling without one.
//
// # Who may do what
//
// Everyone authenticated lists slots, but sees image and tenant only of the
// slots they loaded (the operator sees all). Likewise the node cache
// (/v1/images) lists to a tenant only the blobs it pulled or loaded itself,
// since this agent started; the operator sees all. A tenant clears its own slots,
// and cleared or failed ones; the operator any. Loads and their events belong
// to the tenant that started them. /metrics and the DDR diagnostics are for
// the operator. Tenant sessions on an AliDNN slot (session.go) are for the
// tenant that loaded it, the tenants Config.SharedWith lists for it, and the
// operator.
//
// # Containers
//
// Kubernetes pods reach the agent through Config.PodSocket, where the
// caller's uid counts for nothing, with the allocation credential the
// device plugin gave them (grants.go, Bearer faasa_…): it lists slots,
// seeing image and tenant of its own whole slots, and opens sessions on
// the slots it was allocated, nothing else.
package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/agent/cache"
	"github.com/fpga-faas/faas/services/agent/loader"
	"github.com/fpga-faas/faas/services/agent/nodecert"
	"github.com/fpga-faas/faas/services/agent/regclient"
	"github.com/fpga-faas/faas/services/agent/sessions"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// Config configures a Server. Slots, Cache, Loader and Registry are
// required; zero values of the rest are the documented defaults.
type Config struct {
	// Socket is the unix socket path; "" means agentapi.DefaultSocket.
	Socket string
	// SocketMode is the socket file's mode; 0 means 0666, since peer
	// credentials, not the file mode, decide who may do what.
	SocketMode os.FileMode
	// TCPAddr, if set, also serves on TCP with TLS (TLS required).
	TCPAddr string
	// TCPListener, if set, is used instead of listening on TCPAddr (tests
	// and socket activation); the server wraps it in TLS.
	TCPListener net.Listener
	TLS         *tls.Config
	// Advertise is the https URL tenants reach TCPAddr at; when set with
	// TLS, heartbeats report it and TLS's first certificate for the
	// registry to pin. "" reports neither.
	Advertise string
	// Tenants maps unix uids to tenant names.
	Tenants map[int]string
	// Operators are uids with the operator's rights besides 0 and the
	// agent's own.
	Operators []int

	Slots    *slots.Table
	Cache    *cache.Cache
	Loader   *loader.Loader
	Registry *regclient.Client
	// NodeID is the node's registry id for heartbeats and usage; "" sends
	// none.
	NodeID string
	// Heartbeat is the heartbeat period; 0 means 30 s.
	Heartbeat time.Duration
	// Gatherer serves /metrics; nil means prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// MaxLoads bounds concurrent loads and pulls; 0 means 4.
	MaxLoads int
	Logger   *slog.Logger

	// SharedWith lists, by slot, tenants besides the one that loaded it who
	// may open sessions on it (see session.go).
	SharedWith map[int][]string
	// SessionQuotas and SessionDefaultQuota are the tenants' quotas on a
	// slot's session engine (sessions.Config).
	SessionQuotas       map[string]sessions.Quota
	SessionDefaultQuota sessions.Quota
	// JobTimeout is the longest one job may hold an engine
	// (sessions.Config.JobTimeout). Zero: sessions.DefaultJobTimeout;
	// negative: no limit.
	JobTimeout time.Duration

	// Grants are the allocation credentials the device plugin issues and
	// the accelerator pool installs (grants.go); nil: the server's own.
	Grants *Grants
	// KeepWarm is how long an image stays loaded for its tenant after the
	// tenant detached a pool attachment (pool.go); the registry's
	// --keep-warm must match. Zero: DefaultKeepWarm; negative: cleared at
	// once.
	KeepWarm time.Duration
	// PodSocket, if set, is a second unix socket, for containers (the
	// device plugin mounts its directory into them). Peer credentials
	// count for nothing there, since a container's root is uid 0 to the
	// kernel: every request needs a credential.
	PodSocket string
}

// Server serves the agent's API.
type Server struct {
	cfg   Config
	log   *slog.Logger
	mux   *http.ServeMux
	loads *loadTable
	sem   chan struct{}
	ops   map[int]bool
	hub   *hub
	pool  *pool
	beat  chan struct{} // poke

	tokMu  sync.Mutex
	tokens map[[32]byte]tokenEntry

	base    context.Context // lives as long as Serve; loads run under it
	serving chan struct{}   // closed once Serve has set base
	started sync.Once
	wg      sync.WaitGroup
}

type tokenEntry struct {
	acct    registryapi.Account
	expires time.Time
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Slots == nil || cfg.Cache == nil || cfg.Loader == nil || cfg.Registry == nil {
		return nil, errors.New("server: Slots, Cache, Loader and Registry are required")
	}
	if (cfg.TCPAddr != "" || cfg.TCPListener != nil) && cfg.TLS == nil {
		return nil, errors.New("server: TCPAddr needs a TLS config")
	}
	if cfg.Socket == "" {
		cfg.Socket = agentapi.DefaultSocket
	}
	if cfg.SocketMode == 0 {
		cfg.SocketMode = 0o666
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 30 * time.Second
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.DefaultGatherer
	}
	if cfg.MaxLoads == 0 {
		cfg.MaxLoads = 4
	}
	if cfg.Grants == nil {
		cfg.Grants = NewGrants()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, loads: newLoadTable(256), sem: make(chan struct{}, cfg.MaxLoads), serving: make(chan struct{}),
		ops: map[int]bool{0: true, os.Getuid(): true}, tokens: map[[32]byte]tokenEntry{}, base: context.Background()}
	for _, u := range cfg.Operators {
		s.ops[u] = true
	}
	s.hub = newHub(s)
	s.pool = newPool(s)
	s.beat = make(chan struct{}, 1)
	s.routes()
	return s, nil
}

// Handler returns the API's handler; peer credentials come from the
// connection context (see Serve).
func (s *Server) Handler() http.Handler { return s.mux }

type ctxKey int

const peerKey ctxKey = 0

// peer is what the kernel says about a unix-socket caller.
type peer struct {
	uid  int
	unix bool
}

// Serve listens on the socket (and TCP, if configured), runs the
// heartbeat, and serves until ctx ends; then it stops accepting, waits for
// running loads up to a minute, and returns. A Server serves once.
func (s *Server) Serve(ctx context.Context) error {
	s.started.Do(func() {
		s.base = ctx
		close(s.serving)
	})
	ul, err := listenUnix(s.cfg.Socket, s.cfg.SocketMode)
	if err != nil {
		return err
	}
	defer os.Remove(s.cfg.Socket)
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if uc, ok := c.(*net.UnixConn); ok {
				if uid, err := peerUID(uc); err == nil {
					return context.WithValue(ctx, peerKey, peer{uid: uid, unix: true})
				}
			}
			return ctx
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 3)
	go func() { errc <- srv.Serve(ul) }()
	if s.cfg.PodSocket != "" {
		pl, err := listenUnix(s.cfg.PodSocket, s.cfg.SocketMode)
		if err != nil {
			srv.Close()
			return err
		}
		// Its own server, without ConnContext: no peer credentials.
		psrv := &http.Server{Handler: s.mux, ReadHeaderTimeout: srv.ReadHeaderTimeout, IdleTimeout: srv.IdleTimeout, ErrorLog: srv.ErrorLog}
		go func() { errc <- psrv.Serve(pl) }()
		srv.RegisterOnShutdown(func() { psrv.Shutdown(context.Background()) })
		defer func() {
			psrv.Close()
			os.Remove(s.cfg.PodSocket)
		}()
		s.log.Info("listening", "pod-socket", s.cfg.PodSocket)
	}
	if s.cfg.TCPAddr != "" || s.cfg.TCPListener != nil {
		ln := s.cfg.TCPListener
		if ln == nil {
			if ln, err = net.Listen("tcp", s.cfg.TCPAddr); err != nil {
				srv.Close()
				return fmt.Errorf("server: %w", err)
			}
		}
		tl := tls.NewListener(ln, s.cfg.TLS)
		s.log.Info("listening", "tcp", tl.Addr().String())
		go func() { errc <- srv.Serve(tl) }()
	}
	s.log.Info("listening", "socket", s.cfg.Socket)
	poolDone := make(chan struct{})
	if s.cfg.NodeID != "" {
		go s.heartbeats(ctx)
		go func() { defer close(poolDone); s.pool.run(ctx) }()
	} else {
		close(poolDone)
	}
	defer func() { <-poolDone }()
	select {
	case err := <-errc:
		srv.Close()
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = srv.Shutdown(sctx)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-sctx.Done():
	}
	return err
}

// listenUnix listens on a fresh socket at path with mode. The socket is
// bound under a temporary name, given its mode and renamed into place, so
// that path appears only once it accepts connections with its final mode:
// a client started right after faasd (or waiting for the file) never
// meets a socket that refuses it.
func listenUnix(path string, mode os.FileMode) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("server: socket directory: %w", err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, "."+rand.Text()[:12]) // short: socket paths have ~107 bytes
	l, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	// Serve removes path when it stops; the temporary name is gone.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, mode); err != nil {
		l.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("server: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		l.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("server: %w", err)
	}
	return l, nil
}

// removeStaleSocket removes a socket file left by a previous run, but
// refuses to start next to a live agent.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("server: %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("server: another agent is serving %s", path)
	}
	return os.Remove(path)
}

func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return int(cred.Uid), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body of at most 64 KiB.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("request body: %v", err)
	}
	return nil
}

// heartbeat is what the node reports: its boards, and where it serves
// remote attach: the advertised URL and the certificate actually served,
// so the registry pins what tenants will see.
func (s *Server) heartbeat() registryapi.Heartbeat {
	hb := registryapi.Heartbeat{Boards: s.boards()}
	if s.cfg.Advertise != "" && s.cfg.TLS != nil && len(s.cfg.TLS.Certificates) > 0 {
		hb.Endpoint, hb.TLSCertificate = s.cfg.Advertise, string(nodecert.PEM(s.cfg.TLS.Certificates[0]))
	}
	return hb
}

// poke asks for a heartbeat now: a slot changed, and the pool places
// attachments by what the last heartbeat said.
func (s *Server) poke() {
	select {
	case s.beat <- struct{}{}:
	default:
	}
}

// heartbeats reports the node's boards and slots to the registry, every
// Config.Heartbeat and soon after a slot changes.
func (s *Server) heartbeats(ctx context.Context) {
	t := time.NewTicker(s.cfg.Heartbeat)
	defer t.Stop()
	for {
		last := time.Now()
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := s.cfg.Registry.Heartbeat(hctx, s.cfg.NodeID, s.heartbeat()); err != nil && ctx.Err() == nil {
			s.log.Warn("heartbeat failed", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.beat:
			// At once, but at most ten a second however busy the slots.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(last.Add(100 * time.Millisecond))):
			}
		}
	}
}

func (s *Server) boards() []registryapi.Board {
	var out []registryapi.Board
	byID := map[string]int{}
	for i := range s.cfg.Slots.Len() {
		sl, _ := s.cfg.Slots.Slot(i)
		rec := s.cfg.Slots.Record(i)
		b, ok := byID[sl.Board.ID]
		if !ok {
			b = len(out)
			byID[sl.Board.ID] = b
			out = append(out, registryapi.Board{Model: sl.Board.Model.Name})
		}
		st := rec.State
		switch {
		case st == "":
			st = agentapi.Cleared
		case st == agentapi.Loaded && s.hub.busy(i):
			// As the slot API shows it: a session is at work on the slot.
			st = agentapi.Busy
		}
		hs := registryapi.Slot{Index: i, State: string(st), Reason: rec.Reason, Part: sl.Chip.Part().Name}
		if rec.Image != nil {
			hs.Digest = rec.Image.Digest
		}
		out[b].Slots = append(out[b].Slots, hs)
	}
	return out
}
