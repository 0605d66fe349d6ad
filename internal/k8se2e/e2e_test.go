//go:build k8se2e

package k8se2e

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// What the device plugin's Allocate gives a container (the contract of
// services/agent/deviceplugin, which only faasd imports).
const (
	envAgent     = "FAAS_AGENT"
	envSlots     = "FAAS_SLOTS"
	envToken     = "FAAS_ALLOCATION_TOKEN"
	containerDir = "/run/faasd"
)

// TestCluster runs the device plugin's scenarios on one cluster, in
// order: each leaves the pods the next expects. faasd runs on two
// simulated dual-chip boards: slots 0-3, boards 0 (slots 0, 1) and 1
// (slots 2, 3), four faas.dev/alidnn-share devices per chip, Unhealthy
// until a chip holds an AliDNN engine.
func TestCluster(t *testing.T) {
	r := startRig(t)
	steps := []struct {
		name string
		f    func(*testing.T, *rig)
	}{
		{"Registration", testRegistration},
		{"SharePending", testSharePending},
		{"Allocate", testAllocate},
		{"PreferredAllocation", testPreferred},
		{"Release", testRelease},
		{"KubeletRestart", testKubeletRestart},
		{"FaasdRestart", testFaasdRestart},
		{"Unhealthy", testUnhealthy},
		{"FirstPod", testFirstPod},
		{"DevOverlay", testDevOverlay},
	}
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			s.f(t, r)
			r.check(t)
		})
		if !ok {
			// The later steps build on the pods of this one.
			t.Fatalf("%s failed; later steps skipped (logs in %s)", s.name, r.c.Logs())
		}
	}
}

// testRegistration: all three resources registered, capacity counts every
// device, allocatable only the Healthy ones (no chip holds an AliDNN
// engine, so no share).
func testRegistration(t *testing.T, r *rig) {
	r.waitAllocatable(t, counts{resChip: 4, resBoard: 2, resShare: 0})
	n, err := r.c.API.Node(r.ctx, NodeName)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := figures(n.Status.Capacity), (counts{resChip: 4, resBoard: 2, resShare: 16}); got.String() != want.String() {
		t.Errorf("capacity %v, want %v", got, want)
	}
	for _, k := range []string{"chip", "board", "alidnn-share"} {
		if ok, err := r.c.LogHas("kubelet", "faasd-"+k+".sock"); !ok || err != nil {
			t.Errorf("the kubelet's log names no plugin endpoint faasd-%s.sock (%v)", k, err)
		}
	}
}

// testSharePending: on a fresh node no chip holds an AliDNN engine, so a
// pod asking a share (deploy/k8s/examples/inference) stays Pending with
// the message deploy/k8s/README.md explains ("The first pod").
func testSharePending(t *testing.T, r *rig) {
	if err := r.c.API.CreatePod(r.ctx, pod("wants-share", resShare, 1)); err != nil {
		t.Fatal(err)
	}
	msg := r.waitPending(t, "wants-share", "Insufficient "+resShare)
	t.Logf("wants-share: %s", msg)
	r.remove(t, "wants-share")
}

// testAllocate: a pod asking one chip runs, and the runtime gets what
// Allocate answered: the agent's socket, the slot, a credential, the
// read-only mount of the pod socket's directory and the CDI name.
func testAllocate(t *testing.T, r *rig) {
	r.run(t, pod("one-chip", resChip, 1))
	c := r.created(t, "one-chip")
	slot := c.Env[envSlots]
	if !regexp.MustCompile(`^[0-3]$`).MatchString(slot) {
		t.Fatalf("FAAS_SLOTS %q, want one slot of 0-3 (env %v)", slot, c.Env)
	}
	if want := "unix:///run/faasd/" + filepath.Base(r.n.PodSocket); c.Env[envAgent] != want {
		t.Errorf("FAAS_AGENT %q, want %q", c.Env[envAgent], want)
	}
	if tok := c.Env[envToken]; len(tok) < 16 {
		t.Errorf("FAAS_ALLOCATION_TOKEN %q: no credential", tok)
	}
	i := slices.IndexFunc(c.Mounts, func(m CreatedMount) bool { return m.ContainerPath == containerDir })
	if i < 0 {
		t.Fatalf("no mount at %s: %+v", containerDir, c.Mounts)
	}
	if m := c.Mounts[i]; m.HostPath != filepath.Dir(r.n.PodSocket) || !m.ReadOnly {
		t.Errorf("mount %+v, want %s read-only", m, filepath.Dir(r.n.PodSocket))
	}
	if want := []string{resChip + "=slot-" + slot}; !slices.Equal(c.CDIDevices, want) {
		t.Errorf("CDI devices %v, want %v", c.CDIDevices, want)
	}
	// The chip's board and its shares are taken away from the scheduler.
	r.waitAllocatable(t, counts{resChip: 4, resBoard: 1, resShare: 0})
}

