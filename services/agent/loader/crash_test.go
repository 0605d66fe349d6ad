package loader_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/blank"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// TestCrashRecovery stops the agent at every step of a two-chip load that
// changes a chip or the state file, as a SIGKILL would, starts a new agent
// over the same boards, state file and cache, and checks that no slot
// reports an image other than the one on its chip, that the slot the load
// did not target is untouched, and that the load then succeeds.
//
// The simulated boards live in the test process, so the "kill" freezes the
// old agent's load at the step forever (its parallel stream to the other
// chip stops at its next read; neither touches a chip or file again) instead
// of ending a process: to the board and the state file that is the same. The xdma backend keeps a real board's registers
// across an agent restart the same way.
func TestCrashRecovery(t *testing.T) {
	f := newFixture(t)
	a := newAgent(t, f.reg, agentOptions{boards: 2})
	if _, err := a.load("alice", f.loop.ref, nil); err != nil {
		t.Fatal(err)
	}
	steps := []string{"zeroed 2", "zeroed 3", "recorded loading", "streaming 2", "programmed 2", "streaming 3",
		"programmed 3", "self-tested", "digest 2", "digest 3", "recorded loaded 2", "recorded loaded 3"}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			reached := make(chan struct{})
			var crashed atomic.Bool
			a.restart(nil, func(s string) {
				if crashed.Load() {
					select {} // every other step of the dead agent stops too
				}
				if s == step {
					crashed.Store(true)
					close(reached)
					select {} // killed here
				}
			})
			go a.load("alice", f.dual.ref, nil)
			select {
			case <-reached:
			case <-time.After(time.Minute):
				t.Fatalf("the load never reached %q", step)
			}
			// The chips of a two-chip load stream in parallel; the other
			// stream stops at its next read, after at most one DMA
			// chunk. Give it that long before the new agent starts.
			time.Sleep(200 * time.Millisecond)
			wiped := a.restart(nil, nil)
			st := a.states()
			t.Logf("after a crash at %q: wiped %v; slots 2, 3: %s, %s", step, wiped, st[2].State, st[3].State)
			checkConsistent(t, a)
			if st[0].State != "loaded" || st[0].Digest != f.loop.digest {
				t.Errorf("slot 0, not targeted, is %+v", st[0])
			}
			// The node recovers: a load now succeeds, and leaves the board
			// loaded for the next step's crash to start from a loaded state.
			if _, err := a.load("alice", f.dual.ref, intp(2)); err != nil {
				t.Fatalf("load after recovery: %v", err)
			}
			checkConsistent(t, a)
			// Start the next crash from cleared slots.
			if err := a.table.Acquire("clear", []int{2, 3}, nil); err != nil {
				t.Fatal(err)
			}
			if err := a.table.ClearSlots(context.Background(), []int{2, 3}); err != nil {
				t.Fatal(err)
			}
			a.table.Release("clear", []int{2, 3})
		})
	}
}

// checkConsistent checks that every slot reports what its chip holds: a
// loaded slot's digest register holds its image's digest; any other slot's
// chip has the blank role and a zero digest.
func checkConsistent(t *testing.T, a *agent) {
	t.Helper()
	for i, s := range a.states() {
		switch s.State {
		case "loaded":
			want, err := slots.DigestBytes(s.Digest)
			if err != nil || s.Chip != want || s.RoleID == blank.ID {
				t.Errorf("slot %d reports %s loaded, its chip holds digest %x role %#x", i, s.Digest, s.Chip, s.RoleID)
			}
		case "cleared":
			if s.Chip != ([32]byte{}) || s.RoleID != blank.ID {
				t.Errorf("slot %d reports cleared, its chip holds digest %x role %#x", i, s.Chip, s.RoleID)
			}
		default:
			t.Errorf("slot %d is %s after reconcile: %s", i, s.State, fmt.Sprint(s))
		}
	}
}
