package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The chaos soak of the accelerator pool: tenants
// attach, run jobs, write and read markers, detach and vanish at random
// while faasd, one of two registry replicas and PostgreSQL are killed or
// restarted at random moments; afterwards the platform's records are
// checked against what the tenants saw (soak_check_test.go).
//
// FAAS_SOAK sets how long the tenants run (default 60s; `make soak` runs
// 10m); FAAS_SOAK_SEED replays a run's random choices (the seed is
// printed). The processes' own timing still differs between runs, so a
// replay takes the same decisions, not necessarily the same interleaving.

// soakRegFlags are both replicas' pool settings: leases reaped quickly, a
// node lost only after a restart would have had ample time, and a keep-warm
// short enough that every chip must be cleared by the end; no metrics
// listener, whose fixed default port two replicas cannot share.
var soakRegFlags = []string{"--metrics-listen", "off", "--lease-check-interval", "200ms", "--node-lost-after", "20s", "--keep-warm", "3s"}

// soakKeepWarm is faasd's --keep-warm, matching the registry's.
const soakKeepWarm = "3s"

// The tenants attach the two-chip image whole, the one-chip image whole
// or shared (a tenant window on a chip others may share).
const (
	soakDual   = "acme/alidnn-dual"
	soakSingle = "acme/alidnn"
)

// soakTenants are the tenant accounts; each runs soakPerTenant goroutines.
var soakTenants = []string{"alice", "bob", "carol", "dave"}

const soakPerTenant = 2

// replica is one registry process at a fixed address, so that it can be
// killed and started again where its clients expect it.
type replica struct {
	name string
	addr string // host:port
	url  string
	srv  *server
}

// soakNode is a faasd of the pool with its state dir, to restart it on.
type soakNode struct {
	name, regURL, socket, state string
	args                        []string
	srv                         *server
	agent                       *http.Client
}

// window is a span of time during which something was down.
type window struct{ from, to time.Time }

// soak is the run's shared state. nodes, replicas and downs belong to the
// test's goroutine (the fault injector); tenants touch only what mu guards
// and the stats.
type soak struct {
	t        *testing.T
	p        *platform
	seed     uint64
	replicas []*replica
	nodes    []*soakNode
	pgDown   []window // PostgreSQL restarts, for the usage tolerance
	stats    *soakStats

	mu         sync.Mutex
	markers    []marker
	records    []*record
	violations []string
	ends       map[string]int // attachments by terminal state, set by check
	notes      []note         // odd things that break no invariant
}

// note is something odd the summary shows, with the records of the
// attachments it concerns.
type note struct {
	what        string
	attachments []string
	records     []string // filled in by check
}

// violate records a broken invariant; the test fails with every one at
// the end (tenants must not call t, which may have finished).
func (s *soak) violate(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.violations) < 200 {
		s.violations = append(s.violations, fmt.Sprintf(format, args...))
	}
}

func soakConfig(t *testing.T) (time.Duration, uint64) {
	dur := 60 * time.Second
	if v := os.Getenv("FAAS_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("FAAS_SOAK=%q: want a duration such as 10m", v)
		}
		dur = d
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("FAAS_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FAAS_SOAK_SEED=%q: want an unsigned integer", v)
		}
		seed = n
	}
	return dur, seed
}

// TestSoak is the chaos soak; see the comment at the top of the file.
func TestSoak(t *testing.T) {
	dur, seed := soakConfig(t)
	t.Logf("soak: %v of tenants, seed %d (FAAS_SOAK_SEED=%d replays its choices)", dur, seed, seed)
	p := newPlatform(t, soakRegFlags...)
	s := &soak{t: t, p: p, seed: seed, stats: newSoakStats()}
	s.setup()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Registered after every server's cleanup, so it runs before them: a
	// failing test stops its tenants before the processes go.
	t.Cleanup(func() { cancel(); wg.Wait() })
	stop := time.Now().Add(dur)
	began := time.Now()
	n := 0
	for _, who := range soakTenants {
		tok := newToken(t, p.regURL, who, "soak")
		for k := range soakPerTenant {
			n++
			tn := &tenant{s: s, name: fmt.Sprintf("%s#%d", who, k), token: tok,
				rng: rand.New(rand.NewPCG(seed, uint64(n)))}
			wg.Add(1)
			go func() { defer wg.Done(); tn.run(ctx, stop) }()
		}
	}
	s.injectFaults(stop, rand.New(rand.NewPCG(seed, 0)))
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		cancel()
		t.Fatal("the tenants did not stop within 5 minutes of the end of the soak")
	}
	t.Logf("soak: tenants stopped after %v", time.Since(began).Round(time.Second))

	s.settle()
	s.check()
	s.summary(time.Since(began))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.violations {
		t.Error(v)
	}
	if len(s.violations) > 0 {
		t.Errorf("soak: %d invariant violations; replay with FAAS_SOAK_SEED=%d FAAS_SOAK=%v", len(s.violations), seed, dur)
	}
}

