package loader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/blank"
	"github.com/fpga-faas/faas/bitstreams/images"
	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/loader"
	"github.com/fpga-faas/faas/services/agent/slots"
	"github.com/fpga-faas/faas/shell"
)

// fixture is a registry with the two reference images published, signed,
// validated and subscribed to by alice, and an agent with one board.
type fixture struct {
	reg        *registry
	loop, dual published
}

func newFixture(t *testing.T) *fixture {
	reg := startRegistry(t)
	img, _ := reg.buildImage("loopback", images.SmallFrameBytes, shell.PartVU9P, true)
	f := &fixture{reg: reg}
	f.loop = reg.publish("loopback", "1.0.0", img, nil, reg.isvKey, "available")
	img, keys := reg.buildImage("alidnn-dual", images.SmallFrameBytes, shell.PartVU9P, false)
	f.dual = reg.publish("alidnn-dual", "1.0.0", img, keys, reg.isvKey, "available")
	reg.subscribe("alice", f.loop)
	reg.subscribe("alice", f.dual)
	return f
}

func code(err error) agentapi.Code {
	var le *loader.Error
	if errors.As(err, &le) {
		return le.Code
	}
	return ""
}

func TestLoadAndClear(t *testing.T) {
	f := newFixture(t)
	a := newAgent(t, f.reg, agentOptions{boards: 2})
	for i, s := range a.states() {
		if s.State != "cleared" || s.RoleID != blank.ID {
			t.Fatalf("slot %d after start: %+v, want cleared with the blank role", i, s)
		}
	}

	res, err := a.load("alice", f.loop.ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Slots) != 1 || res.Slots[0] != 0 || res.Image.Digest != f.loop.digest {
		t.Fatalf("loopback load: %+v", res)
	}
	var names []string
	for _, p := range res.Phases {
		names = append(names, p.Name)
	}
	t.Logf("phases: %v", res.Phases)
	if len(names) != 5 || names[0] != agentapi.PhaseResolve || names[4] != agentapi.PhaseSelfTest {
		t.Errorf("phases %v: want resolve, verify, pull, program, self-test (no key for a plain image)", names)
	}

	// The dual image goes to the first board with both chips free: board 1.
	res, err = a.load("alice", f.dual.ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Slots) != 2 || res.Slots[0] != 2 || res.Slots[1] != 3 {
		t.Fatalf("dual load: slots %v, want [2 3]", res.Slots)
	}
	st := a.states()
	want := []struct {
		digest string
		role   uint32
	}{{f.loop.digest, loopback.ID}, {"", blank.ID}, {f.dual.digest, alidnn.ID}, {f.dual.digest, alidnn.ID}}
	for i, w := range want {
		d, _ := slots.DigestBytes(w.digest)
		if w.digest == "" {
			d = [32]byte{}
		}
		if st[i].Digest != w.digest || st[i].Chip != d || st[i].RoleID != w.role {
			t.Errorf("slot %d: %+v, want digest %q role %#x", i, st[i], w.digest, w.role)
		}
	}

	// The loads reach the registry as usage of alice (reported in the
	// background).
	deadline := time.Now().Add(30 * time.Second)
	for {
		sum, err := f.reg.as("alice").UsageSummary(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var loads int64
		for _, it := range sum.Items {
			loads += it.Loads
		}
		if loads >= 3 { // loopback on slot 0, dual on slots 2 and 3
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage summary of alice: %+v, want 3 slot loads", sum.Items)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A second load of the loopback image hits the cache.
	res, err = a.load("alice", f.loop.ref, intp(0)) // replaces its own load
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Phases {
		if p.Name == agentapi.PhasePull && !p.CacheHit {
			t.Errorf("second load: pull phase %+v, want a cache hit", p)
		}
	}

	// Tenant data in DDR, then clear: the blank role and zeroed DDR.
	sl, _ := a.table.Slot(2)
	secret := []byte("tenant data that must not survive a clear")
	pad := make([]byte, 4096)
	copy(pad, secret)
	if err := sl.Chip.Write(context.Background(), 1<<20, pad); err != nil {
		t.Fatal(err)
	}
	if err := a.table.Acquire("clear", []int{2, 3}, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.table.ClearSlots(context.Background(), []int{2, 3}); err != nil {
		t.Fatal(err)
	}
	a.table.Release("clear", []int{2, 3})
	got := make([]byte, 4096)
	if err := sl.Chip.Read(context.Background(), 1<<20, got); err != nil {
		t.Fatal(err)
	}
	for _, b := range got {
		if b != 0 {
			t.Fatalf("DDR after clear: %q", got[:len(secret)])
		}
	}
	for _, i := range []int{2, 3} {
		if s := a.states()[i]; s.State != "cleared" || s.RoleID != blank.ID || s.Chip != ([32]byte{}) {
			t.Errorf("slot %d after clear: %+v", i, s)
		}
	}
}
