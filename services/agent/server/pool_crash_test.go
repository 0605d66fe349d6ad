package server_test

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/fpga-faas/faas/sdk/agentapi"
)

// TestPoolKilledAfterLoad: faasd killed just after the loader recorded a
// pool load, before anything else ran, still knows after its restart that
// the pool loaded the slot: the attachment's detach clears and scrubs it.
// Found by the chaos soak (internal/e2e TestSoak): the pool's hold used to
// be written after the load's record, so such a kill left the chip
// looking like the tenant's own load, which no release clears — loaded
// for nobody, forever.
func TestPoolKilledAfterLoad(t *testing.T) {
	reg := startRegistry(t)
	listing, _ := publishAliDNN(t, reg)
	reg.api(t, "alice", "POST", "/listings/"+listing+"/subscribe", nil, nil)
	a := startPoolNode(t, reg, -1)

	// The state file as a kill right after the loaded record would leave
	// it: copied at that step, written back while faasd is down.
	var mu sync.Mutex
	var atKill []byte
	a.lcfg.Checkpoint = func(step string) {
		if !strings.HasPrefix(step, "recorded loaded") {
			return
		}
		b, err := os.ReadFile(a.state)
		if err != nil {
			t.Errorf("reading the state file at %q: %v", step, err)
			return
		}
		mu.Lock()
		atKill = b
		mu.Unlock()
	}
	a.restart(t) // takes the checkpoint in

	att := attach(t, reg, "alice", listing, false)
	ready := waitReady(t, reg, "alice", att.ID)
	a.down(t)
	mu.Lock()
	snapshot := atKill
	mu.Unlock()
	if snapshot == nil {
		t.Fatal("the load passed no \"recorded loaded\" checkpoint")
	}
	if err := os.WriteFile(a.state, snapshot, 0o600); err != nil {
		t.Fatal(err)
	}
	a.up(t)
	waitReady(t, reg, "alice", att.ID)

	reg.api(t, "alice", "DELETE", "/attachments/"+att.ID, nil, nil)
	if !released(t, reg, att.ID) {
		t.Error("the release after a kill right after the load was reported unscrubbed")
	}
	if rec := a.table.Record(ready.Slot); rec.State != agentapi.Cleared {
		t.Errorf("slot %d released after a kill right after the load: %s for %q (pool %+v), want cleared",
			ready.Slot, rec.State, rec.Tenant, rec.Pool)
	}
}
