package deviceplugin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/fpga-faas/faas/services/agent/deviceplugin"
	"github.com/fpga-faas/faas/services/agent/server"
)

const (
	H = pluginapi.Healthy
	U = pluginapi.Unhealthy
)

var (
	chips  = []string{"slot-0", "slot-1", "slot-2", "slot-3"}
	boards = []string{"board-0", "board-1"}
)

func shares(slot string) []string {
	var out []string
	for i := range 4 {
		out = append(out, slot+"-share-"+string(rune('0'+i)))
	}
	return out
}

// TestRegisterListAllocate: the plugin registers its three resources,
// lists every device with its health, and answers Allocate with the
// mount, the environment, a credential and CDI names, nothing else.
func TestRegisterListAllocate(t *testing.T) {
	r := newRig(t, rigOptions{alidnn: []int{2, 3}})
	eps := r.kubelet.accept(3)
	for _, name := range []string{deviceplugin.ResourceChip, deviceplugin.ResourceBoard, deviceplugin.ResourceShare} {
		if eps[name] == nil {
			t.Fatalf("%s did not register; have %v", name, eps)
		}
	}
	chip, board, share := eps[deviceplugin.ResourceChip], eps[deviceplugin.ResourceBoard], eps[deviceplugin.ResourceShare]
	if got := chip.await("all chips", healthAll(chips, H)); len(got) != 4 {
		t.Errorf("chip devices %v, want 4", got)
	}
	if got := board.await("all boards", healthAll(boards, H)); len(got) != 2 {
		t.Errorf("board devices %v, want 2", got)
	}
	// Shares only on the chips holding an AliDNN engine.
	want := healthAll(append(shares("slot-2"), shares("slot-3")...), H)
	for id, h := range healthAll(append(shares("slot-0"), shares("slot-1")...), U) {
		want[id] = h
	}
	if got := share.await("shares of the AliDNN chips", want); len(got) != 16 {
		t.Errorf("share devices %v, want 16", got)
	}

	resp, err := chip.allocate("pod-a", "slot-1")
	if err != nil {
		t.Fatal(err)
	}
	wantMount := &pluginapi.Mount{ContainerPath: "/run/faasd", HostPath: filepath.Dir(r.cfg.PodSocket), ReadOnly: true}
	if len(resp.Mounts) != 1 || resp.Mounts[0].ContainerPath != wantMount.ContainerPath ||
		resp.Mounts[0].HostPath != wantMount.HostPath || !resp.Mounts[0].ReadOnly {
		t.Errorf("mounts %v, want only %v", resp.Mounts, wantMount)
	}
	if len(resp.Devices) != 0 || len(resp.Annotations) != 0 {
		t.Errorf("device nodes %v, annotations %v: want none", resp.Devices, resp.Annotations)
	}
	var keys []string
	for k := range resp.Envs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"FAAS_AGENT", "FAAS_ALLOCATION_TOKEN", "FAAS_SLOTS"}) {
		t.Errorf("env %v: want FAAS_AGENT, FAAS_ALLOCATION_TOKEN, FAAS_SLOTS and no more", keys)
	}
	if resp.Envs["FAAS_SLOTS"] != "1" || resp.Envs["FAAS_AGENT"] != "unix:///run/faasd/faasd.sock" ||
		!strings.HasPrefix(resp.Envs["FAAS_ALLOCATION_TOKEN"], server.GrantPrefix) {
		t.Errorf("env %v", resp.Envs)
	}
	if len(resp.CdiDevices) != 1 || resp.CdiDevices[0].Name != "faas.dev/chip=slot-1" {
		t.Errorf("CDI devices %v, want faas.dev/chip=slot-1", resp.CdiDevices)
	}
	// The CDI spec names the device, for the runtime to resolve.
	var spec struct {
		Kind    string `json:"kind"`
		Devices []struct {
			Name string `json:"name"`
		} `json:"devices"`
	}
	data, err := os.ReadFile(filepath.Join(r.cfg.CDIDir, "faas.dev-chip.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &spec); err != nil || spec.Kind != "faas.dev/chip" || len(spec.Devices) != 4 || spec.Devices[1].Name != "slot-1" {
		t.Errorf("CDI spec %s (%v)", data, err)
	}

	// A board allocation covers both chips; its env lists both.
	resp, err = board.allocate("pod-b", "board-1")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Envs["FAAS_SLOTS"] != "2,3" {
		t.Errorf("board-1: FAAS_SLOTS %q, want 2,3", resp.Envs["FAAS_SLOTS"])
	}

	_, err = chip.allocate("pod-c", "slot-9")
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("Allocate(slot-9): %v, want InvalidArgument", err)
	}
}

