package sessions

import (
	"context"
	"fmt"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// The agent area of every session's region lies between its buffers and
// its program area: the scrub program, then zeros the scrub's LOADs read. No buffer lies there and no
// tenant instruction may reach it, so only the agent writes it; the zeros
// are written at Open and Close zeroes them with all else the session wrote.
const (
	scrubProgBytes = 4 << 10  // room for 256 instructions; a scrub needs about 30
	scrubZeroBytes = 64 << 10 // the larger, the fewer LOADs (and latencies) per scrub
	agentBytes     = scrubProgBytes + scrubZeroBytes
)

// bank is one SRAM bank a tenant program can read. inp and wgt have an
// fp32 bank beside the int8 one (ISA.md, fp32 banks): both must be cleared.
type bank uint8

const (
	bankUop bank = iota
	bankInp
	bankInpF
	bankWgt
	bankWgtF
	bankAcc
	bankParam
	numBanks
)

// sramSet is, per bank, the element range [base, end) that may hold a
// job's data; an empty extent is a clean bank.
type sramSet [numBanks]extent

func (d *sramSet) add(o *sramSet) {
	for b, x := range o {
		if x.end <= x.base {
			continue
		}
		if d[b].end <= d[b].base {
			d[b] = x
			continue
		}
		d[b] = extent{min(d[b].base, x.base), max(d[b].end, x.end)}
	}
}

func (d *sramSet) empty() bool {
	for _, x := range d {
		if x.end > x.base {
			return false
		}
	}
	return true
}

// bankOf is the bank a LOAD of mem with data type dt writes.
func bankOf(mem isa.MemSpace, dt isa.DType) bank {
	switch mem {
	case isa.MemUop:
		return bankUop
	case isa.MemInp:
		if dt == isa.FP32 {
			return bankInpF
		}
		return bankInp
	case isa.MemWgt:
		if dt == isa.FP32 {
			return bankWgtF
		}
		return bankWgt
	case isa.MemAcc:
		return bankAcc
	}
	return bankParam
}

// space is the memory space of a bank and the data type a LOAD into it
// uses.
func (b bank) space() (isa.MemSpace, isa.DType) {
	switch b {
	case bankUop:
		return isa.MemUop, isa.Int32
	case bankInp:
		return isa.MemInp, isa.Int8
	case bankInpF:
		return isa.MemInp, isa.FP32
	case bankWgt:
		return isa.MemWgt, isa.Int8
	case bankWgtF:
		return isa.MemWgt, isa.FP32
	case bankAcc:
		return isa.MemAcc, isa.Int32
	}
	return isa.MemParam, isa.Int32
}

// bankSize is the number of elements of a bank in configuration c.
func bankSize(c *alidnn.Config, b bank) uint64 {
	switch b {
	case bankUop:
		return uint64(c.UopSize)
	case bankInp, bankInpF:
		return uint64(c.InpSize)
	case bankWgt, bankWgtF:
		return uint64(c.WgtSize)
	case bankAcc:
		return uint64(c.AccSize)
	}
	return uint64(c.ParamSize)
}

// fullSRAM is every bank, whole: what the SRAMs may hold when nothing is
// known of them (an earlier user of the chip).
func fullSRAM(c *alidnn.Config) sramSet {
	var d sramSet
	for b := range numBanks {
		d[b] = extent{0, bankSize(c, b)}
	}
	return d
}

// writes is what a program may leave in SRAM. LOAD is the only writer of
// uop, inp, wgt and param, and its range is in the instruction; GEMM, ALU
// and POOL write acc at indices that come from micro-op data, so any of
// them dirties the whole accumulator. A program that writes nothing (a
// FINISH alone, say) leaves the SRAMs as they were, so its jobs never
// cause a scrub.
func writes(insns []isa.Insn, c *alidnn.Config) sramSet {
	var d sramSet
	for _, in := range insns {
		var one sramSet
		switch in.Op {
		case isa.OpLoad:
			b := bankOf(in.Mem, in.DType)
			n := (uint64(in.PadY0) + uint64(in.YSize) + uint64(in.PadY1)) *
				(uint64(in.PadX0) + uint64(in.XSize) + uint64(in.PadX1))
			size := bankSize(c, b)
			lo := min(uint64(in.SRAM), size)
			one[b] = extent{lo, min(lo+n, size)} // beyond the bank the engine faults first
		case isa.OpGEMM, isa.OpALU, isa.OpPool:
			one[bankAcc] = extent{0, bankSize(c, bankAcc)}
		default:
			continue
		}
		d.add(&one)
	}
	return d
}

// padded reports whether LOADs into b may pad: padding is generated on the
// SRAM side, so it clears elements without reading DRAM.
func (b bank) padded() bool { return b == bankInp || b == bankInpF || b == bankAcc }

// maxPad is the most padding a LOAD takes on each side.
const maxPad = 15

// scrubPlan builds the scrub program: LOADs that overwrite every dirty
// element of d with zeros read from zero (scrubZeroBytes of zeros), or
// made as padding, then FINISH. inp and wgt LOADs run on the load queue,
// the others on the compute queue, so the two halves overlap; FINISH waits
// for the load queue's last LOAD.
func scrubPlan(d *sramSet, zero uint64, c *alidnn.Config) []isa.Insn {
	var load, comp []isa.Insn
	for b := range numBanks {
		x := d[b]
		if x.end <= x.base {
			continue
		}
		mem, dt := b.space()
		esz := isa.ElemBytes(mem, dt, false)
		var ins []isa.Insn
		if b.padded() {
			ins = padTiles(x.base, x.end-x.base, esz, c)
		} else {
			per := min(uint64(scrubZeroBytes)/esz, 1<<16-1)
			for at := x.base; at < x.end; at += per {
				k := min(per, x.end-at)
				ins = append(ins, isa.Insn{YSize: 1, XSize: uint32(k), XStride: uint32(k), SRAM: uint32(at)})
			}
		}
		for _, in := range ins {
			in.Op, in.Mem, in.DType, in.DRAM = isa.OpLoad, mem, dt, zero
			if mem == isa.MemInp || mem == isa.MemWgt {
				load = append(load, in)
			} else {
				comp = append(comp, in)
			}
		}
	}
	fin := isa.Insn{Op: isa.OpFinish}
	if len(load) > 0 {
		load[len(load)-1].PushNext = true
		fin.PopPrev = true
	}
	return append(append(load, comp...), fin)
}

// tile is a padded LOAD's shape: rows × cols elements of SRAM of which
// y × x are read from DRAM, the rest padding.
type tile struct {
	rows, cols uint64
	y, x       uint64
	py0, py1   uint64
	px0, px1   uint64
}

// shape returns the tile of rows × cols elements that reads the fewest.
func shape(rows, cols uint64) tile {
	t := tile{rows: rows, cols: cols, y: max(1, rows-min(rows, 2*maxPad)), x: max(1, cols-min(cols, 2*maxPad))}
	t.py0 = min(maxPad, rows-t.y)
	t.py1 = rows - t.y - t.py0
	t.px0 = min(maxPad, cols-t.x)
	t.px1 = cols - t.x - t.px0
	return t
}

// padTiles covers n elements from sram with padded LOADs of the cheapest
// shapes: one exact rows × cols tile, or a tile of whole 31-column rows
// and the rest; each reads at most scrubZeroBytes. With the default
// configuration a whole inp or acc bank takes one LOAD reading 68
// elements (32 rows of 64: 2 × 34 read, the rest padding).
func padTiles(sram, n, esz uint64, c *alidnn.Config) []isa.Insn {
	cost := func(ts []tile) uint64 {
		var s uint64
		for _, t := range ts {
			s += uint64(c.DDRLatency) + (t.y*t.x*esz+uint64(c.DDRBytesPerCycle)-1)/uint64(c.DDRBytesPerCycle)
		}
		return s
	}
	fits := func(t tile) bool {
		return t.y*t.x*esz <= scrubZeroBytes && t.y < 1<<16 && t.x < 1<<16
	}
	var best []tile
	for rows := uint64(1); rows*rows <= n; rows++ {
		if n%rows != 0 {
			continue
		}
		for _, t := range []tile{shape(rows, n/rows), shape(n/rows, rows)} {
			if fits(t) && (best == nil || cost([]tile{t}) < cost(best)) {
				best = []tile{t}
			}
		}
	}
	const w = 2*maxPad + 1
	if m := n / w * w; m > 0 && m < n {
		if t := shape(m/w, w); fits(t) {
			rest := padTiles(0, n-m, esz, c)
			if split := append([]tile{t}, tilesOf(rest)...); best == nil || cost(split) < cost(best) {
				best = split
			}
		}
	}
	if best == nil { // too large for one read of the zeros: halve
		h := n / 2
		return append(padTiles(sram, h, esz, c), padTiles(sram+h, n-h, esz, c)...)
	}
	out := make([]isa.Insn, 0, len(best))
	for _, t := range best {
		out = append(out, isa.Insn{
			SRAM: uint32(sram), YSize: uint32(t.y), XSize: uint32(t.x), XStride: uint32(t.x),
			PadY0: uint8(t.py0), PadY1: uint8(t.py1), PadX0: uint8(t.px0), PadX1: uint8(t.px1),
		})
		sram += t.rows * t.cols
	}
	return out
}

// tilesOf turns padded LOADs back into their shapes.
func tilesOf(ins []isa.Insn) []tile {
	out := make([]tile, len(ins))
	for k, in := range ins {
		out[k] = tile{
			rows: uint64(in.PadY0) + uint64(in.YSize) + uint64(in.PadY1),
			cols: uint64(in.PadX0) + uint64(in.XSize) + uint64(in.PadX1),
			y:    uint64(in.YSize), x: uint64(in.XSize),
			py0: uint64(in.PadY0), py1: uint64(in.PadY1), px0: uint64(in.PadX0), px1: uint64(in.PadX1),
		}
	}
	return out
}

// scrub clears what e.dirty says the SRAMs may hold of another session
// before a job of s runs: it writes the scrub program into s's agent area
// and runs it through s's window, so it reads only s's own zeros. It
// returns the run's stats and its wall time. Called by Run only.
func (e *Engine) scrub(ctx context.Context, s *Session) (alidnn.Stats, time.Duration, error) {
	start := time.Now()
	insns := scrubPlan(&e.dirty, s.agent+scrubProgBytes, &e.sram)
	code, err := isa.EncodeProgram(insns)
	if err != nil { // the plan is ours: a bug, not the tenant's doing
		return alidnn.Stats{}, 0, fmt.Errorf("sessions: encoding the scrub: %w", err)
	}
	if len(code) > scrubProgBytes {
		return alidnn.Stats{}, 0, fmt.Errorf("sessions: a %d-instruction scrub does not fit the %d-byte agent area", len(insns), scrubProgBytes)
	}
	if err := e.write(ctx, s.agent, code); err != nil {
		return alidnn.Stats{}, time.Since(start), fmt.Errorf("sessions: writing the scrub program: %w", err)
	}
	st, err := alidnn.Exec(ctx, e.chip, alidnn.Run{Insns: s.agent, Count: len(insns), Window: s.window})
	if err != nil {
		return st, time.Since(start), fmt.Errorf("sessions: running the scrub: %w", err)
	}
	return st, time.Since(start), nil
}
