package server_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	alidnnmodel "github.com/fpga-faas/faas/bitstreams/alidnn/model"
	blankmodel "github.com/fpga-faas/faas/bitstreams/blank/model"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/agent/cache"
	"github.com/fpga-faas/faas/services/agent/device"
	devsim "github.com/fpga-faas/faas/services/agent/device/sim"
	"github.com/fpga-faas/faas/services/agent/loader"
	"github.com/fpga-faas/faas/services/agent/regclient"
	"github.com/fpga-faas/faas/services/agent/server"
	"github.com/fpga-faas/faas/services/agent/slots"
	"github.com/fpga-faas/faas/shell/sim"
)

// The session tests run a real agent (server, slot table, session engine)
// over a simulated board whose chips have the AliDNN engine programmed.
// Tenants authenticate with tokens "tok-<name>", which a stand-in for the
// registry's GET /api/v1/me accepts: on the unix socket every process of the
// test runs under the test's own uid, which the agent takes for the
// operator, and a tenant token is how one uid acts as several tenants (the
// agent names the session by the token's tenant).

// tbLike is what the helpers need of a testing.TB; exampleTB provides it
// for the runnable examples, which have none.
type tbLike interface {
	Helper()
	Fatal(args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// exampleTB runs the helpers outside a test: failures panic, cleanups run
// at done.
type exampleTB struct {
	cleanups []func()
}

func (*exampleTB) Helper()                           {}
func (*exampleTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (*exampleTB) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (e *exampleTB) Cleanup(f func())                { e.cleanups = append(e.cleanups, f) }
func (e *exampleTB) TempDir() string {
	dir, err := os.MkdirTemp("", "faas-example-")
	if err != nil {
		panic(err)
	}
	e.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (e *exampleTB) done() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}

// tenantToken is the token of tenant name.
func tenantToken(name string) string { return "tok-" + name }

// fakeMe answers the registry's GET /api/v1/me for tenantToken tokens.
func fakeMe(t tbLike) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer tok-")
		if r.URL.Path != registryapi.Prefix+"/me" || !ok || name == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		json.NewEncoder(w).Encode(registryapi.Account{ID: name + "-id", Name: name, Role: "tenant"})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type sessAgent struct {
	socket string
	tcp    string
	roots  *x509.CertPool
	srv    *server.Server
	table  *slots.Table
	chips  []*device.Chip
	grants *server.Grants
}

type sessOptions struct {
	tls bool
	// sharedWith: nil shares both slots with sharedTenants.
	sharedWith map[int][]string
	ddr        uint64 // per chip; 0: 64 MiB
	logger     bool
	jobTimeout time.Duration
}

// sharedTenants are the tenants besides alice that the session tests run
// on alice's slots, as the operator shares a chip between tenants.
var sharedTenants = []string{"carol", "mallory", "fuzz", "t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"}

// startSessAgent starts an agent whose two slots hold the AliDNN engine,
// loaded by tenant "alice".
func startSessAgent(t tbLike, o sessOptions) *sessAgent {
	t.Helper()
	ctx := context.Background()
	if o.ddr == 0 {
		o.ddr = 64 << 20
	}
	if o.sharedWith == nil {
		o.sharedWith = map[int][]string{0: sharedTenants, 1: sharedTenants}
	}
	roles, err := sim.NewRegistry(blankmodel.Model, alidnnmodel.Model)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sim.NewBoard(sim.Config{Roles: roles, DDRSize: o.ddr})
	if err != nil {
		t.Fatal(err)
	}
	b, err := devsim.Open(sb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	dir := t.TempDir()
	table, err := slots.Open([]*device.Board{b}, filepath.Join(dir, "slots.json"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, chip := range b.Chips {
		bit, err := alidnn.Bitstream(chip.Part(), 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := chip.Program(ctx, bytes.NewReader(bit), nil); err != nil {
			t.Fatal(err)
		}
		rec := slots.Record{State: agentapi.Loaded, Tenant: "alice", Group: []int{i}, LoadedAt: now,
			Role:  &agentapi.Role{ID: alidnn.ID, Version: "1.0", Name: alidnn.Name},
			Image: &agentapi.Image{Ref: "example/acme/alidnn:1", Digest: "sha256:" + strings.Repeat("cd", 32)}}
		if err := table.Set([]int{i}, rec); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := regclient.New(fakeMe(t), "node1", "node-token", nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(filepath.Join(dir, "cache"), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nodeKey, _ := ecdh.X25519().GenerateKey(rand.Reader)
	pk, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	l, err := loader.New(loader.Config{Slots: table, Cache: c, Registry: reg, NodeKey: nodeKey, PlatformKeys: []crypto.PublicKey{pk.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	a := &sessAgent{socket: filepath.Join(dir, "faasd.sock"), table: table, chips: b.Chips[:], grants: server.NewGrants()}
	cfg := server.Config{Socket: a.socket, Slots: table, Cache: c, Loader: l, Registry: reg, SharedWith: o.sharedWith, JobTimeout: o.jobTimeout,
		Grants: a.grants}
	if o.tls {
		cert, pool := sessSelfSigned(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg.TCPListener, cfg.TLS = ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
		a.tcp, a.roots = ln.Addr().String(), pool
	}
	if a.srv, err = server.New(cfg); err != nil {
		t.Fatal(err)
	}
	serve(t, a.srv, a.socket)
	return a
}

// serve runs srv until the test ends, or stop, and waits for its socket.
func serve(t tbLike, srv *server.Server, socket string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	for range 500 {
		if _, err := os.Stat(socket); err == nil {
			return stop
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the agent's socket never appeared")
	return stop
}

func sessSelfSigned(t tbLike) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "faasd"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// openDevice dials target as tenant and opens slot.
func openDevice(t tbLike, target, tenant string, slot int, opts ...faas.Option) *faas.Device {
	t.Helper()
	ctx := context.Background()
	c, err := faas.Dial(ctx, target, append(opts, faas.WithToken(tenantToken(tenant)))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	d, err := c.Open(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
