package deviceplugin_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/deviceplugin"
)

// chipEngines loads the AliDNN engine onto the rig's simulated chips as
// account "shares" and clears it: what faasd's server.Engines does through
// its loader, whose own tests run it against the registry.
type chipEngines struct {
	r *rig

	mu            sync.Mutex
	loads, clears map[int]int
	fail          error // LoadEngine's answer while set
}

const sharesAccount = "shares"

func newChipEngines(r *rig) *chipEngines {
	return &chipEngines{r: r, loads: map[int]int{}, clears: map[int]int{}}
}

func (e *chipEngines) LoadEngine(ctx context.Context, slot int) error {
	e.mu.Lock()
	e.loads[slot]++
	fail := e.fail
	e.mu.Unlock()
	if fail != nil {
		return fail
	}
	return e.r.programAliDNN(ctx, slot, sharesAccount)
}

func (e *chipEngines) Loaded(_ context.Context, slot int) bool {
	rec := e.r.table.Record(slot)
	return rec.Tenant == sharesAccount && rec.State == agentapi.Loaded
}

func (e *chipEngines) ClearEngine(ctx context.Context, slot int) error {
	if !e.Loaded(ctx, slot) {
		return fmt.Errorf("slot %d holds no engine loaded for shares", slot)
	}
	e.mu.Lock()
	e.clears[slot]++
	e.mu.Unlock()
	return e.r.table.ClearSlots(ctx, []int{slot})
}

func (e *chipEngines) count(m map[int]int, slot int) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return m[slot]
}

// engineRig is a rig whose plugin loads engines for shares on demand,
// slots alidnn loaded by tenant alice before it starts.
func engineRig(t *testing.T, idle time.Duration, alidnn ...int) (*rig, *chipEngines, map[string]*endpoint) {
	var eng *chipEngines
	r := newRig(t, rigOptions{idle: idle, alidnn: alidnn, engines: func(r *rig) deviceplugin.Engines {
		eng = newChipEngines(r)
		return eng
	}})
	return r, eng, r.kubelet.accept(3)
}

