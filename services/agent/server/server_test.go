package server_test

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	alidnnmodel "github.com/fpga-faas/faas/bitstreams/alidnn/model"
	blankmodel "github.com/fpga-faas/faas/bitstreams/blank/model"
	loopbackmodel "github.com/fpga-faas/faas/bitstreams/loopback/model"
	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/agent/cache"
	"github.com/fpga-faas/faas/services/agent/device"
	devsim "github.com/fpga-faas/faas/services/agent/device/sim"
	"github.com/fpga-faas/faas/services/agent/identity"
	"github.com/fpga-faas/faas/services/agent/loader"
	"github.com/fpga-faas/faas/services/agent/nodecert"
	"github.com/fpga-faas/faas/services/agent/regclient"
	"github.com/fpga-faas/faas/services/agent/server"
	"github.com/fpga-faas/faas/services/agent/slots"
	"github.com/fpga-faas/faas/services/registry/auth"
	regserver "github.com/fpga-faas/faas/services/registry/server"
	"github.com/fpga-faas/faas/services/registry/validation"
	"github.com/fpga-faas/faas/shell/sim"
)

// registry is a running registry service with tenants alice and bob, a node
// account and an admin, each with an API token.
type registry struct {
	url      string
	tokens   map[string]string
	platform []crypto.PublicKey
	// srv and platformDir are for tests that publish images (pool_test.go).
	srv         *regserver.Server
	platformDir string
}

const password = "correct horse battery staple"

