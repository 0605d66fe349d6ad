package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/fpga-faas/faas/services/agent/server"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// Config configures a Plugin. Slots, Grants and PodSocket are required;
// zero values of the rest are the documented defaults.
type Config struct {
	Slots *slots.Table
	// Grants issues the containers' credentials; the agent's server
	// checks them (server.Config.Grants).
	Grants *server.Grants
	// PodSocket is the host path of faasd's socket for containers
	// (server.Config.PodSocket); its directory is mounted into them.
	PodSocket string

	// Dir is the kubelet's device plugin directory, holding kubelet.sock
	// and the plugin's sockets. "": pluginapi.DevicePluginPath.
	Dir string
	// SharesPerChip is the number of faas.dev/alidnn-share devices of each
	// chip; 0: 4. At most the chip's tenant windows (7).
	SharesPerChip int
	// PodResources is the kubelet's PodResources socket, read to release
	// allocations of ended pods. "": /var/lib/kubelet/pod-resources/kubelet.sock.
	PodResources string
	// ReleaseGrace is how old an allocation must be before it may be
	// released for no pod holding its devices; 0: 30 s.
	ReleaseGrace time.Duration
	// ReleaseEvery is how often PodResources is read; 0: 10 s.
	ReleaseEvery time.Duration
	// CDIDir is where the CDI specs of the three resources are written;
	// "": /var/run/cdi. If they cannot be written, responses carry no CDI
	// names.
	CDIDir string
	// Poll is the period of the health checks; 0: 250 ms.
	Poll time.Duration
	// Watch is how often the sockets are checked for a kubelet restart;
	// 0: 1 s.
	Watch time.Duration
	// CoolDown is how far below its limit an overheated chip must cool
	// before it is healthy again, in °C; 0: 5.
	CoolDown float64
	// Engines, if set, offers the shares of empty chips too: the kubelet
	// may allocate them before the chip holds an AliDNN engine, and the
	// plugin loads one (Engines.LoadEngine) before the container starts
	// (PreStartContainer), so that a fresh node runs share pods at once.
	// A chip allocated whole is cleared of such an engine before its
	// container starts. Nil: shares only on chips a tenant loaded.
	Engines Engines
	// EngineIdle is how long an engine loaded for shares stays on its
	// chip with no share allocated before it is cleared; 0: 5 min.
	EngineIdle time.Duration
	Logger     *slog.Logger
}

// DefaultPodResources is Config.PodResources' default.
const DefaultPodResources = "/var/lib/kubelet/pod-resources/kubelet.sock"

// maxShares bounds SharesPerChip: a share is a tenant window, and windows
// 1 to 7 are the tenants'.
const maxShares = 7

// Plugin is the device plugin: three resource servers over one inventory.
type Plugin struct {
	cfg Config
	log *slog.Logger
	inv *inventory
	res [numKinds]*resource
	cdi bool // CDI specs written: responses name CDI devices
	eng engines
	ctx context.Context // Run's: on-demand loads outlive the request
}