// setup adds the tenants, starts the second replica and the two nodes, one
// heartbeating to each replica.
func (s *soak) setup() {
	t, p := s.t, s.p
	for _, who := range soakTenants[2:] {
		must(t, p.regEnv, password+"\n", "registry", "users", "add", who, "--role", "tenant")
	}
	single := s.pushSingle()
	for _, who := range soakTenants {
		if who != "alice" { // newPlatform subscribed her to the two-chip image
			if _, err := as(t, p.regURL, who).Subscribe(t.Context(), p.dual.listing); err != nil {
				t.Fatalf("%s: %v", who, err)
			}
		}
		if _, err := as(t, p.regURL, who).Subscribe(t.Context(), single); err != nil {
			t.Fatalf("%s: %v", who, err)
		}
	}
	a := &replica{name: "registry-a", url: p.regURL, addr: strings.TrimPrefix(p.regURL, "http://"), srv: p.reg}
	b := &replica{name: "registry-b", addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	b.url = "http://" + b.addr
	s.replicas = []*replica{a, b}
	s.startReplica(b)
	for i, name := range []string{"soak-a", "soak-b"} {
		port := freePort(t)
		n := &soakNode{name: name, regURL: s.replicas[i].url, socket: filepath.Join(p.dir(t, "run-"+name), "faasd.sock"),
			state: filepath.Join(p.root, name+"-state"),
			args: []string{"--hostname", name, "--listen", fmt.Sprintf("127.0.0.1:%d", port),
				"--advertise", fmt.Sprintf("https://127.0.0.1:%d", port), "--heartbeat", "500ms", "--keep-warm", soakKeepWarm}}
		s.nodes = append(s.nodes, n)
		s.startNode(n)
	}
	poll(t, startTimeout, "both soak nodes serving remote attach", func() bool {
		ns, err := as(t, p.regURL, "ops").Nodes(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, x := range ns.Items {
			if strings.HasPrefix(x.Hostname, "soak-") && x.Endpoint != "" {
				k++
			}
		}
		return k == len(s.nodes)
	})
	t.Logf("soak: platform, 2 replicas and 2 nodes ready after %v", time.Since(p.began).Round(time.Millisecond))
}

// pushSingle builds, signs, pushes, publishes and waits for the
// validation of the one-chip AliDNN image, which newPlatform leaves out
// (only shares need it), with the ISV's key, login and sources that
// newPlatform left in p.root; it returns the listing's id.
func (s *soak) pushSingle() string {
	t, p := s.t, s.p
	isvEnv := append(slices.Clone(p.env), "DOCKER_CONFIG="+filepath.Join(p.root, "docker-acme"))
	layout := filepath.Join(p.root, "layouts", "alidnn")
	must(t, isvEnv, "", "hdk", "build", "-f", filepath.Join(p.root, "src", "alidnn", "image.yaml"), "-o", layout)
	must(t, isvEnv, "", "hdk", "sign", "--key", filepath.Join(p.root, "isv-keys", "isv.key"), layout)
	var out struct{ Digest string }
	if err := json.Unmarshal([]byte(must(t, isvEnv, "", "hdk", "push", "--json", layout,
		strings.TrimPrefix(p.regURL, "http://")+"/acme/alidnn:1.0.0")), &out); err != nil {
		t.Fatalf("hdk push --json: %v", err)
	}
	acme := as(t, p.regURL, "acme")
	l := publishListing(t, acme, "alidnn", "1.0.0", out.Digest)
	poll(t, validateWait, "validation of acme/alidnn", func() bool {
		vs, err := acme.Versions(t.Context(), l.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs.Items) != 1 {
			t.Fatalf("versions of acme/alidnn: %+v", vs.Items)
		}
		switch vs.Items[0].State {
		case "available":
			return true
		case "pending", "validating":
			return false
		}
		t.Fatalf("validation of acme/alidnn ended %q", vs.Items[0].State)
		return false
	})
	return l.ID
}

// startReplica starts r at its address and waits until it is ready.
func (s *soak) startReplica(r *replica) {
	t := s.t
	r.srv = startServer(t, s.p.regEnv, "registry", append([]string{"serve", "--listen", r.addr}, soakRegFlags...)...)
	poll(t, startTimeout, r.name+" /readyz", func() bool {
		if r.srv.exited() {
			t.Fatalf("%s exited: %v\n%s", r.name, r.srv.cmd.ProcessState, tail(r.srv.stderr.String()))
		}
		resp, err := http.Get(r.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// startNode starts n's faasd against its replica on its state dir.
func (s *soak) startNode(n *soakNode) {
	q := *s.p
	q.regURL = n.regURL
	n.srv, n.agent = q.startFaasd(s.t, n.socket, n.state, n.args...)
}

// kill SIGKILLs srv and waits until it has gone.
func kill(t *testing.T, srv *server) {
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil && !srv.exited() {
		t.Fatalf("killing %s: %v", srv.name, err)
	}
	<-srv.done
}

// injectFaults injects a fault at random moments until stop, one at a
// time: each ends with its process back and ready, after which every
// slot's memory is scanned for the markers of ended attachments.
func (s *soak) injectFaults(stop time.Time, rng *rand.Rand) {
	t := s.t
	for k := 0; k < 10000 && time.Now().Before(stop); k++ {
		pause := time.Duration(2000+rng.IntN(6000)) * time.Millisecond
		if time.Until(stop) < pause {
			time.Sleep(time.Until(stop))
			break
		}
		time.Sleep(pause)
		switch rng.IntN(3) {
		case 0:
			n := s.nodes[rng.IntN(len(s.nodes))]
			kill(t, n.srv)
			s.startNode(n)
			s.stats.fault("SIGKILL faasd")
		case 1:
			r := s.replicas[rng.IntN(len(s.replicas))]
			kill(t, r.srv)
			s.startReplica(r)
			s.stats.fault("SIGKILL registry replica")
		case 2:
			from := time.Now()
			s.p.pg.Restart(t)
			s.pgDown = append(s.pgDown, window{from, time.Now()})
			s.stats.fault("restart PostgreSQL")
		}
		s.scanMemory("after a fault")
	}
}

// pgDownDuring is how long PostgreSQL was down within [from, to]: the
// registry can neither renew nor reap then, so a lease may run over.
func (s *soak) pgDownDuring(from, to time.Time) time.Duration {
	var d time.Duration
	for _, w := range s.pgDown {
		a, b := max(w.from.UnixNano(), from.UnixNano()), min(w.to.UnixNano(), to.UnixNano())
		if b > a {
			d += time.Duration(b - a)
		}
	}
	return d
}

// soakStats counts what the soak did, by kind.
type soakStats struct {
	mu                    sync.Mutex
	faults, ops, checks   map[string]int
	opErrors, attachFails map[string]int
	failedWhy             map[string]int // failed attachments by the node's error
}

func newSoakStats() *soakStats {
	return &soakStats{faults: map[string]int{}, ops: map[string]int{}, checks: map[string]int{},
		opErrors: map[string]int{}, attachFails: map[string]int{}, failedWhy: map[string]int{}}
}

func (st *soakStats) inc(m map[string]int, k string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	m[k]++
}

func (st *soakStats) fault(k string) { st.inc(st.faults, k) }
func (st *soakStats) op(k string)    { st.inc(st.ops, k) }
func (st *soakStats) check(k string) { st.inc(st.checks, k) }

// summary prints what was done: faults, operations, attachments by how
// they ended, checks passed.
func (s *soak) summary(took time.Duration) {
	st := s.stats
	st.mu.Lock()
	defer st.mu.Unlock()
	var b strings.Builder
	section := func(title string, m map[string]int) {
		keys := make([]string, 0, len(m))
		total := 0
		for k, v := range m {
			keys = append(keys, k)
			total += v
		}
		slices.Sort(keys)
		fmt.Fprintf(&b, "  %s (%d):\n", title, total)
		for _, k := range keys {
			fmt.Fprintf(&b, "    %-44s %6d\n", k, m[k])
		}
	}
	fmt.Fprintf(&b, "soak summary: seed %d, %v in all\n", s.seed, took.Round(time.Second))
	section("faults injected", st.faults)
	section("operations", st.ops)
	section("attaches refused or failed", st.attachFails)
	section("operations failed (expected around faults)", st.opErrors)
	section("attachments by terminal state", s.endStates())
	section("failed attachments by the node's error (the SDK placed them again)", st.failedWhy)
	section("invariant checks passed", st.checks)
	s.mu.Lock()
	fmt.Fprintf(&b, "  notes (odd, but no invariant broken) (%d):\n", len(s.notes))
	for _, n := range s.notes {
		fmt.Fprintf(&b, "    %s\n", n.what)
		for _, r := range n.records {
			fmt.Fprintf(&b, "      %s\n", r)
		}
	}
	fmt.Fprintf(&b, "  invariant violations: %d\n", len(s.violations))
	s.mu.Unlock()
	s.t.Log(b.String())
}