// awaitRecord waits until slot's record satisfies ok.
func awaitRecord(t *testing.T, r *rig, slot int, what string, ok func(rec agentapi.Slot) bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		rec := r.table.Record(slot)
		if ok(agentapi.Slot{State: rec.State, Tenant: rec.Tenant}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slot %d: %s: record %+v", slot, what, rec)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSharesOnDemand: with Engines, an empty chip's shares are offered;
// the first container of a share waits in PreStartContainer for the engine
// loaded onto its chip, which then holds it as the shares' account; a
// second share of the chip loads nothing more.
func TestSharesOnDemand(t *testing.T) {
	r, eng, eps := engineRig(t, time.Hour)
	share, chip, board := eps[deviceplugin.ResourceShare], eps[deviceplugin.ResourceChip], eps[deviceplugin.ResourceBoard]
	var all []string
	for s := range 4 {
		all = append(all, shares(fmt.Sprint("slot-", s))...)
	}
	share.await("the shares of empty chips offered", healthAll(all, pluginapi.Healthy))

	if _, err := share.allocate("pod-a", "slot-0-share-0"); err != nil {
		t.Fatal(err)
	}
	chip.await("slot 0 taken by its share", map[string]string{"slot-0": pluginapi.Unhealthy, "slot-1": pluginapi.Healthy})
	board.await("board 0 taken by the share", map[string]string{"board-0": pluginapi.Unhealthy, "board-1": pluginapi.Healthy})
	if err := share.start("slot-0-share-0"); err != nil {
		t.Fatalf("PreStartContainer: %v", err)
	}
	if rec := r.table.Record(0); rec.State != agentapi.Loaded || rec.Tenant != sharesAccount {
		t.Fatalf("after PreStartContainer slot 0 is %s by %q, want loaded by %s", rec.State, rec.Tenant, sharesAccount)
	}
	share.await("the chip's other shares still offered", healthAll(shares("slot-0")[1:], pluginapi.Healthy))

	if _, err := share.allocate("pod-b", "slot-0-share-1"); err != nil {
		t.Fatal(err)
	}
	if err := share.start("slot-0-share-1"); err != nil {
		t.Fatalf("PreStartContainer of the second share: %v", err)
	}
	if n := eng.count(eng.loads, 0); n != 1 {
		t.Errorf("%d engine loads onto slot 0, want 1", n)
	}
	for s := 1; s < 4; s++ {
		if n := eng.count(eng.loads, s); n != 0 {
			t.Errorf("%d engine loads onto slot %d, which no share was allocated on", n, s)
		}
	}
}

// TestSharesOnDemandLoadFails: a failed load fails PreStartContainer with
// its reason, which the kubelet shows on the pod, and the kubelet's next
// try loads again.
func TestSharesOnDemandLoadFails(t *testing.T) {
	r, eng, eps := engineRig(t, time.Hour)
	share := eps[deviceplugin.ResourceShare]
	eng.mu.Lock()
	eng.fail = errors.New("not entitled: subscribe the account to acme/alidnn")
	eng.mu.Unlock()
	if _, err := share.allocate("pod-a", "slot-2-share-0"); err != nil {
		t.Fatal(err)
	}
	err := share.start("slot-2-share-0")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "could not load the AliDNN engine") ||
		!strings.Contains(err.Error(), "subscribe the account") {
		t.Fatalf("PreStartContainer with a failing load: %v; want FailedPrecondition naming the load's failure", err)
	}
	eng.mu.Lock()
	eng.fail = nil
	eng.mu.Unlock()
	if err := share.start("slot-2-share-0"); err != nil {
		t.Fatalf("PreStartContainer again: %v", err)
	}
	if n := eng.count(eng.loads, 2); n != 2 {
		t.Errorf("%d loads onto slot 2, want 2 (the failed one and the retry)", n)
	}
	if rec := r.table.Record(2); rec.State != agentapi.Loaded {
		t.Errorf("slot 2 is %s after the retry", rec.State)
	}
}

// TestSharesOnDemandIdle: once its last share has ended, the engine stays
// for EngineIdle and is then cleared; the chip's shares stay offered.
func TestSharesOnDemandIdle(t *testing.T) {
	r, eng, eps := engineRig(t, 200*time.Millisecond)
	share := eps[deviceplugin.ResourceShare]
	if _, err := share.allocate("pod-a", "slot-1-share-0"); err != nil {
		t.Fatal(err)
	}
	if err := share.start("slot-1-share-0"); err != nil {
		t.Fatal(err)
	}
	r.kubelet.endPod("pod-a")
	awaitRecord(t, r, 1, "cleared when idle", func(s agentapi.Slot) bool { return s.State == agentapi.Cleared })
	if n := eng.count(eng.clears, 1); n != 1 {
		t.Errorf("%d clears of slot 1, want 1", n)
	}
	share.await("the cleared chip's shares offered again", healthAll(shares("slot-1"), pluginapi.Healthy))
}

// TestChipClearsSharesEngine: a chip allocated whole after its shares have
// ended is cleared of their engine before its container starts, so that
// the pod never acts as the shares' account.
func TestChipClearsSharesEngine(t *testing.T) {
	r, eng, eps := engineRig(t, time.Hour)
	share, chip := eps[deviceplugin.ResourceShare], eps[deviceplugin.ResourceChip]
	if _, err := share.allocate("pod-a", "slot-3-share-0"); err != nil {
		t.Fatal(err)
	}
	if err := share.start("slot-3-share-0"); err != nil {
		t.Fatal(err)
	}
	r.kubelet.endPod("pod-a")
	chip.await("slot 3 free again", map[string]string{"slot-3": pluginapi.Healthy})
	if _, err := chip.allocate("pod-c", "slot-3"); err != nil {
		t.Fatal(err)
	}
	if rec := r.table.Record(3); rec.Tenant != sharesAccount {
		t.Fatalf("slot 3 before the chip's container starts: %+v", rec)
	}
	if err := chip.start("slot-3"); err != nil {
		t.Fatalf("PreStartContainer of the chip: %v", err)
	}
	if rec := r.table.Record(3); rec.State != agentapi.Cleared {
		t.Errorf("slot 3 is %s by %q when the chip's container starts, want cleared", rec.State, rec.Tenant)
	}
	if n := eng.count(eng.clears, 3); n != 1 {
		t.Errorf("%d clears of slot 3, want 1", n)
	}
}

// TestSharesPreferEngines: with engines loaded on demand, the kubelet is
// steered to the shares of a chip that holds an engine already (slot 2,
// loaded by a tenant) rather than an empty one, which would cost a load.
func TestSharesPreferEngines(t *testing.T) {
	_, _, eps := engineRig(t, time.Hour, 2)
	share := eps[deviceplugin.ResourceShare]
	var all []string
	for s := range 4 {
		all = append(all, shares(fmt.Sprint("slot-", s))...)
	}
	share.await("every chip's shares offered", healthAll(all, pluginapi.Healthy))
	got, err := share.prefer(all, nil, 1)
	if err != nil || !slices.Equal(got, []string{"slot-2-share-0"}) {
		t.Errorf("one share: %v (%v), want slot-2-share-0, on the chip with an engine", got, err)
	}
}
