package model

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/shell/sim"
)

// ddrFault turns a failed DDR access into the cause the engine reports.
func ddrFault(err error) *fault {
	if errors.Is(err, sim.ErrWindow) {
		return &fault{cause: alidnn.CauseWindow, msg: err.Error()}
	}
	return &fault{cause: alidnn.CauseDecoupled, msg: err.Error()}
}

// elemBytes is the DRAM size of one element of a LOAD or STORE.
func elemBytes(mem isa.MemSpace, dt isa.DType, store bool) uint64 {
	switch mem {
	case isa.MemUop:
		return 4
	case isa.MemInp:
		if dt == isa.FP32 {
			return 4 * lanes
		}
		return lanes
	case isa.MemWgt:
		if dt == isa.FP32 {
			return 4 * wgtSize
		}
		return wgtSize
	case isa.MemAcc:
		if store && dt == isa.Int8 {
			return lanes
		}
		return 4 * lanes
	default: // param: 64-bit lanes whatever the data type
		return 8 * lanes
	}
}

// spaceSize is the number of elements of an SRAM.
func (e *engine) spaceSize(mem isa.MemSpace) uint64 {
	switch mem {
	case isa.MemUop:
		return uint64(e.cfg.UopSize)
	case isa.MemInp:
		return uint64(e.cfg.InpSize)
	case isa.MemWgt:
		return uint64(e.cfg.WgtSize)
	case isa.MemAcc:
		return uint64(e.cfg.AccSize)
	default:
		return uint64(e.cfg.ParamSize)
	}
}

// tileBytes is the DRAM size of the y_size × x_size elements a LOAD or
// STORE moves.
func tileBytes(in *isa.Insn, esz uint64) uint64 {
	return uint64(in.YSize) * uint64(in.XSize) * esz
}

// load runs a LOAD and returns the DRAM bytes it read. Every check that can
// fail before DDR is read runs first, so an SRAM fault leaves SRAM alone.
func (e *engine) load(in *isa.Insn, d ddrPort, win int) (uint64, *fault) {
	esz := elemBytes(in.Mem, in.DType, false)
	rows := uint64(in.PadY0) + uint64(in.YSize) + uint64(in.PadY1)
	cols := uint64(in.PadX0) + uint64(in.XSize) + uint64(in.PadX1)
	if size := e.spaceSize(in.Mem); uint64(in.SRAM)+rows*cols > size {
		return 0, faultf(alidnn.CauseSRAM, "load of %d×%d %s elements at %d: %s holds %d", rows, cols, in.Mem, in.SRAM, in.Mem, size)
	}
	n := tileBytes(in, esz)
	buf := make([]byte, n)
	if err := readRows(d, win, in, esz, buf); err != nil {
		return 0, ddrFault(err)
	}
	var pad func(s uint64)
	switch {
	case in.Mem == isa.MemInp && in.DType == isa.FP32:
		v := float32(0)
		if in.PadMin {
			v = float32(math.Inf(-1))
		}
		pad = func(s uint64) { fill(e.inpF[s*lanes:(s+1)*lanes], v) }
	case in.Mem == isa.MemInp:
		v := int8(0)
		if in.PadMin {
			v = math.MinInt8
		}
		pad = func(s uint64) { fill(e.inp[s*lanes:(s+1)*lanes], v) }
	case in.Mem == isa.MemAcc:
		v := int32(0)
		if in.PadMin && in.DType == isa.FP32 {
			v = int32(math.Float32bits(float32(math.Inf(-1))))
		} else if in.PadMin {
			v = math.MinInt32
		}
		pad = func(s uint64) { fill(e.acc[s*lanes:(s+1)*lanes], v) }
	}
	for y := range rows {
		for x := range cols {
			s := uint64(in.SRAM) + y*cols + x
			if y < uint64(in.PadY0) || y >= uint64(in.PadY0)+uint64(in.YSize) ||
				x < uint64(in.PadX0) || x >= uint64(in.PadX0)+uint64(in.XSize) {
				pad(s) // the decoder allows padding only for inp and acc
				continue
			}
			off := ((y-uint64(in.PadY0))*uint64(in.XSize) + x - uint64(in.PadX0)) * esz
			e.putElem(in, s, buf[off:off+esz])
		}
	}
	return n, nil
}

func fill[T any](s []T, v T) {
	for i := range s {
		s[i] = v
	}
}

