package sessions_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/agent/sessions"
)

// gatedChip holds back the zeroing writes of a closing session until the
// test opens the gate, and records every write of another engine made
// while one is held back: the interleaving a loaded machine produces when
// a tenant's connection ends just as its slot is handed over.
type gatedChip struct {
	sessions.Chip
	armed   chan struct{} // closed: the next all-zero write waits
	held    chan struct{} // closed when a zeroing write is waiting
	gate    chan struct{} // closed by the test: the write goes on
	once    sync.Once
	mu      sync.Mutex
	holding bool
}

func newGatedChip(c sessions.Chip) *gatedChip {
	return &gatedChip{Chip: c, armed: make(chan struct{}), held: make(chan struct{}), gate: make(chan struct{})}
}

func (g *gatedChip) Write(ctx context.Context, addr uint64, p []byte) error {
	select {
	case <-g.armed:
		if len(p) > 0 && !bytes.ContainsFunc(p, func(r rune) bool { return r != 0 }) {
			g.once.Do(func() {
				g.mu.Lock()
				g.holding = true
				g.mu.Unlock()
				close(g.held)
				<-g.gate
				defer func() {
					g.mu.Lock()
					g.holding = false
					g.mu.Unlock()
				}()
			})
		}
	default:
	}
	return g.Chip.Write(ctx, addr, p)
}

func (g *gatedChip) zeroing() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holding
}

// TestEngineStopWaitsForClosingSessions: a session whose connection ended
// is still zeroing its region when its engine is stopped (the slot is
// released or cleared). Run must not return before that zeroing is done:
// the next engine on the chip hands out the same region, and a late zero
// would wipe the next tenant's program (seen as "instruction 0: illegal
// instruction" on a warm re-attachment under load).
func TestEngineStopWaitsForClosingSessions(t *testing.T) {
	chip := newChip(t)
	g := newGatedChip(chip)
	first, err := sessions.New(sessions.Config{Chip: g, DDRSize: chip.DDRSize()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- first.Run(ctx) }()

	a, err := first.Open("alice")
	if err != nil {
		t.Fatal(err)
	}
	close(g.armed)
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }() // the connection's own Close
	<-g.held
	stop() // the slot is released: its engine stops

	// The next engine on the chip, once the first has stopped, opens a
	// session over the same region and uploads a program.
	type result struct {
		c       sessions.Completion
		early   bool // wrote while the first engine's zeroing was held back
		openErr error
	}
	next := make(chan result, 1)
	go func() {
		if err := <-ran; err != nil {
			next <- result{openErr: err}
			return
		}
		early := g.zeroing()
		second, err := sessions.New(sessions.Config{Chip: chip, DDRSize: chip.DDRSize()})
		if err != nil {
			next <- result{openErr: err}
			return
		}
		rctx, rstop := context.WithCancel(context.Background())
		defer rstop()
		go second.Run(rctx)
		b, err := second.Open("bob")
		if err != nil {
			next <- result{openErr: err}
			return
		}
		defer b.Close()
		p, err := b.Program(context.Background(), finishOnly)
		if err != nil {
			next <- result{openErr: err}
			return
		}
		early = early || g.zeroing()
		if err := b.Submit(p, 1); err != nil {
			next <- result{openErr: err}
			return
		}
		next <- result{c: <-b.Completions(), early: early}
	}()

	// Give a Run that does not wait every chance to return and the next
	// engine to write; a Run that waits stays blocked until the gate opens.
	select {
	case r := <-next:
		close(g.gate)
		t.Fatalf("the next engine ran (%+v) while the first was still zeroing a closed session's region", r)
	case <-time.After(500 * time.Millisecond):
	}
	close(g.gate)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	var r result
	select {
	case r = <-next:
	case <-time.After(time.Minute):
		t.Fatal("the first engine's Run did not return after its sessions closed")
	}
	if r.openErr != nil {
		t.Fatal(r.openErr)
	}
	if r.early {
		t.Error("the next engine wrote while the first was zeroing")
	}
	if r.c.Err != nil {
		t.Errorf("the next tenant's job: %v", r.c.Err)
	}
}