// testPreferred: the kubelet asks the plugin's GetPreferredAllocation and
// follows it. From all four chips free the plugin prefers slot 0; next,
// the partner of a chip already taken (slot 1), keeping board 1 whole.
// Without the preference the kubelet picks any free chip.
func testPreferred(t *testing.T, r *rig) {
	asked := logCount(r.n.FaasdLog(), `"msg":"preferred allocation"`)
	if asked == 0 {
		t.Fatalf("faasd logged no preferred allocation for pod one-chip (log %s)", r.n.FaasdLog())
	}
	if got := r.slotsOf(t, "one-chip"); got != "0" {
		t.Errorf("one-chip got slot %s, want 0, the plugin's preference", got)
	}
	r.run(t, pod("second-chip", resChip, 1))
	if got := r.slotsOf(t, "second-chip"); got != "1" {
		t.Errorf("second-chip got slot %s, want 1, the partner of slot 0", got)
	}
	if n := logCount(r.n.FaasdLog(), `"msg":"preferred allocation"`); n <= asked {
		t.Errorf("the kubelet did not ask for a preferred allocation for second-chip")
	}
	r.run(t, pod("two-chips", resChip, 2))
	if got := r.slotsOf(t, "two-chips"); !sameSet(got, "2,3") {
		t.Errorf("two-chips got slots %s, want 2,3", got)
	}
	r.waitAllocatable(t, counts{resChip: 4, resBoard: 0, resShare: 0})
}

// testRelease: deleting the pods of board 0 gives it back — the plugin
// learns from the kubelet's PodResources that they ended — and a pod
// asking a whole board then runs on it.
func testRelease(t *testing.T, r *rig) {
	before := logCount(r.n.FaasdLog(), "released allocations of ended containers")
	r.remove(t, "one-chip")
	r.remove(t, "second-chip")
	r.waitAllocatable(t, counts{resChip: 4, resBoard: 1, resShare: 0})
	if logCount(r.n.FaasdLog(), "released allocations of ended containers") <= before {
		t.Errorf("faasd logged no release")
	}
	r.run(t, pod("one-board", resBoard, 1))
	if got := r.slotsOf(t, "one-board"); !sameSet(got, "0,1") {
		t.Errorf("one-board got slots %s, want 0,1", got)
	}
	r.remove(t, "one-board")
	r.waitAllocatable(t, counts{resChip: 4, resBoard: 1, resShare: 0})
}

// testKubeletRestart: the kubelet restarts (and wipes the plugin
// directory); the plugin registers again, two-chips keeps its chips and
// a new pod gets the other two.
func testKubeletRestart(t *testing.T, r *rig) {
	before := logCount(r.n.FaasdLog(), "registered with the kubelet")
	r.c.StopKubelet()
	if err := r.c.StartKubelet(r.ctx); err != nil {
		t.Fatal(err)
	}
	err := poll(r.ctx, waitTimeout, "faasd to register again", func() (bool, error) {
		return logCount(r.n.FaasdLog(), "registered with the kubelet") > before, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.waitAllocatable(t, counts{resChip: 4, resBoard: 1, resShare: 0})
	r.run(t, pod("after-kubelet", resChip, 2))
	if got := r.slotsOf(t, "after-kubelet"); !sameSet(got, "0,1") {
		t.Errorf("after-kubelet got slots %s, want 0,1 (two-chips holds 2,3)", got)
	}
	r.remove(t, "after-kubelet")
	r.waitAllocatable(t, counts{resChip: 4, resBoard: 1, resShare: 0})
}

// testFaasdRestart: after faasd restarts, the PodResources list gives the
// devices of two-chips back to it as one allocation, so board 1 stays
// taken.
func testFaasdRestart(t *testing.T, r *rig) {
	before := logCount(r.n.FaasdLog(), "adopted devices held by a container")
	r.n.StopFaasd()
	if err := r.n.StartFaasd(r.ctx); err != nil {
		t.Fatal(err)
	}
	var adopted []string
	err := poll(r.ctx, waitTimeout, "faasd to adopt the devices of two-chips", func() (bool, error) {
		adopted = logLines(r.n.FaasdLog(), "adopted devices held by a container")
		return len(adopted) > before, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	adopted = adopted[before:]
	if len(adopted) != 1 || !strings.Contains(adopted[0], `"slot-2"`) || !strings.Contains(adopted[0], `"slot-3"`) {
		t.Errorf("adoptions after the restart, want one of slot-2 and slot-3 together:\n%s", strings.Join(adopted, "\n"))
	}
	r.waitAllocatable(t, counts{resChip: 4, resBoard: 1, resShare: 0})
}

// testUnhealthy: faasd restarts with slot 0 over temperature; the
// scheduler sees one chip and board 0 fewer, a pod asking two chips
// stays Pending for them, and a pod asking one gets slot 1, never 0.
func testUnhealthy(t *testing.T, r *rig) {
	r.n.StopFaasd()
	r.n.SetFaasdFlags("--sim-overheat", "0")
	if err := r.n.StartFaasd(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.waitAllocatable(t, counts{resChip: 3, resBoard: 0, resShare: 0})
	if logCount(r.n.FaasdLog(), "over temperature") == 0 {
		t.Errorf("faasd logged no chip over temperature")
	}
	r.run(t, pod("cool-chip", resChip, 1))
	if got := r.slotsOf(t, "cool-chip"); got != "1" {
		t.Errorf("cool-chip got slot %s, want 1 (0 is over temperature, 2 and 3 held)", got)
	}
	if err := r.c.API.CreatePod(r.ctx, pod("too-many", resChip, 2)); err != nil {
		t.Fatal(err)
	}
	r.waitPending(t, "too-many", "Insufficient "+resChip)
	for _, p := range []string{"too-many", "cool-chip"} {
		r.remove(t, p)
	}
	r.n.StopFaasd()
	r.n.SetFaasdFlags()
	if err := r.n.StartFaasd(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.waitAllocatable(t, counts{resChip: 4, resBoard: 1, resShare: 0})
}
