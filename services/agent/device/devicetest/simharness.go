package devicetest

import (
	"sync"
	"testing"
	"time"

	loopbackmodel "github.com/fpga-faas/faas/bitstreams/loopback/model"
	"github.com/fpga-faas/faas/services/agent/device"
	"github.com/fpga-faas/faas/shell/sim"
)

// SimHarness runs the suite on simulated boards with the loopback role
// registered, opened through a backend by OpenBoard. It has every capability:
// a full shell, coalescing interrupts and the simulator's faults.
type SimHarness struct {
	// OpenBoard opens a simulated board through the backend under test.
	OpenBoard func(t *testing.T, b *sim.Board) *device.Board

	mu     sync.Mutex
	boards map[*device.Board]*sim.Board
}

var (
	_ Shell       = (*SimHarness)(nil)
	_ Interrupter = (*SimHarness)(nil)
	_ Coalescer   = (*SimHarness)(nil)
	_ Faults      = (*SimHarness)(nil)
)

// DMATimeout is the simulated boards' DMA timeout, short so that the stall
// test is quick.
const DMATimeout = 50 * time.Millisecond

// Open powers up a new simulated board and opens it through the backend.
func (h *SimHarness) Open(t *testing.T) *device.Board {
	roles, err := sim.NewRegistry(loopbackmodel.Model)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sim.NewBoard(sim.Config{Roles: roles, DMATimeout: DMATimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	b := h.OpenBoard(t, sb)
	t.Cleanup(func() { b.Close() })
	h.mu.Lock()
	if h.boards == nil {
		h.boards = map[*device.Board]*sim.Board{}
	}
	h.boards[b] = sb
	h.mu.Unlock()
	return b
}

func (h *SimHarness) sim(b *device.Board) *sim.Board {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.boards[b]
}

func (h *SimHarness) RunsShell() {}
func (h *SimHarness) Coalesces() {}

func (h *SimHarness) Interrupt(t *testing.T, b *device.Board, chip, line int) {
	h.sim(b).Chip(chip).Interrupt(line)
}

func (h *SimHarness) FailNextProgram(b *device.Board, chip int) {
	h.sim(b).Chip(chip).FailNextProgram()
}

func (h *SimHarness) StallDMA(b *device.Board, chip int, stall bool) {
	h.sim(b).Chip(chip).StallDMA(stall)
}

func (h *SimHarness) DropLink(b *device.Board) { h.sim(b).DropLink() }

func (h *SimHarness) SetTemperature(b *device.Board, chip int, milliC int32) {
	h.sim(b).Chip(chip).SetTemperature(milliC)
}

func (h *SimHarness) PowerCycle(b *device.Board, chip int) { h.sim(b).Chip(chip).PowerCycle() }