// putElem writes one loaded element b into SRAM element s.
func (e *engine) putElem(in *isa.Insn, s uint64, b []byte) {
	le := binary.LittleEndian
	switch in.Mem {
	case isa.MemUop:
		e.uop[s] = le.Uint32(b)
	case isa.MemInp:
		if in.DType == isa.FP32 {
			dst := e.inpF[s*lanes : (s+1)*lanes]
			for l := range dst {
				dst[l] = math.Float32frombits(le.Uint32(b[4*l:]))
			}
			return
		}
		dst := e.inp[s*lanes : (s+1)*lanes]
		for l := range dst {
			dst[l] = int8(b[l])
		}
	case isa.MemWgt:
		if in.DType == isa.FP32 {
			dst := e.wgtF[s*wgtSize : (s+1)*wgtSize]
			for l := range dst {
				dst[l] = math.Float32frombits(le.Uint32(b[4*l:]))
			}
			return
		}
		dst := e.wgt[s*wgtSize : (s+1)*wgtSize]
		for l := range dst {
			dst[l] = int8(b[l])
		}
		e.pairWeights(s)
	case isa.MemAcc:
		dst := e.acc[s*lanes : (s+1)*lanes]
		for l := range dst {
			dst[l] = int32(le.Uint32(b[4*l:]))
		}
	case isa.MemParam:
		dst := e.prm[s*lanes : (s+1)*lanes]
		for l := range dst {
			dst[l] = le.Uint64(b[8*l:])
		}
	}
}

// readRows reads the rows of a LOAD into buf, in one access when they are
// contiguous.
func readRows(d ddrPort, win int, in *isa.Insn, esz uint64, buf []byte) error {
	row := uint64(in.XSize) * esz
	if in.XStride == in.XSize {
		return d.ReadAt(win, buf, in.DRAM)
	}
	for y := range uint64(in.YSize) {
		if err := d.ReadAt(win, buf[y*row:(y+1)*row], in.DRAM+y*uint64(in.XStride)*esz); err != nil {
			return err
		}
	}
	return nil
}

// store runs a STORE and returns the DRAM bytes it wrote. Rows are written
// in order, each wholly or not at all: the shell refuses an access that
// leaves the window before moving a byte.
func (e *engine) store(in *isa.Insn, d ddrPort, win int) (uint64, *fault) {
	esz := elemBytes(in.Mem, in.DType, true)
	n := uint64(in.YSize) * uint64(in.XSize)
	if uint64(in.SRAM)+n > uint64(e.cfg.AccSize) {
		return 0, faultf(alidnn.CauseSRAM, "store of %d acc elements at %d: acc holds %d", n, in.SRAM, e.cfg.AccSize)
	}
	buf := make([]byte, n*esz)
	src := e.acc[uint64(in.SRAM)*lanes : (uint64(in.SRAM)+n)*lanes]
	if in.DType == isa.Int8 {
		for i, v := range src {
			buf[i] = byte(sat8(int64(v)))
		}
	} else { // int32 and fp32 copy the bits
		for i, v := range src {
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(v))
		}
	}
	row := uint64(in.XSize) * esz
	if in.XStride == in.XSize {
		if err := d.WriteAt(win, buf, in.DRAM); err != nil {
			return 0, ddrFault(err)
		}
		return uint64(len(buf)), nil
	}
	for y := range uint64(in.YSize) {
		if err := d.WriteAt(win, buf[y*row:(y+1)*row], in.DRAM+y*uint64(in.XStride)*esz); err != nil {
			return 0, ddrFault(err)
		}
	}
	return uint64(len(buf)), nil
}

func sat8(v int64) int8 {
	return int8(max(math.MinInt8, min(math.MaxInt8, v)))
}

// loopMax is the largest index a GEMM/ALU loop nest produces for a micro-op
// field whose largest value is base: every factor is non-negative.
func loopMax(base uint32, in *isa.Insn, out, inner uint32) uint64 {
	return uint64(base) + uint64(in.IterOut-1)*uint64(out) + uint64(in.IterIn-1)*uint64(inner)
}

// uopRange checks a GEMM/ALU micro-op range against the uop SRAM.
func (e *engine) uopRange(in *isa.Insn) *fault {
	if uint64(in.UopEnd) > uint64(e.cfg.UopSize) {
		return faultf(alidnn.CauseSRAM, "micro-ops %d:%d: uop holds %d", in.UopBegin, in.UopEnd, e.cfg.UopSize)
	}
	return nil
}