// New returns a Plugin.
func New(cfg Config) (*Plugin, error) {
	if cfg.Slots == nil || cfg.Grants == nil || cfg.PodSocket == "" {
		return nil, errors.New("deviceplugin: Slots, Grants and PodSocket are required")
	}
	if !filepath.IsAbs(cfg.PodSocket) {
		return nil, fmt.Errorf("deviceplugin: pod socket %q: want an absolute path", cfg.PodSocket)
	}
	if cfg.Dir == "" {
		cfg.Dir = pluginapi.DevicePluginPath
	}
	if cfg.SharesPerChip == 0 {
		cfg.SharesPerChip = 4
	}
	if cfg.SharesPerChip < 1 || cfg.SharesPerChip > maxShares {
		return nil, fmt.Errorf("deviceplugin: %d shares per chip: want 1 to %d (a share is one of the chip's tenant windows)", cfg.SharesPerChip, maxShares)
	}
	if cfg.PodResources == "" {
		cfg.PodResources = DefaultPodResources
	}
	if cfg.ReleaseGrace == 0 {
		cfg.ReleaseGrace = 30 * time.Second
	}
	if cfg.ReleaseEvery == 0 {
		cfg.ReleaseEvery = 10 * time.Second
	}
	if cfg.CDIDir == "" {
		cfg.CDIDir = "/var/run/cdi"
	}
	if cfg.Poll == 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.Watch == 0 {
		cfg.Watch = time.Second
	}
	if cfg.CoolDown == 0 {
		cfg.CoolDown = 5
	}
	if cfg.EngineIdle == 0 {
		cfg.EngineIdle = 5 * time.Minute
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Plugin{cfg: cfg, log: log, inv: newInventory(cfg.Slots.Len(), cfg.SharesPerChip), ctx: context.Background(),
		eng: engines{loads: map[int]*engineLoad{}, idle: map[int]time.Time{}}}
	for k := range numKinds {
		p.res[k] = &resource{p: p, kind: k, socket: filepath.Join(cfg.Dir, socketNames[k])}
	}
	return p, nil
}

var socketNames = [numKinds]string{"faasd-chip.sock", "faasd-board.sock", "faasd-alidnn-share.sock"}

// Run serves the three resources and keeps them registered with the
// kubelet until ctx ends.
func (p *Plugin) Run(ctx context.Context) error {
	p.ctx = ctx
	// Allocate mounts the pod socket's directory: it must exist even
	// before the agent serves there.
	if err := os.MkdirAll(filepath.Dir(p.cfg.PodSocket), 0o755); err != nil {
		return fmt.Errorf("deviceplugin: %w", err)
	}
	p.checkAll()
	if err := p.writeCDISpecs(); err != nil {
		p.log.Warn("CDI specs not written; responses name no CDI devices", "dir", p.cfg.CDIDir, "err", err)
	} else {
		p.cdi = true
	}
	// Adopt what pods still hold before offering anything.
	if err := p.release(ctx); err != nil {
		p.log.Warn("pod resources unavailable: allocations end only when the kubelet reallocates their devices", "err", err)
	}
	go p.monitor(ctx)
	go p.releaseLoop(ctx)
	backoff := p.cfg.Watch
	for {
		err := p.serveOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		p.log.Warn("device plugin serving again", "reason", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}

// serveOnce listens on fresh sockets, registers every resource and serves
// until ctx ends or the kubelet restarts (its socket changes or ours
// vanish); the error says which.
func (p *Plugin) serveOnce(ctx context.Context) error {
	var servers []*grpc.Server
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
	}()
	ids := make([]fileID, numKinds)
	for k, r := range p.res {
		os.Remove(r.socket) // ours from an earlier run, or the kubelet's stale copy
		l, err := net.Listen("unix", r.socket)
		if err != nil {
			return fmt.Errorf("deviceplugin: %w", err)
		}
		s := grpc.NewServer()
		pluginapi.RegisterDevicePluginServer(s, r)
		servers = append(servers, s)
		go s.Serve(l)
		if ids[k], err = statID(r.socket); err != nil {
			return err
		}
	}
	kubelet := filepath.Join(p.cfg.Dir, filepath.Base(pluginapi.KubeletSocket))
	kid, err := p.waitFile(ctx, kubelet)
	if err != nil {
		return err
	}
	for _, r := range p.res {
		if err := p.register(ctx, kubelet, r); err != nil {
			return err
		}
	}
	p.log.Info("registered with the kubelet", "dir", p.cfg.Dir)
	t := time.NewTicker(p.cfg.Watch)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			for _, r := range p.res {
				os.Remove(r.socket)
			}
			return ctx.Err()
		case <-t.C:
		}
		if id, err := statID(kubelet); err != nil || id != kid {
			return errors.New("kubelet.sock changed: the kubelet restarted")
		}
		for k, r := range p.res {
			if id, err := statID(r.socket); err != nil || id != ids[k] {
				return fmt.Errorf("%s: socket %s removed", r.kind, r.socket)
			}
		}
	}
}

// fileID tells one file from another made later at the same path: the
// inode number alone does not, since a file system may reuse it at once.
type fileID struct {
	dev, ino    uint64
	csec, cnsec int64
}

func statID(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, fmt.Errorf("deviceplugin: %s: no inode", path)
	}
	return fileID{uint64(st.Dev), st.Ino, st.Ctim.Sec, st.Ctim.Nsec}, nil
}

// waitFile waits for path to exist.
func (p *Plugin) waitFile(ctx context.Context, path string) (fileID, error) {
	for {
		id, err := statID(path)
		if err == nil {
			return id, nil
		}
		select {
		case <-ctx.Done():
			return fileID{}, ctx.Err()
		case <-time.After(p.cfg.Watch):
		}
	}
}

// register tells the kubelet at socket about resource r.
func (p *Plugin) register(ctx context.Context, socket string, r *resource) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("deviceplugin: kubelet: %w", err)
	}
	defer conn.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(rctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(r.socket),
		ResourceName: r.kind.String(),
		Options:      p.options(),
	}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("deviceplugin: registering %s: %w", r.kind, err)
	}
	return nil
}

// options are every resource's: PreStartContainer is needed only to load
// and clear engines on demand.
func (p *Plugin) options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true, PreStartRequired: p.cfg.Engines != nil}
}
