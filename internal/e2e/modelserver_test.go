package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fpga-faas/faas/sdk/poolapi"
)

// modelServerPool starts a registry that declares a silent node lost
// after 5 s, and two faasd nodes serving remote attach; env is a host
// without faasd, logged in as alice.
func modelServerPool(t *testing.T) (*platform, map[string]*poolNode, []string) {
	t.Helper()
	p := newPlatform(t, "--node-lost-after", "5s", "--lease-check-interval", "200ms")
	nodes := map[string]*poolNode{}
	for _, name := range []string{"ms-a", "ms-b"} {
		port := freePort(t)
		n := &poolNode{name: name, socket: filepath.Join(p.dir(t, "run-"+name), "faasd.sock"), args: []string{"--hostname", name,
			"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--advertise", fmt.Sprintf("https://127.0.0.1:%d", port), "--heartbeat", "500ms"}}
		n.srv, n.agent = p.startFaasd(t, n.socket, filepath.Join(p.root, name+"-state"), n.args...)
		nodes[name] = n
	}
	ops := as(t, p.regURL, "ops")
	poll(t, startTimeout, "both nodes serving remote attach", func() bool {
		ns, err := ops.Nodes(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, x := range ns.Items {
			if nodes[x.Hostname] != nil && x.Endpoint != "" && x.TLSCertificate != "" {
				k++
			}
		}
		return k == 2
	})
	env := append(slices.Clone(p.env), "FAAS_CONFIG="+filepath.Join(p.root, "ms-faas.json"),
		"FAAS_AGENT=unix://"+filepath.Join(p.root, "no-faasd-here.sock"))
	must(t, env, password+"\n", "faas", "login", p.regURL, "-u", "alice", "--password-stdin")
	return p, nodes, env
}

// readyOn is the nodes of alice's ready attachments, by node name.
func readyOn(t *testing.T, p *platform) map[string]int {
	t.Helper()
	atts, err := as(t, p.regURL, "alice").Attachments(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	on := map[string]int{}
	for _, a := range atts {
		if a.State == poolapi.Ready {
			on[a.Node]++
		}
	}
	return on
}

// protocolFailures checks that every request of tl succeeded or failed
// with the protocol's 503 or Unavailable, and returns how many failed.
func protocolFailures(t *testing.T, tl *tally) int {
	t.Helper()
	failed := 0
	for kind, k := range tl.kinds {
		switch kind {
		case "ok":
		case "http 503", "grpc Unavailable":
			failed += k
		default:
			t.Errorf("%d requests failed with %q, not the protocol's 503 or Unavailable", k, kind)
		}
	}
	return failed
}

// TestModelServerPool serves MNIST, pushed to the registry with faas model
// push and pulled by digest, on two attachments from the pool of that
// registry with two faasd nodes, under REST and gRPC clients. The node of
// an attachment is killed mid-run: the requests that fail, fail with the
// protocol's errors (503, Unavailable), the server attaches again on the
// other node, and every request after that succeeds. Then that node is
// killed too: with no engine left the server is not ready and answers 503
// and Unavailable; the first node is started again, the server attaches
// there and is ready again.
func TestModelServerPool(t *testing.T) {
	p, nodes, env := modelServerPool(t)
	repo, cases := mnistRepo(t)
	ref, tokenFile := pushModel(t, p, repo, "mnist")
	ms := startModelServer(t, env, "", "-model", "mnist="+ref, "-model-cache", t.TempDir(), "-registry-user", "acme",
		"-registry-token-file", tokenFile, "-attach", "acme/alidnn-dual", "-attachments", "2", "-registry", p.regURL)
	if up := ms.metric(t, "modelserver_engines_up"); up != 2 {
		t.Fatalf("%v engines up, want 2", up)
	}
	var victim, survivor *poolNode
	for name := range readyOn(t, p) {
		victim = nodes[name]
	}
	for _, n := range nodes {
		if n != victim {
			survivor = n
		}
	}

	stop := make(chan struct{})
	var during *tally
	ran := make(chan struct{})
	go func() {
		during = ms.clients(t, cases, 0, stop)
		close(ran)
	}()
	poll(t, startTimeout, "requests before the kill", func() bool { return ms.metric(t, "modelserver_infer_requests_total") >= 40 })
	kill(t, victim.srv)
	t.Logf("killed node %s under load", victim.name)
	poll(t, startTimeout, "the server to attach again", func() bool {
		return ms.metric(t, "modelserver_engine_reopens_total") >= 1 && ms.metric(t, "modelserver_engines_up") == 2
	})
	close(stop)
	<-ran
	ms.waitReady(t)
	// The lost attachment was detached, or the registry marked it lost.
	poll(t, startTimeout, "two ready attachments, on the node left", func() bool {
		on := readyOn(t, p)
		return on[survivor.name] == 2 && on[victim.name] == 0
	})
	t.Logf("during the kill and the reattach: %v (%d failed with the protocol's errors)", during, protocolFailures(t, during))
	if after := ms.clients(t, cases, 25, nil); after.get("ok") != 100 {
		t.Errorf("after the reattach: %v, want 100 ok", after)
	}
	if dev := ms.metric(t, "modelserver_device_seconds_total"); dev <= 0 {
		t.Errorf("device time %v, want some", dev)
	}

	// No node left: not ready, 503 and Unavailable, until a node returns.
	kill(t, survivor.srv)
	poll(t, startTimeout, "the server not ready with no engine", func() bool { return !ms.ready() })
	conn, err := grpc.NewClient(ms.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if rest, rpc := ms.restInfer(t.Context(), cases[0]), grpcInfer(t.Context(), conn, cases[0]); rest != "http 503" || rpc != "grpc Unavailable" {
		t.Errorf("with no engine: REST %s, gRPC %s; want http 503 and grpc Unavailable", rest, rpc)
	}
	victim.srv, victim.agent = p.startFaasd(t, victim.socket, filepath.Join(p.root, victim.name+"-state"), victim.args...)
	ms.waitReady(t)
	if after := ms.clients(t, cases, 10, nil); after.get("ok") != 40 {
		t.Errorf("after %s came back: %v, want 40 ok", victim.name, after)
	}
}

// TestModelServerSlots serves MNIST on two slots of the local faasd,
// loaded with the AliDNN image, through the SDK; faasd is killed (the
// server is not ready, requests fail with 503) and started again (the
// server opens the slots again and answers).
func TestModelServerSlots(t *testing.T) {
	p := newPlatform(t)
	socket := filepath.Join(p.dir(t, "run"), "faasd.sock")
	state := filepath.Join(p.root, "faasd-state")
	faasd, _ := p.startFaasd(t, socket, state)
	env := append(slices.Clone(p.env), "FAAS_CONFIG="+filepath.Join(p.root, "alice-faas.json"), "FAAS_AGENT=unix://"+socket)
	must(t, env, password+"\n", "faas", "login", p.regURL, "-u", "alice", "--password-stdin")
	var l struct{ Slots []int }
	if err := json.Unmarshal([]byte(must(t, env, "", "faas", "load", "--json", p.dual.ref)), &l); err != nil || len(l.Slots) != 2 {
		t.Fatalf("faas load: %+v %v", l, err)
	}
	repo, cases := mnistRepo(t)
	ms := startModelServer(t, env, repo, "-slots", fmt.Sprintf("%d,%d", l.Slots[0], l.Slots[1]))
	if got := ms.clients(t, cases, 5, nil); got.get("ok") != 20 {
		t.Fatalf("on slots %v: %v, want 20 ok", l.Slots, got)
	}
	if err := faasd.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-faasd.done
	poll(t, startTimeout, "the server to drop the slots", func() bool { return !ms.ready() })
	if got := ms.restInfer(t.Context(), cases[0]); got != "http 503" {
		t.Errorf("a request with faasd down: %s, want http 503", got)
	}
	p.startFaasd(t, socket, state)
	ms.waitReady(t)
	if got := ms.clients(t, cases, 5, nil); got.get("ok") != 20 {
		t.Errorf("after faasd's restart: %v, want 20 ok", got)
	}
	if n := ms.metric(t, "modelserver_engine_reopens_total"); n != 2 {
		t.Errorf("%v reopens, want 2 (both slots)", n)
	}
}