// alu runs an ALU instruction.
func (e *engine) alu(in *isa.Insn) *fault {
	if f := e.uopRange(in); f != nil {
		return f
	}
	uops := make([]isa.AluUop, 0, in.UopEnd-in.UopBegin)
	var maxDst, maxSrc uint32
	for _, w := range e.uop[in.UopBegin:in.UopEnd] {
		u, err := isa.DecodeAluUop(w)
		if err != nil {
			return faultf(alidnn.CauseIllegal, "%v", err)
		}
		uops = append(uops, u)
		maxDst, maxSrc = max(maxDst, u.Dst), max(maxSrc, u.Src)
	}
	if m := loopMax(maxDst, in, in.DstOut, in.DstIn); m >= uint64(e.cfg.AccSize) {
		return faultf(alidnn.CauseSRAM, "ALU destination index %d: acc holds %d", m, e.cfg.AccSize)
	}
	quant := in.Alu == isa.AluRequant || in.Alu == isa.AluQuantize || in.Alu == isa.AluDequantize
	if !in.UseImm && !in.Alu.Unary() {
		size, space, span := uint64(e.cfg.AccSize), "acc", uint64(0)
		if in.Alu.Param() {
			size, space = uint64(e.cfg.ParamSize), "param"
		}
		if in.Alu == isa.AluLut {
			span = isa.LutRows - 1
		}
		if m := loopMax(maxSrc, in, in.SrcOut, in.SrcIn) + span; m >= size {
			return faultf(alidnn.CauseSRAM, "ALU source index %d: %s holds %d", m, space, size)
		}
	}
	var imm [lanes]int32
	if in.UseImm {
		v := in.Imm
		if in.FP32 { // bfloat16: the upper half of an fp32
			v = int32(math.Float32bits(math.Float32frombits(uint32(uint16(in.Imm)) << 16)))
		}
		fill(imm[:], v)
	}
	for i0 := range in.IterOut {
		for i1 := range in.IterIn {
			if e.stop.Load() {
				return errStopped
			}
			for _, u := range uops {
				d := (u.Dst + i0*in.DstOut + i1*in.DstIn) * lanes
				s := (u.Src + i0*in.SrcOut + i1*in.SrcIn) * lanes
				dst := (*[lanes]int32)(e.acc[d : d+lanes])
				if quant {
					if f := e.quant(in, dst, (*[lanes]uint64)(e.prm[s:s+lanes])); f != nil {
						return f
					}
					continue
				}
				if in.Alu == isa.AluLut {
					lut(dst, e.prm[s:s+isa.LutRows*lanes])
					continue
				}
				src := imm // a copy: dst may be src
				if !in.UseImm && !in.Alu.Unary() {
					src = *(*[lanes]int32)(e.acc[s : s+lanes])
				}
				if in.FP32 {
					aluFP32(in.Alu, dst, &src)
				} else {
					aluInt(in.Alu, dst, &src, in.Imm)
				}
			}
		}
	}
	return nil
}

// lut replaces each lane of d by the entry sat8(d) + 128 of the lane's
// table in rows (isa.LutRows param rows, eight int8 entries to a lane's 64
// bits, little-endian).
func lut(d *[lanes]int32, rows []uint64) {
	for l := range d {
		e := uint(max(-128, min(127, d[l])) + 128)
		d[l] = int32(int8(rows[(e/8)*lanes+uint(l)] >> (8 * (e % 8))))
	}
}

// aluInt applies an integer ALU operation to one accumulator element.
func aluInt(op isa.AluOp, d, s *[lanes]int32, imm int32) {
	for l := range d {
		a, b := d[l], s[l]
		switch op {
		case isa.AluAdd:
			a += b
		case isa.AluMul:
			a *= b
		case isa.AluMin:
			a = min(a, b)
		case isa.AluMax:
			a = max(a, b)
		case isa.AluShr:
			// The rounding add is done in 64 bits, so it cannot overflow.
			if n := max(0, min(31, b)); n > 0 {
				a = int32((int64(a) + 1<<(n-1)) >> n)
			}
		case isa.AluClip:
			a = max(-imm, min(imm, a))
		case isa.AluRelu:
			a = max(a, 0)
		}
		d[l] = a
	}
}

// aluFP32 applies an fp32 ALU operation to one accumulator element.
func aluFP32(op isa.AluOp, d, s *[lanes]int32) {
	for l := range d {
		a, b := math.Float32frombits(uint32(d[l])), math.Float32frombits(uint32(s[l]))
		switch op {
		case isa.AluAdd:
			a = a + b
		case isa.AluMul:
			a = a * b
		case isa.AluMin:
			a = fmin(a, b)
		case isa.AluMax:
			a = fmax(a, b)
		case isa.AluRelu:
			a = fmax(a, 0)
		case isa.AluExp:
			// ISA.md defines both as Go's float64 function rounded once to fp32.
			a = float32(math.Exp(float64(a)))
		case isa.AluLog:
			a = float32(math.Log(float64(a)))
		case isa.AluDiv:
			a = a / b
		case isa.AluLt:
			a = mask(a < b)
		case isa.AluEq:
			a = mask(a == b)
		case isa.AluRound:
			// RoundToEven keeps ±0, ±Inf and NaN, and float64 holds every
			// fp32 exactly, so the rounding is that of fp32.
			a = float32(math.RoundToEven(float64(a)))
		}
		d[l] = int32(math.Float32bits(a))
	}
}

