package deviceplugin_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// TestPluginRestartMultiDevice: a pod holding two chips, listed by the
// kubelet one entry per device, is adopted after a restart as the one
// allocation Allocate made, not as two.
func TestPluginRestartMultiDevice(t *testing.T) {
	r := newRig(t, rigOptions{alidnn: []int{0, 1}})
	eps := r.kubelet.accept(3)
	if _, err := eps[deviceplugin.ResourceChip].allocate("pod-a", "slot-0", "slot-1"); err != nil {
		t.Fatal(err)
	}
	r.stop()
	logs := &adoptions{}
	r.cfg.Logger = slog.New(logs)
	r.start()
	eps = r.kubelet.accept(3)
	// Adopted chips take their shares: the adoption is done when they show.
	eps[deviceplugin.ResourceShare].await("slot-0's and slot-1's shares after the restart",
		healthAll(slices.Concat(shares("slot-0"), shares("slot-1")), U))
	if got := logs.devices(); len(got) != 1 || strings.Join(got[0], " ") != "slot-0 slot-1" {
		t.Errorf("adopted %v, want one allocation of [slot-0 slot-1]", got)
	}
}

// adoptions is a log handler that keeps the devices of each adoption the
// plugin logs.
type adoptions struct {
	mu   sync.Mutex
	seen [][]string
}

func (*adoptions) Enabled(context.Context, slog.Level) bool { return true }
func (a *adoptions) WithAttrs([]slog.Attr) slog.Handler     { return a }
func (a *adoptions) WithGroup(string) slog.Handler          { return a }
func (a *adoptions) Handle(_ context.Context, rec slog.Record) error {
	if !strings.HasPrefix(rec.Message, "adopted devices") {
		return nil
	}
	rec.Attrs(func(at slog.Attr) bool {
		if ids, ok := at.Value.Any().([]string); ok && at.Key == "devices" {
			a.mu.Lock()
			a.seen = append(a.seen, ids)
			a.mu.Unlock()
		}
		return true
	})
	return nil
}

func (a *adoptions) devices() [][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}
