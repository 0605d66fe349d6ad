package alidnn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fpga-faas/faas/shell"
)

// Port is what Exec needs of a chip with the engine loaded: the role's
// registers and its interrupt. services/agent/device.Chip satisfies it.
type Port interface {
	RoleRead32(off uint32) (uint32, error)
	RoleWrite32(off uint32, v uint32) error
	WaitIRQ(ctx context.Context, line int) error
}

// Run is one run of an instruction stream.
type Run struct {
	Insns  uint64 // device address of the stream
	Count  int    // instructions
	Window int    // tenant window for every DDR access
}

// Stats are the engine's counters after a run.
type Stats struct {
	JobID       uint32
	Cycles      uint64
	Insns       uint32
	MACs        uint64
	LoadBytes   uint64
	StoreBytes  uint64
	BusyLoad    uint32
	BusyCompute uint32
	BusyStore   uint32
	// Stall* are the cycles each queue, free, waited for a dependency
	// token: where the schedule lost time to dependencies.
	StallLoad    uint32
	StallCompute uint32
	StallStore   uint32
	ClockMHz     int
}

// DeviceNS is the modeled device time of the run in nanoseconds.
func (s Stats) DeviceNS() uint64 {
	if s.ClockMHz == 0 {
		return 0
	}
	return s.Cycles * 1000 / uint64(s.ClockMHz)
}

// ErrBusy is returned by Exec when a run is already in progress.
var ErrBusy = errors.New("alidnn engine busy")

// waitIdle gives an aborted run a moment to stop, so the next Exec finds
// the engine idle; abort takes effect between instructions.
func waitIdle(p Port) {
	for range 1000 {
		st, err := p.RoleRead32(RegStatus)
		if err != nil || st&StatusBusy == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// ErrEngine is wrapped by every *EngineError.
var ErrEngine = errors.New("alidnn engine error")

// EngineError is a run the engine stopped with an error cause.
type EngineError struct {
	Cause Cause
	PC    uint32 // index of the failing instruction
}

func (e *EngineError) Error() string {
	return fmt.Sprintf("alidnn: instruction %d: %s", e.PC, e.Cause)
}

func (e *EngineError) Unwrap() error { return ErrEngine }

// Exec runs r on the engine behind p and waits for it to end. It returns the
// counters of the run, or an *EngineError if the engine reported one. If ctx
// ends first, Exec aborts the run and returns ctx's error.
func Exec(ctx context.Context, p Port, r Run) (Stats, error) {
	if r.Count <= 0 || r.Count > MaxInsns {
		return Stats{}, fmt.Errorf("alidnn: instruction count %d outside 1..%d", r.Count, MaxInsns)
	}
	if magic, err := p.RoleRead32(RegMagic); err != nil {
		return Stats{}, err
	} else if magic != ID {
		return Stats{}, fmt.Errorf("alidnn: role magic %#08x, want %#08x: the engine is not loaded", magic, ID)
	}
	// A run still stopping (after an abort) would refuse START and then
	// report its own end as this run's error.
	if st, err := p.RoleRead32(RegStatus); err != nil {
		return Stats{}, err
	} else if st&StatusBusy != 0 {
		return Stats{}, fmt.Errorf("%w: the engine is busy with another run", ErrBusy)
	}
	for _, w := range [][2]uint32{
		{RegInsnAddr, uint32(r.Insns)}, {RegInsnAddr + 4, uint32(r.Insns >> 32)},
		{RegInsnCount, uint32(r.Count)}, {RegWindow, uint32(r.Window)}, {RegControl, Start},
	} {
		if err := p.RoleWrite32(w[0], w[1]); err != nil {
			return Stats{}, err
		}
	}
	for {
		st, err := p.RoleRead32(RegStatus)
		if err != nil {
			return Stats{}, err
		}
		if st&StatusBusy == 0 {
			if st&StatusError != 0 {
				pc, _ := p.RoleRead32(RegErrorPC)
				return Stats{}, &EngineError{Cause: Cause(st >> 8), PC: pc}
			}
			if st&StatusDone != 0 {
				return stats(p)
			}
		}
		if err := p.WaitIRQ(ctx, shell.IRQRole0); err != nil {
			if ctx.Err() != nil {
				_ = p.RoleWrite32(RegControl, Abort)
				waitIdle(p)
			}
			return Stats{}, err
		}
	}
}

// BlockReader is an optional capability of a Port: reading consecutive
// role registers in one access. Exec uses it for the counters, which are
// then a consistent snapshot and cost one bus access instead of 25.
type BlockReader interface {
	RoleReadBlock(off uint32, dst []uint32) error
}

func stats(p Port) (Stats, error) {
	var regs [0x64 / 4]uint32
	if br, ok := p.(BlockReader); ok {
		if err := br.RoleReadBlock(0, regs[:]); err != nil {
			return Stats{}, err
		}
	} else {
		for k := range regs {
			v, err := p.RoleRead32(uint32(k * 4))
			if err != nil {
				return Stats{}, err
			}
			regs[k] = v
		}
	}
	r := func(off int) uint32 { return regs[off/4] }
	r64 := func(off int) uint64 { return uint64(r(off)) | uint64(r(off+4))<<32 }
	return Stats{
		JobID: r(RegJobID), Cycles: r64(RegCycles), Insns: r(RegInsns), MACs: r64(RegMACs),
		LoadBytes: r64(RegLoadBytes), StoreBytes: r64(RegStoreBytes),
		BusyLoad: r(RegBusyLoad), BusyCompute: r(RegBusyComp), BusyStore: r(RegBusyStore),
		StallLoad: r(RegStallLoad), StallCompute: r(RegStallComp), StallStore: r(RegStallStore),
		ClockMHz: int(r(RegConfig)>>24) * 10,
	}, nil
}
