package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// A session keeps a program in one device buffer laid out as
//
//	[0, ActBase)                       constants, shared by every run
//	[ActBase + k·stride, … + ActSize)  lane k: one run's activations
//
// Lane 0 sits where the compiled program put its activations, so a
// one-lane session has exactly the program's own layout. Each lane has its
// own copy of the instruction stream, relocated to the buffer's device
// address and to that lane's activations.
type memLayout struct {
	actBase uint64
	actSize uint64
	stride  uint64
	n       int
}

func newLanes(p *Program, n int) memLayout {
	return memLayout{actBase: p.ActBase, actSize: p.ActSize, stride: align(p.ActSize, 4096), n: n}
}

// size is the bytes of the session's buffer.
func (l memLayout) size() uint64 { return max(l.actBase+uint64(l.n)*l.stride, 64) }

// act is the buffer offset of lane k's activations.
func (l memLayout) act(k int) uint64 { return l.actBase + uint64(k)*l.stride }

// relocate returns p's instructions for lane k of a buffer at device
// address base. An access must fall wholly in the constants or wholly in
// the activations: one that straddles them could not be given per-lane
// activations (the compiler never emits one).
func (l memLayout) relocate(insns []isa.Insn, base uint64, k int) ([]isa.Insn, error) {
	out := make([]isa.Insn, len(insns))
	for n, i := range insns {
		if i.Op == isa.OpLoad || i.Op == isa.OpStore {
			lo, hi := extent(i)
			switch {
			case hi <= l.actBase:
				i.DRAM += base
			case lo >= l.actBase && hi <= l.actBase+l.actSize:
				i.DRAM += base + l.act(k) - l.actBase
			default:
				return nil, fmt.Errorf("instruction %d (%s) reaches [%#x, %#x), across the constants [0, %#x) and activations [%#x, %#x)",
					n, i.Op, lo, hi, l.actBase, l.actBase, l.actBase+l.actSize)
			}
		}
		out[n] = i
	}
	return out, nil
}

// extent is the device memory [lo, hi) a LOAD or STORE may touch, as the
// agent checks it (isa's DRAMSpan); an empty tile touches nothing.
func extent(i isa.Insn) (lo, hi uint64) {
	addr, n, ok := i.DRAMSpan()
	if !ok {
		return i.DRAM, i.DRAM
	}
	return addr, addr + n
}

// chain joins complete instruction streams into one job that runs them one
// after the other. Every FINISH but the last becomes a full barrier: the
// compute queue waits for the stores the FINISH waited for and tells the
// load queue, which waits for it, so a stream's loads cannot overwrite
// on-chip buffers the previous stream still uses. The streams run in
// sequence, not overlapped: what a chain saves is a job's submission,
// interrupt and completion round trip per stream.
func chain(streams [][]isa.Insn) []isa.Insn {
	var out []isa.Insn
	for s, insns := range streams {
		if s == len(streams)-1 {
			return append(out, insns...)
		}
		for _, i := range insns {
			if i.Op != isa.OpFinish {
				out = append(out, i)
				continue
			}
			out = append(out,
				isa.Insn{Op: isa.OpNop, NopQueue: isa.QueueCompute, PopPrev: i.PopPrev, PopNext: i.PopNext, PushPrev: true},
				isa.Insn{Op: isa.OpNop, NopQueue: isa.QueueLoad, PopNext: true})
		}
	}
	return out
}
