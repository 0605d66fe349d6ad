package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	alidnnmodel "github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/device"
	devsim "github.com/fpga-faas/faas/services/agent/device/sim"
	"github.com/fpga-faas/faas/services/agent/sessions"
	"github.com/fpga-faas/faas/services/agent/slots"
	"github.com/fpga-faas/faas/shell/sim"
)

// zeroGate holds back the first all-zero write through it after the
// gate is armed (a closing session zeroing its region).
type zeroGate struct {
	sessions.Chip
	armed, held, open chan struct{}
}

func (g *zeroGate) Write(ctx context.Context, addr uint64, p []byte) error {
	select {
	case <-g.armed:
		if len(p) > 0 && !bytes.ContainsFunc(p, func(r rune) bool { return r != 0 }) {
			select {
			case <-g.held:
			default:
				close(g.held)
				<-g.open
			}
		}
	default:
	}
	return g.Chip.Write(ctx, addr, p)
}

// TestHubNoEngineWhileOneStops: while a slot's engine is being stopped
// (a closing session still zeroing its region), a session opened on the
// slot waits instead of getting a second engine on the same chip, which
// would hand out the same region.
func TestHubNoEngineWhileOneStops(t *testing.T) {
	roles, err := sim.NewRegistry(alidnnmodel.Model)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sim.NewBoard(sim.Config{Roles: roles, DDRSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b, err := devsim.Open(sb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	bit, err := alidnn.Bitstream(b.Chips[0].Part(), 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Chips[0].Program(context.Background(), bytes.NewReader(bit), nil); err != nil {
		t.Fatal(err)
	}
	table, err := slots.Open([]*device.Board{b}, filepath.Join(t.TempDir(), "slots.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec := slots.Record{State: agentapi.Loaded, Group: []int{0}, LoadedAt: time.Now(), Role: &agentapi.Role{ID: alidnn.ID}}
	sl, _ := table.Slot(0)

	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)), base: t.Context()}
	h := newHub(s)
	g := &zeroGate{armed: make(chan struct{}), held: make(chan struct{}), open: make(chan struct{})}
	h.wrap = func(_ int, c sessions.Chip) sessions.Chip { g.Chip = c; return g }
	defer func() {
		select {
		case <-g.open:
		default:
			close(g.open)
		}
	}()

	a, err := h.open(t.Context(), sl, rec, "alice")
	if err != nil {
		t.Fatal(err)
	}
	close(g.armed)
	go a.Close()
	<-g.held
	closed := make(chan struct{})
	go func() { h.closeSlots([]int{0}); close(closed) }()
	for stopping := false; !stopping; {
		h.mu.Lock()
		stopping = h.stopping[0] != nil
		h.mu.Unlock()
		time.Sleep(time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if bob, err := h.open(ctx, sl, rec, "bob"); err == nil {
		bob.Close()
		t.Fatal("a session opened on a second engine while the slot's first was still stopping")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("opening while the engine stops: %v, want to wait (context.DeadlineExceeded)", err)
	}

	close(g.open)
	<-closed
	bob, err := h.open(t.Context(), sl, rec, "bob")
	if err != nil {
		t.Fatalf("opening once the engine stopped: %v", err)
	}
	bob.Close()
	h.closeSlots([]int{0})
}