// mask is an fp32 comparison's result: 1.0 for true, +0.0 for false (Go's <
// and == are IEEE's, false for NaN and with -0 == +0).
func mask(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

// fmax and fmin return the other operand when one is NaN, and a (the
// destination) when the two compare equal (so max(-0, +0) is -0).
func fmax(a, b float32) float32 {
	if a != a || b > a {
		return b
	}
	return a
}

func fmin(a, b float32) float32 {
	if a != a || b < a {
		return b
	}
	return a
}

// quant applies requant, quantize or dequantize to one accumulator element
// with the parameter row p.
func (e *engine) quant(in *isa.Insn, d *[lanes]int32, p *[lanes]uint64) *fault {
	zp := int64(in.Imm)
	for l := range d {
		pl := p[0]
		if in.PerChannel {
			pl = p[l]
		}
		switch in.Alu {
		case isa.AluRequant:
			m, s := int64(int32(uint32(pl))), int64(int8(pl>>32))
			if sh := 31 + s; sh < 1 || sh > 62 {
				return faultf(alidnn.CauseIllegal, "requant shift 31%+d outside 1..62", s)
			}
			d[l] = int32(sat8((int64(d[l])*m+1<<(30+s))>>(31+s) + zp))
		case isa.AluQuantize:
			q := float64(math.Float32frombits(uint32(d[l])) / math.Float32frombits(uint32(pl)))
			d[l] = int32(quantize(q, zp))
		case isa.AluDequantize:
			v := float32(int64(d[l])-zp) * math.Float32frombits(uint32(pl))
			d[l] = int32(math.Float32bits(v))
		}
	}
	return nil
}

// quantize rounds q half to even, adds the zero point and saturates; NaN
// quantises to the zero point.
func quantize(q float64, zp int64) int8 {
	if q != q {
		return sat8(zp)
	}
	r := math.RoundToEven(q) + float64(zp)
	return int8(max(math.MinInt8, min(math.MaxInt8, r)))
}

// pool runs a POOL instruction.
func (e *engine) pool(in *isa.Insn) *fault {
	ch := uint64(in.Channels)
	inH, inW := uint64(in.InH), uint64(in.InW)
	outH := (inH-uint64(in.WinH))/uint64(in.StrideH) + 1
	outW := (inW-uint64(in.WinW))/uint64(in.StrideW) + 1
	src, dst := uint64(in.PoolSrc), uint64(in.PoolDst)
	srcEnd, dstEnd := src+inH*inW*ch, dst+outH*outW*ch
	if size := uint64(e.cfg.AccSize); srcEnd > size || dstEnd > size {
		return faultf(alidnn.CauseSRAM, "pool tiles [%d,%d) -> [%d,%d): acc holds %d", src, srcEnd, dst, dstEnd, size)
	}
	if src < dstEnd && dst < srcEnd {
		return faultf(alidnn.CauseIllegal, "pool input [%d,%d) overlaps output [%d,%d)", src, srcEnd, dst, dstEnd)
	}
	n := int64(in.WinH) * int64(in.WinW)
	for oy := range outH {
		for ox := range outW {
			for c := range ch {
				out := (*[lanes]int32)(e.acc[(dst+(oy*outW+ox)*ch+c)*lanes:][:lanes])
				var sum [lanes]int64
				var fsum, fmx [lanes]float32
				first := true
				for wy := range uint64(in.WinH) {
					for wx := range uint64(in.WinW) {
						y, x := oy*uint64(in.StrideH)+wy, ox*uint64(in.StrideW)+wx
						v := (*[lanes]int32)(e.acc[(src+(y*inW+x)*ch+c)*lanes:][:lanes])
						for l, a := range v {
							f := math.Float32frombits(uint32(a))
							switch {
							case first:
								sum[l], fsum[l], fmx[l] = int64(a), f, f
							default:
								sum[l] += int64(a)
								fsum[l] += f
								fmx[l] = fmax(fmx[l], f)
							}
							if !in.FP32 && !first {
								out[l] = max(out[l], a)
							} else if !in.FP32 {
								out[l] = a
							}
						}
						first = false
					}
				}
				for l := range out {
					switch {
					case in.FP32 && in.Pool == isa.PoolMax:
						out[l] = int32(math.Float32bits(fmx[l]))
					case in.FP32:
						out[l] = int32(math.Float32bits(fsum[l] / float32(n)))
					case in.Pool == isa.PoolAvg:
						out[l] = int32(divRound(sum[l], n))
					}
				}
			}
		}
	}
	return nil
}

// divRound divides rounding half away from zero; n > 0.
func divRound(s, n int64) int64 {
	if s < 0 {
		return -((-2*s + n) / (2 * n))
	}
	return (2*s + n) / (2 * n)
}

func f32(v int32) float32     { return math.Float32frombits(uint32(v)) }
func f32bits(f float32) int32 { return int32(math.Float32bits(f)) }
