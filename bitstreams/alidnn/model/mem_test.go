package model

import (
	"fmt"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/shell/sim"
)

// memDDR is plain memory with one window [lo, hi), for engine-level tests,
// benchmarks and fuzzing without a board. Like the shell it refuses an
// access that is not wholly inside the window before moving a byte.
type memDDR struct {
	mem    []byte
	lo, hi uint64
}

func newMemDDR() *memDDR { return &memDDR{mem: make([]byte, 1<<20), lo: 0, hi: 1 << 20} }

func (m *memDDR) check(p []byte, addr uint64) error {
	if addr < m.lo || addr > m.hi || uint64(len(p)) > m.hi-addr {
		return fmt.Errorf("memDDR: %d bytes at %#x: %w", len(p), addr, sim.ErrWindow)
	}
	return nil
}

func (m *memDDR) ReadAt(_ int, p []byte, addr uint64) error {
	if err := m.check(p, addr); err != nil {
		return err
	}
	copy(p, m.mem[addr:])
	return nil
}

func (m *memDDR) WriteAt(_ int, p []byte, addr uint64) error {
	if err := m.check(p, addr); err != nil {
		return err
	}
	copy(m.mem[addr:], p)
	return nil
}

// execText assembles a program at address 0 of d and runs it on e.
func execText(t testing.TB, e *engine, d *memDDR, text string) (counters, uint32, *fault) {
	t.Helper()
	prog := assemble(t, text)
	copy(d.mem[d.lo:], prog)
	return execute(e, d, 0, d.lo, uint32(len(prog)/isa.InsnBytes), func(uint32, bool) {})
}