func startRegistry(t *testing.T) *registry {
	t.Helper()
	pg := testenv.Postgres(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &registry{url: "http://" + ln.Addr().String(), tokens: map[string]string{}, platformDir: filepath.Join(dir, "platform")}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := regserver.Open(ctx, regserver.Config{DatabaseURL: pg.URL, DataDir: filepath.Join(dir, "data"),
		KeyDir: filepath.Join(dir, "keys"), PlatformKeyDir: filepath.Join(dir, "platform"), Realm: r.url + "/auth/token",
		PasswordParams: auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = srv
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close(); ln.Close() })
	for _, a := range []struct {
		name string
		role auth.Role
	}{{"alice", auth.RoleTenant}, {"bob", auth.RoleTenant}, {"node1", auth.RoleNode}, {"admin", auth.RoleAdmin}} {
		if _, err := srv.CreateUser(ctx, a.name, a.role, password); err != nil {
			t.Fatal(err)
		}
		var tok struct{ Secret string }
		r.api(t, a.name, "POST", "/tokens", map[string]string{"name": "test"}, &tok)
		r.tokens[a.name] = tok.Secret
	}
	pub, err := os.ReadFile(filepath.Join(dir, "platform", validation.SigningPubFile))
	if err != nil {
		t.Fatal(err)
	}
	pk, err := sign.LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	r.platform = []crypto.PublicKey{pk}
	return r
}

// api calls the registry's /api/v1 as who, through the platform's client.
func (r *registry) api(t *testing.T, who, method, path string, in, out any) {
	t.Helper()
	if err := r.as(t, who).Do(t.Context(), method, path, in, out); err != nil {
		t.Fatalf("as %s: %v", who, err)
	}
}

// as is the registry's client for account who.
func (r *registry) as(t *testing.T, who string) *registryclient.Client {
	t.Helper()
	c, err := registryclient.New(r.url, registryclient.WithBasicAuth(who, password))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// agent is a running server over one simulated dual-chip board.
type agent struct {
	socket string
	board  *device.Board
	state  string        // the slot table's state file
	lcfg   loader.Config // of the agent's loader, whose Slots is table
	table  *slots.Table
	cache  *cache.Cache
	nodeID string
	tcp    string // host:port of the TLS listener, if any
	roots  *x509.CertPool
	srv    *server.Server
	cfg    server.Config
	stop   func() // stops srv's Serve
}

type options struct {
	tenants   map[int]string
	tls       bool
	heartbeat time.Duration
	// nodeCert serves the node's own certificate (package nodecert) and
	// advertises it in heartbeats, as faasd does without --tls-cert.
	nodeCert bool
	// keepWarm is server.Config.KeepWarm.
	keepWarm time.Duration
}

func startAgent(t *testing.T, reg *registry, o options) *agent {
	t.Helper()
	roles, err := sim.NewRegistry(blankmodel.Model, loopbackmodel.Model, alidnnmodel.Model)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sim.NewBoard(sim.Config{Roles: roles, DDRSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b, err := devsim.Open(sb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	// The socket's folder must be reachable by the other uids of the
	// peer-credential test.
	dir, err := os.MkdirTemp("", "faasd-server-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	client, err := regclient.New(reg.url, "node1", reg.tokens["node1"], nil)
	if err != nil {
		t.Fatal(err)
	}
	var enrollment struct{ Token string }
	reg.api(t, "admin", "POST", "/node-enrollments", map[string]any{}, &enrollment)
	client.WithEnrollmentToken(enrollment.Token)
	node, err := identity.Load(context.Background(), filepath.Join(dir, "state"), reg.url, fmt.Sprintf("host-%d", time.Now().UnixNano()), client)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.Open(filepath.Join(dir, "cache"), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	table, err := slots.Open([]*device.Board{b}, filepath.Join(dir, "slots.json"))
	if err != nil {
		t.Fatal(err)
	}
	lcfg := loader.Config{Slots: table, Cache: c, Registry: client, NodeID: node.ID, NodeKey: node.Key, PlatformKeys: reg.platform}
	l, err := loader.New(lcfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{socket: filepath.Join(dir, "faasd.sock"), board: b, state: filepath.Join(dir, "slots.json"), lcfg: lcfg, table: table, cache: c, nodeID: node.ID}
	cfg := server.Config{Socket: a.socket, Tenants: o.tenants, Slots: table, Cache: c, Loader: l, Registry: client,
		NodeID: node.ID, Heartbeat: o.heartbeat, KeepWarm: o.keepWarm}
	if o.heartbeat == 0 {
		cfg.NodeID = ""
	}
	if o.tls {
		cert, pool := sessSelfSigned(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if o.nodeCert {
			if cert, err = nodecert.LoadOrCreate(nodecert.Config{Dir: filepath.Join(dir, "state"), NodeID: node.ID,
				IPs: nodecert.ListenIPs(ln.Addr().String())}); err != nil {
				t.Fatal(err)
			}
			cfg.Advertise = "https://" + ln.Addr().String()
		}
		cfg.TCPListener, cfg.TLS = ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
		a.tcp, a.roots = ln.Addr().String(), pool
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.srv, a.cfg = srv, cfg
	a.stop = serve(t, srv, a.socket)
	return a
}

func dial(t *testing.T, target string, opts ...faas.Option) *faas.Client {
	t.Helper()
	c, err := faas.Dial(context.Background(), target, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ownedBy records both chips of the board as loaded by tenant, as a load
// of a two-chip image would.
func (a *agent) ownedBy(t *testing.T, tenant string) {
	t.Helper()
	rec := slots.Record{State: agentapi.Loaded, Tenant: tenant, Group: []int{0, 1}, LoadedAt: time.Now(),
		Image: &agentapi.Image{Ref: "example/acme/x:1", Digest: "sha256:" + strings.Repeat("ab", 32)}}
	if err := a.table.Set([]int{0, 1}, rec); err != nil {
		t.Fatal(err)
	}
}

// TestTenantsKeepToTheirSlots: a tenant sees and clears only its own
// loaded slots; another tenant's clear is refused and changes nothing, over
// TLS and on the socket, where a token names who acts even from an
// operator's process.
func TestTenantsKeepToTheirSlots(t *testing.T) {
	reg := startRegistry(t)
	a := startAgent(t, reg, options{tls: true})
	a.ownedBy(t, "alice")
	ctx := context.Background()
	tc := faas.WithTLSConfig(&tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS13})
	alice := dial(t, "https://"+a.tcp, tc, faas.WithToken(reg.tokens["alice"]))
	bob := dial(t, "https://"+a.tcp, tc, faas.WithToken(reg.tokens["bob"]))

	if _, err := bob.Clear(ctx, 1); !errors.Is(err, faas.ErrPermission) {
		t.Fatalf("bob clearing alice's slot = %v, want ErrPermission", err)
	}
	// This process is the agent's own uid, which is an operator's.
	local := dial(t, a.socket, faas.WithToken(reg.tokens["bob"]))
	if _, err := local.Clear(ctx, 1); !errors.Is(err, faas.ErrPermission) {
		t.Fatalf("bob's token from an operator's process clearing alice's slot = %v, want ErrPermission", err)
	}
	for i := range 2 {
		if rec := a.table.Record(i); rec.State != agentapi.Loaded || rec.Tenant != "alice" {
			t.Fatalf("slot %d after bob's refused clear: %+v", i, rec)
		}
	}
	seen, err := bob.Slot(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if seen.Image != nil || seen.Tenant != "" {
		t.Errorf("bob sees alice's slot as %+v; its image and tenant are alice's business", seen)
	}
	mine, err := alice.Slot(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if mine.Image == nil || mine.Tenant != "alice" {
		t.Errorf("alice sees her slot as %+v", mine)
	}
	cleared, err := alice.Clear(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cleared.State != agentapi.Cleared {
		t.Errorf("after alice's clear: %+v", cleared)
	}
	for i := range 2 {
		if rec := a.table.Record(i); rec.State != agentapi.Cleared {
			t.Errorf("slot %d after clearing its group: %+v", i, rec)
		}
	}
	// A token the registry does not know is refused.
	stranger := dial(t, "https://"+a.tcp, tc, faas.WithToken("faas_"+strings.Repeat("A", 43)))
	if _, err := stranger.Slots(ctx); !errors.Is(err, faas.ErrPermission) {
		t.Errorf("unknown token = %v, want ErrPermission", err)
	}
}

// TestTenantsSeeTheirOwnImages: GET /v1/images lists to each tenant only
// the cached blobs it pulled or loaded, over TLS and on the socket; the
// operator sees them all.
func TestTenantsSeeTheirOwnImages(t *testing.T) {
	reg := startRegistry(t)
	a := startAgent(t, reg, options{tls: true})
	ctx := context.Background()
	put := func(content string, users ...string) string {
		t.Helper()
		sum := sha256.Sum256([]byte(content))
		d := "sha256:" + hex.EncodeToString(sum[:])
		if err := a.cache.Put(ctx, d, strings.NewReader(content)); err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			if err := a.cache.AddUser(d, u); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	ofAlice, ofBob, shared, nobodys := put("alice's", "alice"), put("bob's", "bob"), put("both", "bob", "alice"), put("left over")

	tc := faas.WithTLSConfig(&tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS13})
	for _, tt := range []struct {
		who    string
		client *faas.Client
		want   []string
	}{
		{"alice over TLS", dial(t, "https://"+a.tcp, tc, faas.WithToken(reg.tokens["alice"])), []string{ofAlice, shared}},
		{"bob over TLS", dial(t, "https://"+a.tcp, tc, faas.WithToken(reg.tokens["bob"])), []string{ofBob, shared}},
		{"bob's token on the socket", dial(t, a.socket, faas.WithToken(reg.tokens["bob"])), []string{ofBob, shared}},
		// This process is the agent's own uid: the operator.
		{"the operator", dial(t, a.socket), []string{ofAlice, ofBob, shared, nobodys}},
	} {
		l, err := tt.client.Images(ctx)
		if err != nil {
			t.Fatalf("%s: %v", tt.who, err)
		}
		var got []string
		for _, im := range l.Images {
			got = append(got, im.Digest)
		}
		slices.Sort(got)
		slices.Sort(tt.want)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s sees %v, want %v", tt.who, got, tt.want)
		}
	}
}

// TestPeerCredentials connects from processes of other uids: a uid the
// config maps to a tenant acts as that tenant, any other uid is refused.
// Needs root, to run the children as other users.
func TestPeerCredentials(t *testing.T) {
	if os.Getuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: this test runs processes as other uids and needs root")
		}
		t.Skip("needs root to run processes as other uids")
	}
	reg := startRegistry(t)
	const tenantUID, strangerUID = 64001, 64002
	a := startAgent(t, reg, options{tenants: map[int]string{tenantUID: "bob"}})
	a.ownedBy(t, "alice")

	// The children run a copy of this test binary that they may execute.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(filepath.Dir(a.socket), "child.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(uid int, op string) (string, error) {
		cmd := exec.Command(bin, "-test.run=^TestPeerChild$")
		cmd.Env = append(os.Environ(), "FAASD_TEST_CHILD="+op, "FAASD_TEST_SOCKET="+a.socket)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(tenantUID, "slots"); err != nil || !strings.Contains(out, "slots: 2") {
		t.Errorf("uid %d (tenant bob) listing slots: %v\n%s", tenantUID, err, out)
	}
	if out, err := run(tenantUID, "clear"); err != nil || !strings.Contains(out, "clear: "+string(agentapi.CodePermission)) {
		t.Errorf("uid %d (tenant bob) clearing alice's slot: %v\n%s", tenantUID, err, out)
	}
	if out, err := run(strangerUID, "slots"); err != nil || !strings.Contains(out, "slots: "+string(agentapi.CodeUnauthenticated)) {
		t.Errorf("uid %d (not a tenant) listing slots: %v\n%s", strangerUID, err, out)
	}
	if rec := a.table.Record(0); rec.Tenant != "alice" || rec.State != agentapi.Loaded {
		t.Errorf("slot 0 after the children: %+v", rec)
	}
}

// TestPeerChild is the child of TestPeerCredentials; it reports what the
// agent answered on stdout.
func TestPeerChild(t *testing.T) {
	op := os.Getenv("FAASD_TEST_CHILD")
	if op == "" {
		return // not a child: nothing to do
	}
	ctx := context.Background()
	c, err := faas.Dial(ctx, os.Getenv("FAASD_TEST_SOCKET"))
	if err != nil {
		fmt.Printf("dial: %v\n", err)
		return
	}
	defer c.Close()
	code := func(err error) string {
		var fe *faas.Error
		if errors.As(err, &fe) {
			return string(fe.Code)
		}
		return err.Error()
	}
	switch op {
	case "slots":
		s, err := c.Slots(ctx)
		if err != nil {
			fmt.Printf("slots: %s\n", code(err))
			return
		}
		fmt.Printf("slots: %d\n", len(s))
	case "clear":
		_, err := c.Clear(ctx, 0)
		fmt.Printf("clear: %s\n", code(err))
	}
}

// TestTLSListener: remote attach over TCP+TLS needs a tenant token.
func TestTLSListener(t *testing.T) {
	reg := startRegistry(t)
	a := startAgent(t, reg, options{tls: true})
	ctx := context.Background()
	tc := &tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS13}
	c := dial(t, "https://"+a.tcp, faas.WithTLSConfig(tc), faas.WithToken(reg.tokens["alice"]))
	s, err := c.Slots(ctx)
	if err != nil || len(s) != 2 {
		t.Fatalf("slots over TLS = %v, %v", s, err)
	}
	if _, err := faas.Dial(ctx, "https://"+a.tcp, faas.WithTLSConfig(tc)); err == nil {
		anon := dial(t, "https://"+a.tcp, faas.WithTLSConfig(tc))
		if _, err := anon.Slots(ctx); !errors.Is(err, faas.ErrPermission) {
			t.Errorf("slots over TLS without a token = %v, want ErrPermission", err)
		}
	}
	// Plain HTTP on the TLS port gets no API.
	resp, err := http.Get("http://" + a.tcp + "/v1/slots")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP on the TLS listener answered 200")
		}
	}
	// A client that does not trust the agent's certificate is refused.
	if _, err := faas.Dial(ctx, "https://"+a.tcp, faas.WithToken(reg.tokens["alice"])); err == nil {
		c2 := dial(t, "https://"+a.tcp, faas.WithToken(reg.tokens["alice"]))
		if _, err := c2.Slots(ctx); err == nil {
			t.Errorf("a client without the agent's CA connected")
		}
	}
}

// TestHeartbeatPinsTLSCertificate: the agent reports its endpoint and the
// certificate it serves; the registry pins it, and a tenant that trusts only
// the pin, under the node's server name, attaches over TLS 1.3.
func TestHeartbeatPinsTLSCertificate(t *testing.T) {
	reg := startRegistry(t)
	a := startAgent(t, reg, options{tls: true, nodeCert: true, heartbeat: 50 * time.Millisecond})
	type node struct {
		ID, Endpoint   string
		TLSCertificate string `json:"tls_certificate"`
		ServerName     string `json:"server_name"`
	}
	var got node
	for range 200 {
		var nodes struct{ Items []node }
		reg.api(t, "admin", "GET", "/nodes", nil, &nodes)
		for _, n := range nodes.Items {
			if n.ID == a.nodeID && n.TLSCertificate != "" {
				got = n
			}
		}
		if got.ID != "" {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if got.TLSCertificate == "" || got.Endpoint != "https://"+a.tcp || got.ServerName != nodecert.ServerName(a.nodeID) {
		t.Fatalf("node in the registry = %+v", got)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(got.TLSCertificate)) {
		t.Fatal("pinned certificate does not parse")
	}
	tc := &tls.Config{RootCAs: pool, ServerName: got.ServerName, MinVersion: tls.VersionTLS13}
	c := dial(t, got.Endpoint, faas.WithTLSConfig(tc), faas.WithToken(reg.tokens["alice"]))
	if _, err := c.Slots(context.Background()); err != nil {
		t.Fatalf("slots over TLS verified against the pin: %v", err)
	}
}

// TestHeartbeat: the agent reports its board and slots to the registry.
func TestHeartbeat(t *testing.T) {
	reg := startRegistry(t)
	a := startAgent(t, reg, options{heartbeat: 50 * time.Millisecond})
	a.ownedBy(t, "alice")
	type slot struct {
		Index  int
		State  string
		Digest string
		Part   string
	}
	var got []struct {
		Model string
		Slots []slot
	}
	for range 200 {
		var nodes struct {
			Items []struct {
				ID     string
				Boards json.RawMessage
			}
		}
		reg.api(t, "admin", "GET", "/nodes", nil, &nodes)
		for _, n := range nodes.Items {
			if n.ID == a.nodeID && len(n.Boards) > 0 {
				json.Unmarshal(n.Boards, &got)
			}
		}
		if len(got) == 1 && len(got[0].Slots) == 2 && got[0].Slots[0].State == string(agentapi.Loaded) {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if len(got) != 1 || len(got[0].Slots) != 2 {
		t.Fatalf("boards in the registry = %+v, want one board with two slots", got)
	}
	for i, s := range got[0].Slots {
		part := a.board.Chips[i].Part().Name
		if s.Index != i || s.State != string(agentapi.Loaded) || s.Digest != "sha256:"+strings.Repeat("ab", 32) || s.Part != part {
			t.Errorf("slot %d in the registry = %+v, want loaded with part %s", i, s, part)
		}
	}
}
