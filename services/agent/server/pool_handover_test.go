package server_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/agent/server"
	"github.com/fpga-faas/faas/services/agent/sessions"
)

// handover watches the session engines of one slot. Once armed, the next
// all-zero write of the slot's current engine (a closing session zeroing
// its region) is held back until the gate opens; a later engine of the
// slot touching the chip meanwhile is recorded as a violation.
type handover struct {
	slot     int
	held     chan struct{} // closed once a zeroing write is held back
	gate     chan struct{} // closed to let it go on
	violated chan struct{} // closed at the first violation

	mu      sync.Mutex
	engines int // engines started on the slot
	armedAt int // the engine whose next zeroing is to be held back; 0: none
	heldBy  int // the engine whose zeroing is held back now; 0: none
	once    sync.Once
	vonce   sync.Once
}

func newHandover(slot int) *handover {
	return &handover{slot: slot, held: make(chan struct{}), gate: make(chan struct{}), violated: make(chan struct{})}
}

func (h *handover) wrap(slot int, c sessions.Chip) sessions.Chip {
	if slot != h.slot {
		return c
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.engines++
	return &handoverChip{Chip: c, h: h, n: h.engines}
}

// arm holds back the current engine's next zeroing write.
func (h *handover) arm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armedAt = h.engines
}

func (h *handover) open() { h.once.Do(func() { close(h.gate) }) }

type handoverChip struct {
	sessions.Chip
	h *handover
	n int // the engine's number on the slot, from 1
}

// touch records a call of engine c.n: a violation if an earlier engine's
// zeroing is held back.
func (c *handoverChip) touch() {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	if c.h.heldBy != 0 && c.n > c.h.heldBy {
		c.h.vonce.Do(func() { close(c.h.violated) })
	}
}

func (c *handoverChip) Write(ctx context.Context, addr uint64, p []byte) error {
	c.touch()
	c.h.mu.Lock()
	hold := c.n == c.h.armedAt && len(p) > 0 && !bytes.ContainsFunc(p, func(r rune) bool { return r != 0 })
	if hold {
		c.h.heldBy, c.h.armedAt = c.n, 0
	}
	c.h.mu.Unlock()
	if hold {
		close(c.h.held)
		<-c.h.gate
		err := c.Chip.Write(ctx, addr, p)
		c.h.mu.Lock()
		c.h.heldBy = 0
		c.h.mu.Unlock()
		return err
	}
	return c.Chip.Write(ctx, addr, p)
}

func (c *handoverChip) SetWindow(n int, base, limit uint64) error {
	c.touch()
	return c.Chip.SetWindow(n, base, limit)
}

// TestPoolKeepWarmHandover forces the interleaving that failed TestPool
// under load: a tenant's client ends its session, and while that session
// is still zeroing its region the tenant detaches (the slot is kept warm)
// and attaches again, warm, on the same slot. The new attachment's session
// must not get an engine on the chip until the old session's zeroing is
// done: both engines would hand out the same region, and the late zeros
// would wipe the new program ("instruction 0: illegal instruction").
func TestPoolKeepWarmHandover(t *testing.T) {
	reg := startRegistry(t)
	listing, _ := publishAliDNN(t, reg)
	reg.api(t, "alice", "POST", "/listings/"+listing+"/subscribe", nil, nil)
	a := startPoolNode(t, reg, time.Hour)

	first := attach(t, reg, "alice", listing, false)
	ready := waitReady(t, reg, "alice", first.ID)
	h := newHandover(ready.Slot)
	server.WrapChips(a.srv, h.wrap)
	_, d := openAttached(t, ready, first.Credential)
	roundTrip(t, d)

	h.arm()
	d.Close()
	select {
	case <-h.held:
	case <-time.After(poolTimeout):
		t.Fatal("the closed session never zeroed its region")
	}
	reg.api(t, "alice", "DELETE", "/attachments/"+first.ID, nil, nil)
	// The gate opens at the first violation, or after a while: a node
	// that waits for the zeroing holds the next session back until then.
	go func() {
		select {
		case <-h.violated:
		case <-time.After(time.Second):
		}
		h.open()
	}()
	t.Cleanup(h.open)

	second := attach(t, reg, "alice", listing, false)
	if !second.Warm || second.Slot != ready.Slot {
		t.Fatalf("the attach after the detach placed on slot %d warm %v, want warm on slot %d", second.Slot, second.Warm, ready.Slot)
	}
	again := waitReady(t, reg, "alice", second.ID)
	_, d2 := openAttached(t, again, second.Credential)
	roundTrip(t, d2)
	select {
	case <-h.violated:
		t.Error("a new engine used the chip while the old one was still zeroing a closed session's region")
	default:
	}
	if released(t, reg, first.ID) {
		t.Error("a detach kept warm was reported scrubbed")
	}
}
