package main

import (
	"crypto"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/boards"
	"github.com/fpga-faas/faas/services/agent/cache"
	"github.com/fpga-faas/faas/services/agent/device"
	devsim "github.com/fpga-faas/faas/services/agent/device/sim"
	"github.com/fpga-faas/faas/services/agent/deviceplugin"
	"github.com/fpga-faas/faas/services/agent/identity"
	"github.com/fpga-faas/faas/services/agent/loader"
	"github.com/fpga-faas/faas/services/agent/mirror"
	"github.com/fpga-faas/faas/services/agent/regclient"
	"github.com/fpga-faas/faas/services/agent/server"
	"github.com/fpga-faas/faas/services/agent/sessions"
	"github.com/fpga-faas/faas/services/agent/slots"
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/sim"
)

type serveFlags struct {
	socket, stateDir, cacheDir, registry, nodeUser, nodeTokenFile, enrollmentFile, hostname string
	cacheMax                                                                                int64
	trustKeys, tenants, shares, mirrors                                                     []string
	operators                                                                               []int
	listen, tlsCert, tlsKey, advertise                                                      string
	sim                                                                                     int
	simModel                                                                                string
	simShellMinor                                                                           uint16
	simFresh                                                                                bool
	simDDR                                                                                  uint64
	simOverheat                                                                             []int
	jobTimeout, heartbeat, keepWarm                                                         time.Duration
	devicePlugin                                                                            bool
	pluginDir, podSocket, podResources, cdiDir                                              string
	sharesPerChip                                                                           int
	shareImage, shareTokenFile                                                              string
	shareIdle                                                                               time.Duration
}

func serveCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --registry URL --node-user NAME --trust-key PUB [--sim N]",
		Short: "Run the node agent: own the boards, serve loads and the API",
		Long: `serve owns the FPGA boards of this host (or N simulated boards with --sim N),
reconciles every slot with its chip, and serves the agent API on a unix socket
(and on TCP with TLS when --listen is given).
With --listen and no --tls-cert/--tls-key it serves its own certificate,
kept in --state-dir (tls.crt, tls.key), and reports it and --advertise in
heartbeats; the registry pins it (registry nodes repin NODE clears the pin).

The node authenticates to the registry as a node account: --node-user and an
API token read from --node-token-file or $FAAS_NODE_TOKEN. It registers itself
on first start and keeps its X25519 key and node id in --state-dir. The
registry releases no data key to a node until an operator approves it
(registry nodes approve), unless it registers with a one-time enrollment
token (registry nodes enroll) read from --enrollment-token-file or
$FAAS_ENROLLMENT_TOKEN.
--trust-key names the platform's countersigning public key(s): the trust
policy every image must satisfy.

--device-plugin also serves the Kubernetes device plugin (faas.dev/chip,
faas.dev/board, faas.dev/alidnn-share). Shares exist on chips holding a
loaded AliDNN engine; with --share-image on empty chips too, so that share
pods run on a fresh node: faasd loads the image onto a chip, as the account
of --share-token-file (a dedicated account of the operator, subscribed to
the image's listing, which the engine's time is billed to), before the first
container of its shares starts, and clears it again after --share-idle
without shares or when the chip is allocated whole.

--registry-mirror sends the layer pulls (blob GETs by digest) to a registry
mirror first, such as the local Dragonfly dfdaemon: tried in order, with
containerd's ?ns=<registry host> (and dfdaemon's X-Dragonfly-Registry
header), falling back to the registry when a mirror
fails. Manifests, tags and tokens always come from the registry, and every
byte from a mirror is checked against its digest, so mirrors are not trusted;
they see the short-lived pull token of the repository, never the tenant's or
the node's credentials.

Exit codes: 0 stopped by a signal; 2 bad configuration or a start-up failure.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.socket, "socket", env("FAASD_SOCKET", agentapi.DefaultSocket), "unix socket of the API [$FAASD_SOCKET]")
	fl.StringVar(&f.stateDir, "state-dir", env("FAASD_STATE_DIR", "/var/lib/faasd"), "slot state, node identity and (by default) the cache [$FAASD_STATE_DIR]")
	fl.StringVar(&f.cacheDir, "cache-dir", os.Getenv("FAASD_CACHE_DIR"), "node cache directory (default STATE_DIR/cache) [$FAASD_CACHE_DIR]")
	fl.Int64Var(&f.cacheMax, "cache-max-bytes", 10<<30, "node cache size limit")
	fl.StringVar(&f.registry, "registry", os.Getenv("FAAS_REGISTRY"), "registry URL, e.g. https://registry:5000 [$FAAS_REGISTRY]")
	fl.StringVar(&f.nodeUser, "node-user", os.Getenv("FAAS_NODE_USER"), "node account in the registry [$FAAS_NODE_USER]")
	fl.StringVar(&f.nodeTokenFile, "node-token-file", os.Getenv("FAAS_NODE_TOKEN_FILE"), "file holding the node account's API token (else $FAAS_NODE_TOKEN)")
	fl.StringVar(&f.enrollmentFile, "enrollment-token-file", os.Getenv("FAAS_ENROLLMENT_TOKEN_FILE"), "file holding a one-time enrollment token, used at first registration (else $FAAS_ENROLLMENT_TOKEN)")
	fl.StringVar(&f.hostname, "hostname", os.Getenv("FAASD_HOSTNAME"), "name to register the node under (default the host name) [$FAASD_HOSTNAME]")
	fl.StringArrayVar(&f.trustKeys, "trust-key", splitList(os.Getenv("FAASD_TRUST_KEYS")), "platform countersigning public key, PEM (repeatable) [$FAASD_TRUST_KEYS, comma-separated]")
	fl.StringArrayVar(&f.mirrors, "registry-mirror", splitList(os.Getenv("FAASD_REGISTRY_MIRRORS")), "pull layers through this registry mirror or P2P proxy first, e.g. http://127.0.0.1:65001 (repeatable) [$FAASD_REGISTRY_MIRRORS, comma-separated]")
	fl.StringArrayVar(&f.tenants, "tenant", nil, "map a local uid to a tenant: UID=NAME (repeatable)")
	fl.IntSliceVar(&f.operators, "operator", nil, "uids with operator rights besides 0 and faasd's own")
	fl.StringArrayVar(&f.shares, "share", nil, "let tenants open sessions on a slot loaded by another: SLOT=NAME[,NAME…] (repeatable)")
	fl.DurationVar(&f.jobTimeout, "job-timeout", sessions.DefaultJobTimeout, "abort a tenant's job that holds an engine longer than this (negative: no limit)")
	fl.DurationVar(&f.heartbeat, "heartbeat", 30*time.Second, "how often to report the node's slots to the registry; the registry's --node-lost-after must be a few of these")
	fl.DurationVar(&f.keepWarm, "keep-warm", server.DefaultKeepWarm, "keep a detached pool attachment's image loaded this long for its tenant's next attach (negative: clear at once); the registry's --keep-warm must match")
	fl.BoolVar(&f.devicePlugin, "device-plugin", false, "also run the Kubernetes device plugin (faas.dev/chip, faas.dev/board, faas.dev/alidnn-share)")
	fl.StringVar(&f.pluginDir, "device-plugin-dir", pluginapi.DevicePluginPath, "the kubelet's device plugin directory (kubelet.sock)")
	fl.IntVar(&f.sharesPerChip, "shares-per-chip", 4, "faas.dev/alidnn-share devices per chip holding an AliDNN engine (1-7)")
	fl.StringVar(&f.podSocket, "pod-socket", "/run/faas/pods/faasd.sock", "with --device-plugin: the socket containers reach faasd on; its directory is mounted into them, so keep it apart from --socket")
	fl.StringVar(&f.podResources, "pod-resources-socket", deviceplugin.DefaultPodResources, "the kubelet's PodResources socket, read to release the devices of ended pods")
	fl.StringVar(&f.cdiDir, "cdi-spec-dir", "/var/run/cdi", "where the device plugin writes its CDI specs")
	fl.StringVar(&f.shareImage, "share-image", "", "with --device-plugin: offer faas.dev/alidnn-share on empty chips too, loading this AliDNN image onto a chip before the first container of its shares starts (as the account of --share-token-file; cleared after --share-idle without shares)")
	fl.StringVar(&f.shareTokenFile, "share-token-file", os.Getenv("FAAS_SHARE_TOKEN_FILE"), "file holding the registry API token of the account that loads --share-image, subscribed to its listing (else $FAAS_SHARE_TOKEN)")
	fl.DurationVar(&f.shareIdle, "share-idle", 5*time.Minute, "how long an engine loaded for shares stays on its chip with no share allocated")
	fl.StringVar(&f.listen, "listen", "", "also serve on TCP with TLS at this address (remote attach)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate for --listen")
	fl.StringVar(&f.tlsKey, "tls-key", "", "TLS key for --listen")
	fl.StringVar(&f.advertise, "advertise", "", "https URL tenants reach --listen at, reported to the registry (default https://HOSTNAME:LISTEN-PORT)")
	fl.IntVar(&f.sim, "sim", 0, "run on N simulated boards instead of the host's")
	fl.StringVar(&f.simModel, "sim-model", shell.ModelVU9PDual.Name, "board model of simulated boards")
	fl.Uint16Var(&f.simShellMinor, "sim-shell-minor", 0, "simulated boards run shell 1.N")
	fl.BoolVar(&f.simFresh, "sim-fresh", false, "power simulated boards up empty instead of as faasd last left them (STATE_DIR/sim/)")
	fl.Uint64Var(&f.simDDR, "sim-ddr-bytes", 0, "DDR per simulated chip (default the model's)")
	fl.IntSliceVar(&f.simOverheat, "sim-overheat", nil, "simulated chips of these slots run over their temperature limit (a fault, for tests of health and of the device plugin)")
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// serveSettings are what serve reads from its flags, the environment and
// the files they name before it opens anything.
type serveSettings struct {
	token, enrollment string
	trust             []crypto.PublicKey
	mirrors           []*url.URL
	tenants           map[int]string
	shared            map[int][]string
	shareToken        string // of the account that loads --share-image
}

func serve(cmd *cobra.Command, f serveFlags) error {
	ctx := cmd.Context()
	log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
	st, err := readServeSettings(f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.stateDir, 0o700); err != nil {
		return err
	}
	if f.cacheDir == "" {
		f.cacheDir = filepath.Join(f.stateDir, "cache")
	}
	if f.hostname == "" {
		f.hostname, _ = os.Hostname()
	}

	bs, err := openBoardsForServe(cmd, f)
	if err != nil {
		return err
	}
	defer func() {
		for _, b := range bs {
			b.Close()
		}
	}()
	reg, err := regclient.New(f.registry, f.nodeUser, st.token, nil)
	if err != nil {
		return err
	}
	reg.WithEnrollmentToken(st.enrollment).WithLogger(log.With("component", "regclient"))
	// Usage the registry has not taken yet outlives this process.
	if err := reg.SpoolUsage(filepath.Join(f.stateDir, "usage")); err != nil {
		log.Error("usage spool", "err", err)
	}
	node, err := identity.Load(ctx, f.stateDir, f.registry, f.hostname, reg)
	if err != nil {
		return err
	}
	table, err := slots.Open(bs, filepath.Join(f.stateDir, "slots.json"))
	if err != nil {
		return err
	}
	c, err := cache.Open(f.cacheDir, cache.Options{MaxBytes: f.cacheMax})
	if err != nil {
		return err
	}
	wiped, err := table.Reconcile(ctx, c.Has)
	if err != nil {
		log.Error("reconcile", "err", err)
	}
	log.Info("reconciled", "slots", table.Len(), "cleared", wiped)

	metrics := prometheus.NewRegistry()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	pulls, err := pullTransport(reg, st.mirrors, metrics, log)
	if err != nil {
		return err
	}
	ld, err := loader.New(loader.Config{Slots: table, Cache: c, Registry: reg, NodeID: node.ID, NodeKey: node.Key,
		PlatformKeys: st.trust, Transport: pulls, Metrics: loader.NewMetrics(metrics), Logger: log})
	if err != nil {
		return err
	}
	metrics.MustRegister(server.NewCollector(table, c))
	cfg := server.Config{Socket: f.socket, Tenants: st.tenants, Operators: f.operators, Slots: table, Cache: c,
		Loader: ld, Registry: reg, NodeID: node.ID, Gatherer: metrics, Logger: log, SharedWith: st.shared,
		JobTimeout: f.jobTimeout, Heartbeat: f.heartbeat, KeepWarm: f.keepWarm}
	if err := configureListen(f, node.ID, &cfg); err != nil {
		return err
	}
	if f.devicePlugin {
		cfg.Grants, cfg.PodSocket = server.NewGrants(), f.podSocket
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	plugin, err := newDevicePlugin(f, st, table, srv, cfg.Grants, log)
	if err != nil {
		return err
	}
	metrics.MustRegister(srv.EngineCollector())
	if plugin != nil {
		go func() {
			if err := plugin.Run(ctx); err != nil {
				log.Error("device plugin stopped", "err", err)
			}
		}()
	}
	log.Info("faasd ready", "socket", f.socket, "node", node.ID, "boards", len(bs), "device-plugin", f.devicePlugin,
		"registry-mirrors", f.mirrors)
	return srv.Serve(ctx)
}

// readServeSettings checks the required flags and reads the tokens, trust
// keys, mirrors, tenants and shares.
func readServeSettings(f serveFlags) (*serveSettings, error) {
	if f.registry == "" || f.nodeUser == "" || len(f.trustKeys) == 0 {
		return nil, errors.New("--registry, --node-user and --trust-key are required")
	}
	st := &serveSettings{}
	var err error
	if st.token, err = secret(f.nodeTokenFile, "FAAS_NODE_TOKEN"); err != nil {
		return nil, err
	}
	if st.token == "" {
		return nil, errors.New("no node token: set --node-token-file or $FAAS_NODE_TOKEN")
	}
	if st.enrollment, err = secret(f.enrollmentFile, "FAAS_ENROLLMENT_TOKEN"); err != nil {
		return nil, err
	}
	for _, p := range f.trustKeys {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		k, err := sign.LoadPublicKey(b)
		if err != nil {
			return nil, fmt.Errorf("--trust-key %s: %w", p, err)
		}
		st.trust = append(st.trust, k)
	}
	for _, m := range f.mirrors {
		u, err := mirror.ParseURL(m)
		if err != nil {
			return nil, fmt.Errorf("--registry-mirror: %w", err)
		}
		st.mirrors = append(st.mirrors, u)
	}
	if st.tenants, err = parseTenants(f.tenants); err != nil {
		return nil, err
	}
	if st.shared, err = parseShares(f.shares); err != nil {
		return nil, err
	}
	if err := checkPluginFlags(f); err != nil {
		return nil, err
	}
	if f.shareImage != "" {
		if st.shareToken, err = secret(f.shareTokenFile, "FAAS_SHARE_TOKEN"); err != nil {
			return nil, err
		}
		if st.shareToken == "" {
			return nil, errors.New("--share-image: no token of the account that loads it: set --share-token-file or $FAAS_SHARE_TOKEN")
		}
	}
	return st, nil
}

// secret is the trimmed content of file, or, without one, $envVar.
func secret(file, envVar string) (string, error) {
	if file == "" {
		return os.Getenv(envVar), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// parseTenants reads --tenant's UID=NAME mappings.
func parseTenants(flags []string) (map[int]string, error) {
	tenants := map[int]string{}
	for _, t := range flags {
		u, name, ok := strings.Cut(t, "=")
		uid, err := strconv.Atoi(u)
		if !ok || err != nil || name == "" {
			return nil, fmt.Errorf("--tenant %q: want UID=NAME", t)
		}
		tenants[uid] = name
	}
	return tenants, nil
}

// parseShares reads --share's SLOT=NAME[,NAME…] grants.
func parseShares(flags []string) (map[int][]string, error) {
	shared := map[int][]string{}
	for _, sh := range flags {
		n, names, ok := strings.Cut(sh, "=")
		slot, err := strconv.Atoi(n)
		if !ok || err != nil || slot < 0 || names == "" {
			return nil, fmt.Errorf("--share %q: want SLOT=NAME[,NAME…]", sh)
		}
		shared[slot] = append(shared[slot], strings.Split(names, ",")...)
	}
	return shared, nil
}

// pullTransport is the transport of layer pulls: through the mirrors, if
// any; nil (the loader's default) otherwise.
func pullTransport(reg *regclient.Client, mirrors []*url.URL, metrics *prometheus.Registry, log *slog.Logger) (http.RoundTripper, error) {
	if len(mirrors) == 0 {
		return nil, nil
	}
	// dfdaemon takes the origin from this header rather than from its
	// own registryMirror.addr, so one dfdaemon serves containerd's
	// pulls and faasd's; other mirrors ignore it.
	scheme := "https"
	if reg.Insecure() {
		scheme = "http"
	}
	origin := http.Header{"X-Dragonfly-Registry": {scheme + "://" + reg.Host()}}
	return mirror.New(mirror.Config{Registry: reg.Host(), Mirrors: mirrors, Header: origin,
		Metrics: mirror.NewMetrics(metrics), Logger: log.With("component", "mirror")})
}

// configureListen checks --heartbeat and sets up --listen's TLS and the
// URL advertised for it.
func configureListen(f serveFlags, nodeID string, cfg *server.Config) error {
	if f.heartbeat <= 0 {
		return errors.New("--heartbeat must be positive")
	}
	if f.listen == "" && (f.advertise != "" || f.tlsCert != "" || f.tlsKey != "") {
		return errors.New("--advertise, --tls-cert and --tls-key need --listen")
	}
	if f.listen == "" {
		return nil
	}
	var err error
	if cfg.TLS, err = listenTLS(f, nodeID); err != nil {
		return err
	}
	if cfg.Advertise, err = advertiseURL(f.advertise, f.hostname, f.listen); err != nil {
		return err
	}
	cfg.TCPAddr = f.listen
	return nil
}

// checkPluginFlags checks the device plugin's flags against each other.
func checkPluginFlags(f serveFlags) error {
	if !f.devicePlugin {
		if f.shareImage != "" {
			return errors.New("--share-image needs --device-plugin")
		}
		return nil
	}
	if filepath.Dir(f.podSocket) == filepath.Dir(f.socket) {
		return fmt.Errorf("--pod-socket %s: its directory is mounted into containers, so it must not hold --socket %s", f.podSocket, f.socket)
	}
	if f.shareIdle <= 0 {
		return fmt.Errorf("--share-idle %v: want a positive duration", f.shareIdle)
	}
	return nil
}

// newDevicePlugin makes the Kubernetes device plugin if --device-plugin
// asks for it, issuing credentials from grants, which srv checks.
func newDevicePlugin(f serveFlags, st *serveSettings, table *slots.Table, srv *server.Server, grants *server.Grants, log *slog.Logger) (*deviceplugin.Plugin, error) {
	if !f.devicePlugin {
		return nil, nil
	}
	cfg := deviceplugin.Config{Slots: table, Grants: grants, PodSocket: f.podSocket,
		Dir: f.pluginDir, SharesPerChip: f.sharesPerChip, PodResources: f.podResources, CDIDir: f.cdiDir,
		EngineIdle: f.shareIdle, Logger: log.With("component", "deviceplugin")}
	if f.shareImage != "" {
		cfg.Engines = srv.Engines(f.shareImage, st.shareToken)
	}
	return deviceplugin.New(cfg)
}

// simOverheatC is the die temperature of --sim-overheat chips, in m°C:
// above the simulated shell's 100 °C limit.
const simOverheatC = 105_000

func openBoardsForServe(cmd *cobra.Command, f serveFlags) ([]*device.Board, error) {
	if f.sim == 0 {
		bs, err := boards.Host{}.Open(cmd.Context())
		if err != nil && len(bs) == 0 {
			return nil, err
		}
		if err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), "faasd: some boards could not be opened:", err)
		}
		if len(bs) == 0 {
			return nil, errors.New("no FaaS boards found (use --sim N for simulated boards)")
		}
		return bs, nil
	}
	model, err := shell.ModelByName(f.simModel)
	if err != nil {
		return nil, err
	}
	roles, err := simRoles()
	if err != nil {
		return nil, err
	}
	for _, s := range f.simOverheat {
		if s < 0 || s >= f.sim*shell.ChipsPerBoard {
			return nil, fmt.Errorf("--sim-overheat %d: no such slot on %d simulated boards", s, f.sim)
		}
	}
	var out []*device.Board
	for i := range f.sim {
		serial := fmt.Sprintf("SIM%04d", i)
		// Simulated boards keep their chips' configuration across faasd
		// restarts, as real boards do; --sim-fresh powers them up empty.
		state := filepath.Join(f.stateDir, "sim", serial+".json")
		if f.simFresh {
			if err := os.Remove(state); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
		b, err := sim.NewBoard(sim.Config{Model: model, Serial: serial, Roles: roles, ShellMinor: f.simShellMinor, DDRSize: f.simDDR, StateFile: state})
		if err != nil {
			return nil, err
		}
		for _, s := range f.simOverheat {
			if s/shell.ChipsPerBoard == i {
				b.Chip(s % shell.ChipsPerBoard).SetTemperature(simOverheatC)
			}
		}
		db, err := devsim.Open(b)
		if err != nil {
			return nil, err
		}
		out = append(out, db)
	}
	return out, nil
}
