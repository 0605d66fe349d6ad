package model

import (
	"context"
	"fmt"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/sim"
)

// Local is one AliDNN engine on a simulated board in this process, for
// tools that run programs without an agent. It satisfies alidnn.Port; the
// engine reaches DDR through tenant window 0, which covers [0, ddrBytes).
type Local struct {
	board *sim.Board
	chip  *sim.Chip
	size  uint64
}

var (
	_ alidnn.Port        = (*Local)(nil)
	_ alidnn.BlockReader = (*Local)(nil)
)

// localWindow is the tenant window the engine's runs use.
const localWindow = 0

// NewLocal powers up a simulated board, programs the engine into chip 0
// through the shell's partial-reconfiguration path and opens tenant window 0
// over the first ddrBytes of its DDR (0: all of it).
func NewLocal(ddrBytes uint64) (*Local, error) {
	roles, err := sim.NewRegistry(Model)
	if err != nil {
		return nil, err
	}
	b, err := sim.NewBoard(sim.Config{Roles: roles})
	if err != nil {
		return nil, err
	}
	l := &Local{board: b, chip: b.Chip(0), size: ddrBytes}
	if l.size == 0 || l.size > l.chip.DDRSize() {
		l.size = l.chip.DDRSize()
	}
	if err := l.setup(); err != nil {
		b.Close()
		return nil, fmt.Errorf("alidnn model: local engine: %w", err)
	}
	return l, nil
}

func (l *Local) setup() error {
	bit, err := alidnn.Bitstream(l.chip.Part(), 64<<10)
	if err != nil {
		return err
	}
	if pad := len(bit) % shell.DMAAlign; pad != 0 {
		bit = append(bit, make([]byte, shell.DMAAlign-pad)...)
	}
	c := l.chip
	for _, v := range []uint32{shell.PRDecouple, shell.PRDecouple | shell.PRBegin} {
		if err := c.WriteUser(shell.RegPRControl, v); err != nil {
			return err
		}
	}
	if err := c.H2C(context.Background(), 0, bit, shell.PRStreamAddr); err != nil {
		return err
	}
	if err := c.WriteUser(shell.RegPRControl, shell.PRDecouple|shell.PREnd); err != nil {
		return err
	}
	for {
		v, err := c.ReadUser(shell.RegPRStatus)
		if err != nil {
			return err
		}
		if state, cause := shell.PRStatus(v); state == shell.PRDone {
			break
		} else if state != shell.PRBusy {
			return fmt.Errorf("programming failed: %v (%v)", cause, c.PRError())
		}
		time.Sleep(100 * time.Microsecond)
	}
	for _, w := range []struct {
		off uint64
		v   uint32
	}{
		{shell.RegPRControl, 0},
		{uint64(shell.WindowBase(localWindow)), 0}, {uint64(shell.WindowBase(localWindow)) + 4, 0},
		{uint64(shell.WindowLimit(localWindow)), uint32(l.size)}, {uint64(shell.WindowLimit(localWindow)) + 4, uint32(l.size >> 32)},
		{shell.RegWindowControl, 1 << localWindow},
	} {
		if err := c.WriteUser(w.off, w.v); err != nil {
			return err
		}
	}
	return nil
}

// RoleRead32 reads the engine register at off.
func (l *Local) RoleRead32(off uint32) (uint32, error) {
	return l.chip.ReadUser(shell.RoleBase + uint64(off))
}

// RoleReadBlock reads len(dst) consecutive engine registers from off in
// one access (alidnn.BlockReader).
func (l *Local) RoleReadBlock(off uint32, dst []uint32) error {
	return l.chip.ReadUserBlock(shell.RoleBase+uint64(off), dst)
}

// RoleWrite32 writes the engine register at off.
func (l *Local) RoleWrite32(off, v uint32) error {
	return l.chip.WriteUser(shell.RoleBase+uint64(off), v)
}

// WaitIRQ waits for user interrupt line (shell.IRQRole0 is the engine's).
func (l *Local) WaitIRQ(ctx context.Context, line int) error {
	return l.chip.WaitIRQ(ctx, line)
}

// Window reports the tenant window runs must name and the DDR it covers.
func (l *Local) Window() (base, size uint64, index int) { return 0, l.size, localWindow }

// WriteAt copies p to DDR at addr by host DMA; unaligned ends are merged
// with the bytes around them.
func (l *Local) WriteAt(ctx context.Context, p []byte, addr uint64) error {
	lo, buf, err := l.aligned(ctx, p, addr, true)
	if err != nil {
		return err
	}
	copy(buf[addr-lo:], p)
	return l.chip.H2C(ctx, 0, buf, lo)
}

// ReadAt copies DDR at addr into p by host DMA.
func (l *Local) ReadAt(ctx context.Context, p []byte, addr uint64) error {
	lo, buf, err := l.aligned(ctx, p, addr, false)
	if err != nil {
		return err
	}
	if err := l.chip.C2H(ctx, 0, buf, lo); err != nil {
		return err
	}
	copy(p, buf[addr-lo:])
	return nil
}

// aligned returns the DMA-aligned span around [addr, addr+len(p)): its
// start and a buffer for it, holding the DDR's bytes when merge is set and
// the span is wider than p.
func (l *Local) aligned(ctx context.Context, p []byte, addr uint64, merge bool) (uint64, []byte, error) {
	const a = shell.DMAAlign
	lo := addr / a * a
	hi := (addr + uint64(len(p)) + a - 1) / a * a
	if lo == addr && hi == addr+uint64(len(p)) {
		if merge {
			return lo, append([]byte(nil), p...), nil
		}
		return lo, make([]byte, len(p)), nil
	}
	buf := make([]byte, hi-lo)
	if merge {
		if err := l.chip.C2H(ctx, 0, buf, lo); err != nil {
			return 0, nil, err
		}
	}
	return lo, buf, nil
}

// Close powers the board down, stopping the engine.
func (l *Local) Close() error { return l.board.Close() }