// TestOneChipThreeResources: a chip allocated under one resource turns
// the devices of the others over it Unhealthy, a conflicting Allocate
// fails, and when the pod ends (PodResources no longer lists it) they turn
// Healthy again.
func TestOneChipThreeResources(t *testing.T) {
	r := newRig(t, rigOptions{alidnn: []int{2, 3}})
	eps := r.kubelet.accept(3)
	chip, board, share := eps[deviceplugin.ResourceChip], eps[deviceplugin.ResourceBoard], eps[deviceplugin.ResourceShare]
	share.await("shares", healthAll(shares("slot-2"), H))

	// A chip taken whole: its board and its shares go.
	if _, err := chip.allocate("pod-a", "slot-2"); err != nil {
		t.Fatal(err)
	}
	board.await("board-1 after slot-2 went whole", map[string]string{"board-1": U, "board-0": H})
	share.await("slot-2's shares after slot-2 went whole", healthAll(shares("slot-2"), U))
	chip.await("slot-2 stays its holder's", map[string]string{"slot-2": H, "slot-3": H})
	if _, err := board.allocate("pod-x", "board-1"); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("board-1 over an allocated slot-2: %v, want FailedPrecondition", err)
	}
	if _, err := share.allocate("pod-x", "slot-2-share-0"); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a share of an allocated slot-2: %v, want FailedPrecondition", err)
	}

	// A share of slot 3: slot-3 and board-1 go as chips, the other shares stay.
	if _, err := share.allocate("pod-b", "slot-3-share-1"); err != nil {
		t.Fatal(err)
	}
	chip.await("slot-3 after a share of it went", map[string]string{"slot-3": U})
	share.await("slot-3's other shares", map[string]string{"slot-3-share-0": H, "slot-3-share-2": H})
	if _, err := chip.allocate("pod-x", "slot-3"); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("slot-3 with a share allocated: %v, want FailedPrecondition", err)
	}

	// The pods end: everything comes back.
	r.kubelet.endPod("pod-a")
	r.kubelet.endPod("pod-b")
	share.await("slot-2's shares after pod-a ended", healthAll(shares("slot-2"), H))
	chip.await("chips after the pods ended", healthAll(chips, H))
	board.await("boards after the pods ended", healthAll(boards, H))
	if _, err := board.allocate("pod-c", "board-1"); err != nil {
		t.Errorf("board-1 once free: %v", err)
	}
}

// TestReallocationSupersedes: the kubelet handing a device on under the
// same resource ends the earlier allocation, and with it its credential.
func TestReallocationSupersedes(t *testing.T) {
	r := newRig(t, rigOptions{grace: 1 << 62}) // nothing released by PodResources
	chip := r.kubelet.accept(3)[deviceplugin.ResourceChip]
	first, err := chip.allocate("pod-a", "slot-0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chip.allocate("pod-b", "slot-0"); err != nil {
		t.Fatalf("slot-0 handed on: %v", err)
	}
	code := agentStatus(t, r, first.Envs["FAAS_ALLOCATION_TOKEN"])
	if code != 401 {
		t.Errorf("the superseded credential: status %d, want 401", code)
	}
}

// TestPreferredAllocation: chips of one board go together, single chips
// come from boards already broken, and shares pack onto chips that
// already have shares.
func TestPreferredAllocation(t *testing.T) {
	r := newRig(t, rigOptions{alidnn: []int{0, 1, 2, 3}})
	eps := r.kubelet.accept(3)
	chip, share := eps[deviceplugin.ResourceChip], eps[deviceplugin.ResourceShare]
	cases := []struct {
		avail, must []string
		size        int
		want        []string
	}{
		{chips, nil, 2, []string{"slot-0", "slot-1"}},
		{[]string{"slot-1", "slot-2", "slot-3"}, nil, 2, []string{"slot-2", "slot-3"}},
		{[]string{"slot-0", "slot-2", "slot-3"}, nil, 1, []string{"slot-0"}}, // board 0 is broken already
		{[]string{"slot-0", "slot-1", "slot-2"}, nil, 1, []string{"slot-2"}},
		{chips, []string{"slot-3"}, 2, []string{"slot-3", "slot-2"}}, // its partner
	}
	for _, c := range cases {
		got, err := chip.prefer(c.avail, c.must, c.size)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("chips %v must %v size %d: %v (%v), want %v", c.avail, c.must, c.size, got, err, c.want)
		}
	}

	all := append(append(append(shares("slot-0"), shares("slot-1")...), shares("slot-2")...), shares("slot-3")...)
	if _, err := share.allocate("pod-a", "slot-2-share-0"); err != nil {
		t.Fatal(err)
	}
	avail := slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == "slot-2-share-0" })
	got, err := share.prefer(avail, nil, 2)
	if err != nil || !slices.Equal(got, []string{"slot-2-share-1", "slot-2-share-2"}) {
		t.Errorf("two shares beside slot-2-share-0: %v (%v), want slot-2-share-1, slot-2-share-2", got, err)
	}
	// More than the shared chip has left: the rest on one other chip.
	got, err = share.prefer(avail, nil, 5)
	if err != nil || len(got) != 5 || !slices.Equal(got[:3], []string{"slot-2-share-1", "slot-2-share-2", "slot-2-share-3"}) ||
		got[3][:6] != got[4][:6] {
		t.Errorf("five shares: %v (%v), want slot-2's three then two of one chip", got, err)
	}
	if _, err := share.prefer(avail, nil, 99); status.Code(err) != codes.InvalidArgument {
		t.Errorf("99 shares of %d: %v, want InvalidArgument", len(avail), err)
	}
}
