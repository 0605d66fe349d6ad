package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/poolapi"
)

// poolNode is a faasd of the pool, serving remote attach on loopback.
type poolNode struct {
	name   string
	srv    *server
	agent  *http.Client
	socket string
	args   []string // of faasd serve, for a restart
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestPool is the end-to-end test of the accelerator pool: one
// registry, two faasd nodes on simulated boards, and tenants on a
// "CPU-only" host (no faasd socket) attaching through the registry.
// Two tenants attach at once and run MNIST remotely; a client is killed,
// its lease expires and its chip is cleared and scrubbed; a tenant
// detaches; a node is killed and its attachment is reported lost; an
// attachment made on a node's own host runs on shared memory; faasd killed
// and restarted keeps its attachments; a program's device reports a lease
// ended behind its back as ErrLeaseLost; every step leaves audit and usage
// records.
func TestPool(t *testing.T) {
	// A restarted faasd (step 6) must heartbeat again within --node-lost-after,
	// with room for a loaded CI machine.
	p := newPlatform(t, "--node-lost-after", "10s", "--lease-check-interval", "200ms")
	if _, err := as(t, p.regURL, "bob").Subscribe(t.Context(), p.dual.listing); err != nil {
		t.Fatal(err)
	}
	ops := as(t, p.regURL, "ops")
	start := func(name string) *poolNode {
		port := freePort(t)
		n := &poolNode{name: name, socket: filepath.Join(p.dir(t, "run-"+name), "faasd.sock"), args: []string{"--hostname", name,
			"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--advertise", fmt.Sprintf("https://127.0.0.1:%d", port), "--heartbeat", "500ms"}}
		n.srv, n.agent = p.startFaasd(t, n.socket, filepath.Join(p.root, name+"-state"), n.args...)
		return n
	}
	restart := func(n *poolNode) {
		if err := n.srv.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-n.srv.done
		n.srv, n.agent = p.startFaasd(t, n.socket, filepath.Join(p.root, n.name+"-state"), n.args...)
	}
	nodes := []*poolNode{start("pool-a"), start("pool-b")}
	nodeNamed := func(name string) *poolNode {
		for _, n := range nodes {
			if n.name == name {
				return n
			}
		}
		t.Fatalf("no node %q", name)
		return nil
	}
	poll(t, startTimeout, "both nodes serving remote attach in the registry", func() bool {
		ns, err := ops.Nodes(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, x := range ns.Items {
			if strings.HasPrefix(x.Hostname, "pool-") && x.Endpoint != "" && x.TLSCertificate != "" {
				n++
			}
		}
		return n == 2
	})

	// The tenants' host runs no faasd: FAAS_AGENT names a socket nobody serves.
	cpuOnly := func(who string) []string {
		env := append(slices.Clone(p.env), "FAAS_CONFIG="+filepath.Join(p.root, who+"-faas.json"),
			"FAAS_AGENT=unix://"+filepath.Join(p.root, "no-faasd-here.sock"))
		must(t, env, password+"\n", "faas", "login", p.regURL, "-u", who, "--password-stdin")
		return env
	}
	alice, bob := cpuOnly("alice"), cpuOnly("bob")
	listing := "acme/alidnn-dual"
	get := func(who, id string) poolapi.Attachment {
		t.Helper()
		a, err := as(t, p.regURL, who).Attachment(t.Context(), id, "", 0)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		return a
	}
	latest := func(who string) poolapi.Attachment {
		t.Helper()
		l, err := as(t, p.regURL, who).Attachments(t.Context(), false)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if len(l) == 0 {
			t.Fatalf("%s has no attachments", who)
		}
		return l[0]
	}
	audited := func(action, id string) []map[string]any {
		t.Helper()
		page, err := ops.Audit(t.Context(), url.Values{"action": {action}, "target_type": {"attachment"}, "target_id": {id}})
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		for _, it := range page.Items {
			var d map[string]any
			if len(it.Details) > 0 {
				if err := json.Unmarshal(it.Details, &d); err != nil {
					t.Fatalf("details of audit entry %d: %v", it.ID, err)
				}
			}
			out = append(out, d)
		}
		return out
	}

	// 1. Two tenants attach at once and run MNIST remotely, then detach.
	mnist := testenv.TestData(t, "onnx/models/mnist")
	var wg sync.WaitGroup
	results := map[string]string{}
	var mu sync.Mutex
	for who, env := range map[string][]string{"alice": alice, "bob": bob} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := filepath.Join(t.TempDir(), who+".pb")
			cmd := exec.CommandContext(t.Context(), filepath.Join(bin, "faas"), "model", "run", "--json", "--attach", listing,
				"--input", filepath.Join(mnist, "test_data_set_0", "input_0.pb"), "--output", out, filepath.Join(mnist, "model.onnx"))
			cmd.Env = env
			b, err := cmd.CombinedOutput()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				results[who] = fmt.Sprintf("error %v: %s", err, b)
				return
			}
			results[who] = out
		}()
	}
	wg.Wait()
	ran := map[string]poolapi.Attachment{}
	for who, out := range results {
		if strings.HasPrefix(out, "error") {
			t.Fatalf("%s's faas model run --attach: %s", who, out)
		}
		if worst := mnistWorst(t, out, filepath.Join(mnist, "test_data_set_0", "output_0.pb")); worst > 5e-3 {
			t.Errorf("%s's scores differ from the reference by %g", who, worst)
		}
		a := latest(who)
		if a.State != poolapi.Detached || a.ReadyAt == nil || a.Listing != "alidnn-dual" {
			t.Fatalf("%s's attachment after the run: %+v", who, a)
		}
		ran[who] = a
	}
	// faas model bench on an attachment: every batch size measured.
	var bench struct {
		Where   string `json:"where"`
		Results []struct {
			Batch       int     `json:"batch"`
			Runs        int     `json:"runs"`
			DeviceNSRun float64 `json:"device_ns_per_run"`
		} `json:"results"`
	}
	out := must(t, alice, "", "faas", "model", "bench", "--json", "--attach", listing, "--batch", "1,4", "--duration", "300ms",
		filepath.Join(mnist, "model.onnx"))
	if err := json.Unmarshal([]byte(out), &bench); err != nil || len(bench.Results) != 2 {
		t.Fatalf("faas model bench --attach: %q (%v)", out, err)
	}
	for _, r := range bench.Results {
		if r.Runs == 0 || r.DeviceNSRun <= 0 {
			t.Errorf("faas model bench --attach, batch %d: %+v", r.Batch, r)
		}
	}

	if ran["alice"].NodeID == ran["bob"].NodeID {
		t.Errorf("both runs on node %s: the pool should spread them", ran["alice"].Node)
	}
	t.Logf("MNIST ran remotely for alice on %s and bob on %s", ran["alice"].Node, ran["bob"].Node)

	// 2. alice attaches again, warm: her image is still loaded. Her
	// client is killed; the lease runs out and the chip is scrubbed.
	hold := startServer(t, alice, "faas", "attach", "--json", "--hold", "--lease", "3s", listing)
	var held poolapi.Attachment
	poll(t, startTimeout, "faas attach --hold to print its attachment", func() bool {
		if hold.exited() {
			t.Fatalf("faas attach --hold exited: %s", hold.stderr.String())
		}
		return json.Unmarshal([]byte(hold.stdout.String()), &held) == nil && held.ID != ""
	})
	if held.State != poolapi.Ready || !held.Warm || held.NodeID != ran["alice"].NodeID || held.Slot != ran["alice"].Slot {
		t.Errorf("alice's second attach %+v, want ready and warm on %s slot %d", held, ran["alice"].Node, ran["alice"].Slot)
	}
	node := nodeNamed(held.Node)
	secret := []byte("alice's working set, to be scrubbed!") // a multiple of 4 bytes, as DMA wants
	writeDDR(t, node.agent, held.Slot, secret)
	if err := hold.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, "the killed client's lease to expire", func() bool { return get("alice", held.ID).State == poolapi.Expired })
	poll(t, time.Minute, "the expired attachment's chip to be released", func() bool { return len(audited("attachment.released", held.ID)) == 1 })
	if d := audited("attachment.released", held.ID)[0]; d["scrubbed"] != true {
		t.Errorf("released without scrubbing: %v", d)
	}
	if got := readDDR(t, node.agent, held.Slot); strings.Contains(string(got), string(secret)) {
		t.Error("the expired attachment's data is still in the chip's memory")
	}
	t.Logf("alice's killed client: lease expired, %s slot %d cleared and scrubbed", held.Node, held.Slot)

	// 3. bob attaches without holding and detaches.
	var b poolapi.Attachment
	if err := json.Unmarshal([]byte(must(t, bob, "", "faas", "attach", "--json", listing)), &b); err != nil || b.State != poolapi.Ready {
		t.Fatalf("faas attach: %+v %v", b, err)
	}
	var d poolapi.Attachment
	if err := json.Unmarshal([]byte(must(t, bob, "", "faas", "detach", "--json", b.ID)), &d); err != nil || d.State != poolapi.Detached {
		t.Fatalf("faas detach: %+v %v", d, err)
	}

	// 4. bob holds an attachment; its node is killed: the attachment is
	// lost, and bob's client says so.
	hold = startServer(t, bob, "faas", "attach", "--json", "--hold", "--lease", "30s", listing)
	var lost poolapi.Attachment
	poll(t, startTimeout, "faas attach --hold to print its attachment", func() bool {
		if hold.exited() {
			t.Fatalf("faas attach --hold exited: %s", hold.stderr.String())
		}
		return json.Unmarshal([]byte(hold.stdout.String()), &lost) == nil && lost.ID != ""
	})
	victim := nodeNamed(lost.Node)
	if err := victim.srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, "the attachment on the killed node to be lost", func() bool { return get("bob", lost.ID).State == poolapi.Lost })
	poll(t, time.Minute, "bob's client to learn of the loss", func() bool { return hold.exited() })
	if !strings.Contains(hold.stderr.String(), "lost") {
		t.Errorf("bob's client on the lost node said: %s", hold.stderr.String())
	}
	t.Logf("node %s killed: bob's attachment lost, client said %q", lost.Node, strings.TrimSpace(hold.stderr.String()))

	// 5. On a node's own host, the attachment runs through that faasd's
	// socket on shared memory, not over TLS.
	survivor := nodes[0]
	if survivor == victim {
		survivor = nodes[1]
	}
	onNode := append(slices.Clone(alice), "FAAS_AGENT=unix://"+survivor.socket)
	var local struct {
		poolapi.Attachment
		Session string `json:"session"`
	}
	if err := json.Unmarshal([]byte(must(t, onNode, "", "faas", "attach", "--json", listing)), &local); err != nil ||
		local.Session != "shared-memory" || local.Node != survivor.name {
		t.Errorf("an attachment from %s's own host: %+v (%v), want shared memory on %s", survivor.name, local, err, survivor.name)
	}
	must(t, alice, "", "faas", "detach", local.ID)

	// 6. faasd killed and restarted on the node keeps its attachments: a
	// ready one's credential opens sessions again, without a reload.
	var kept poolapi.Attachment
	if err := json.Unmarshal([]byte(must(t, alice, "", "faas", "attach", "--json", "--lease", "10m", listing)), &kept); err != nil ||
		kept.Node != survivor.name || kept.Credential == "" {
		t.Fatalf("faas attach: %+v %v", kept, err)
	}
	restart(survivor)
	tc, err := faas.PinnedTLS(kept)
	if err != nil {
		t.Fatal(err)
	}
	poll(t, time.Minute, "a session on the attachment after faasd's restart", func() bool {
		c, err := faas.Dial(t.Context(), kept.Endpoint, faas.WithToken(kept.Credential), faas.WithTLSConfig(tc))
		if err != nil {
			return false
		}
		defer c.Close()
		d, err := c.Open(t.Context(), kept.Slot)
		if err != nil {
			return false
		}
		d.Close()
		return true
	})
	if a := get("alice", kept.ID); a.State != poolapi.Ready {
		t.Errorf("the kept attachment after faasd's restart: %s", a.State)
	}
	must(t, alice, "", "faas", "detach", kept.ID)

	// 7. In a program: an attachment ended behind its back (an admin
	// detached it) makes the device's calls fail with ErrLeaseLost.
	tok := newToken(t, p.regURL, "alice", "sdk")
	sdkAtt, err := faas.Attach(t.Context(), p.regURL, listing, faas.WithRegistryToken(tok), faas.WithLocalAgent("-"),
		faas.WithLease(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdkAtt.Device().Alloc(t.Context(), 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Detach(t.Context(), sdkAtt.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sdkAtt.Lost():
	case <-time.After(time.Minute):
		t.Fatal("the SDK did not notice its attachment ended")
	}
	if _, err := sdkAtt.Device().Alloc(t.Context(), 4096); !errors.Is(err, faas.ErrLeaseLost) || !errors.Is(sdkAtt.Err(), faas.ErrLeaseLost) {
		t.Errorf("after the attachment ended: Alloc %v, Err %v; want ErrLeaseLost", err, sdkAtt.Err())
	}
	sdkAtt.Close()

	// Every step is in the audit log and the usage records.
	for id, actions := range map[string][]string{
		ran["alice"].ID: {"attachment.create", "attachment.grant", "attachment.ready", "attachment.detach", "attachment.released"},
		held.ID:         {"attachment.create", "attachment.ready", "attachment.expired", "attachment.released"},
		d.ID:            {"attachment.create", "attachment.ready", "attachment.detach"},
		lost.ID:         {"attachment.create", "attachment.ready", "attachment.lost"},
	} {
		for _, a := range actions {
			if n := len(audited(a, id)); n != 1 {
				t.Errorf("attachment %s: %d %s audit records, want 1", id, n, a)
			}
		}
	}
	for who, want := range map[string]int64{"alice": 6, "bob": 3} {
		sum, err := as(t, p.regURL, who).UsageSummary(t.Context(), nil)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if len(sum.Items) != 1 || sum.Items[0].Attachments != want || sum.Items[0].AttachedNs <= 0 {
			t.Errorf("%s's usage %+v, want %d attachments", who, sum.Items, want)
		}
	}
}
