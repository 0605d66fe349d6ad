package deviceplugin_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	alidnnmodel "github.com/fpga-faas/faas/bitstreams/alidnn/model"
	blankmodel "github.com/fpga-faas/faas/bitstreams/blank/model"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/agent/cache"
	"github.com/fpga-faas/faas/services/agent/device"
	devsim "github.com/fpga-faas/faas/services/agent/device/sim"
	"github.com/fpga-faas/faas/services/agent/deviceplugin"
	"github.com/fpga-faas/faas/services/agent/loader"
	"github.com/fpga-faas/faas/services/agent/regclient"
	"github.com/fpga-faas/faas/services/agent/server"
	"github.com/fpga-faas/faas/services/agent/slots"
	"github.com/fpga-faas/faas/shell/sim"
)

// rig is a node: two simulated boards (slots 0 to 3), the slot table, the
// credential store, the fake kubelet and the plugin under test.
type rig struct {
	t       testing.TB
	dir     string // short: unix socket paths are limited to 108 bytes
	boards  []*sim.Board
	table   *slots.Table
	grants  *server.Grants
	kubelet *fakeKubelet
	cfg     deviceplugin.Config
	stop    func()
}

type rigOptions struct {
	alidnn []int // slots loaded with AliDNN by tenant "alice"
	poll   time.Duration
	// grace is ReleaseGrace; 0: 2 s. The fake kubelet lists a pod's
	// devices in PodResources only once Allocate has returned, as the real
	// one does, so an allocation younger than that window must not be
	// released: under load a release tick fell between the two and freed a
	// chip its pod held (TestOneChipThreeResources, once in a make test).
	grace time.Duration
	// engines, if set, loads engines for shares on demand (Config.Engines);
	// the slots start cleared, as faasd's reconcile leaves them.
	engines func(*rig) deviceplugin.Engines
	idle    time.Duration // EngineIdle
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	roles, err := sim.NewRegistry(blankmodel.Model, alidnnmodel.Model)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dir: dir, grants: server.NewGrants()}
	var bs []*device.Board
	for i := range 2 {
		sb, err := sim.NewBoard(sim.Config{Roles: roles, DDRSize: 64 << 20, Serial: "SIM000" + string(rune('0'+i))})
		if err != nil {
			t.Fatal(err)
		}
		b, err := devsim.Open(sb)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close(); sb.Close() })
		r.boards, bs = append(r.boards, sb), append(bs, b)
	}
	if r.table, err = slots.Open(bs, filepath.Join(dir, "slots.json")); err != nil {
		t.Fatal(err)
	}
	if o.engines != nil {
		if _, err := r.table.Reconcile(context.Background(), func(string) bool { return false }); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range o.alidnn {
		r.loadAliDNN(s, "alice")
	}
	r.kubelet = startKubelet(t, filepath.Join(dir, "plugins"), filepath.Join(dir, "podres.sock"))
	if o.poll == 0 {
		o.poll = 50 * time.Millisecond
	}
	if o.grace == 0 {
		o.grace = 2 * time.Second
	}
	r.cfg = deviceplugin.Config{Slots: r.table, Grants: r.grants, PodSocket: filepath.Join(dir, "pod", "faasd.sock"),
		Dir: r.kubelet.dir, PodResources: r.kubelet.prSock, CDIDir: filepath.Join(dir, "cdi"),
		Poll: o.poll, Watch: 20 * time.Millisecond, ReleaseGrace: o.grace, ReleaseEvery: 50 * time.Millisecond, EngineIdle: o.idle}
	if o.engines != nil {
		r.cfg.Engines = o.engines(r)
		r.kubelet.preStart = true
	}
	r.start()
	return r
}

// start runs a plugin until the test ends or stop is called.
func (r *rig) start() {
	r.t.Helper()
	p, err := deviceplugin.New(r.cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stopped := false
	r.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				r.t.Errorf("Run: %v", err)
			}
		}
	}
	r.t.Cleanup(r.stop)
}

// loadAliDNN programs the AliDNN engine into slot's chip and records it
// loaded by tenant, as a load would.
func (r *rig) loadAliDNN(slot int, tenant string) {
	r.t.Helper()
	if err := r.programAliDNN(context.Background(), slot, tenant); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) programAliDNN(ctx context.Context, slot int, tenant string) error {
	sl, err := r.table.Slot(slot)
	if err != nil {
		return err
	}
	bit, err := alidnn.Bitstream(sl.Chip.Part(), 64<<10)
	if err != nil {
		return err
	}
	if _, err := sl.Chip.Program(ctx, bytes.NewReader(bit), nil); err != nil {
		return err
	}
	rec := slots.Record{State: agentapi.Loaded, Tenant: tenant, Group: []int{slot}, LoadedAt: time.Now(),
		Role:  &agentapi.Role{ID: alidnn.ID, Version: "1.0", Name: alidnn.Name},
		Image: &agentapi.Image{Ref: "example/acme/alidnn:1", Digest: "sha256:" + strings.Repeat("cd", 32)}}
	return r.table.Set([]int{slot}, rec)
}

// serveAgent runs faasd's API over the rig's slots, with the pod socket
// the plugin mounts and the rig's credentials; tenants' registry tokens
// are "tok-<name>". It returns the server and its main socket.
func (r *rig) serveAgent() (*server.Server, string) {
	t := r.t
	t.Helper()
	me := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		name, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer tok-")
		if req.URL.Path != registryapi.Prefix+"/me" || !ok || name == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		json.NewEncoder(w).Encode(registryapi.Account{ID: name + "-id", Name: name, Role: "tenant"})
	}))
	t.Cleanup(me.Close)
	reg, err := regclient.New(me.URL, "node1", "node-token", nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(filepath.Join(r.dir, "cache"), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nodeKey, _ := ecdh.X25519().GenerateKey(rand.Reader)
	pk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	l, err := loader.New(loader.Config{Slots: r.table, Cache: c, Registry: reg, NodeKey: nodeKey, PlatformKeys: []crypto.PublicKey{pk.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(r.dir, "faasd.sock")
	srv, err := server.New(server.Config{Socket: socket, PodSocket: r.cfg.PodSocket, Grants: r.grants,
		Slots: r.table, Cache: c, Loader: l, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(r.cfg.PodSocket); err == nil {
			return srv, socket
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the agent's pod socket never appeared")
	return nil, ""
}

func healthAll(ids []string, h string) map[string]string {
	out := map[string]string{}
	for _, id := range ids {
		out[id] = h
	}
	return out
}
