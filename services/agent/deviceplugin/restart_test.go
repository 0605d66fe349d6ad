package deviceplugin_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/services/agent/deviceplugin"
)

// TestKubeletRestart: the kubelet restarts (its directory wiped, a new
// kubelet.sock); the plugin registers again and serves the new kubelet.
func TestKubeletRestart(t *testing.T) {
	r := newRig(t, rigOptions{})
	eps := r.kubelet.accept(3)
	eps[deviceplugin.ResourceChip].await("before", healthAll(chips, H))

	r.kubelet.restart()
	eps = r.kubelet.accept(3)
	eps[deviceplugin.ResourceChip].await("after the kubelet restarted", healthAll(chips, H))
	if _, err := eps[deviceplugin.ResourceBoard].allocate("pod-a", "board-0"); err != nil {
		t.Fatalf("Allocate after the restart: %v", err)
	}

	// One socket removed alone (an operator's rm, a cleanup job).
	if err := os.Remove(filepath.Join(r.kubelet.dir, "faasd-chip.sock")); err != nil {
		t.Fatal(err)
	}
	eps = r.kubelet.accept(3)
	eps[deviceplugin.ResourceChip].await("after its socket was removed", map[string]string{"slot-0": U, "slot-2": H})

	// A new kubelet.sock alone: a kubelet that left the directory as it was.
	r.kubelet.replaceSocket()
	eps = r.kubelet.accept(3)
	eps[deviceplugin.ResourceChip].await("after kubelet.sock was replaced", map[string]string{"slot-0": U, "slot-2": H})
}

// TestPluginRestart: faasd restarts while a pod holds board-0. The new
// plugin registers again, adopts the pod's devices from PodResources (so
// that the chips under board-0 stay taken), and the old credential is
// gone with the old process.
func TestPluginRestart(t *testing.T) {
	r := newRig(t, rigOptions{alidnn: []int{0}})
	eps := r.kubelet.accept(3)
	if _, err := eps[deviceplugin.ResourceBoard].allocate("pod-a", "board-0"); err != nil {
		t.Fatal(err)
	}
	r.stop()
	r.start()
	eps = r.kubelet.accept(3)
	eps[deviceplugin.ResourceChip].await("board-0's chips after the restart", map[string]string{"slot-0": U, "slot-1": U, "slot-2": H})
	eps[deviceplugin.ResourceShare].await("slot-0's shares after the restart", healthAll(shares("slot-0"), U))
	if _, err := eps[deviceplugin.ResourceChip].allocate("pod-b", "slot-1"); err == nil {
		t.Error("slot-1 allocated while the adopted board-0 holds it")
	}
	r.kubelet.endPod("pod-a")
	eps[deviceplugin.ResourceChip].await("after pod-a ended", healthAll(chips, H))
}
