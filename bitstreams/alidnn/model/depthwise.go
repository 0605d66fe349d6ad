package model

import (
	"math"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// dwTaps is the window the depthwise unit multiplies in one pass (see
// ISA.md, "Depthwise convolution": 9 multipliers per lane).
const dwTaps = 9

// depthwise runs a POOL of a depthwise kind: per lane, the window of inp
// times the block's weight rows in param, in the order ISA.md fixes. It
// returns the useful multiply-accumulates it did.
func (e *engine) depthwise(in *isa.Insn) (uint64, *fault) {
	g, f := e.dwGeometry(in)
	if f != nil {
		return 0, f
	}
	for oy := range g.outH {
		for ox := range g.outW {
			for c := range g.ch {
				if e.stop.Load() {
					return 0, errStopped
				}
				e.dwVector(in, &g, oy, ox, c)
			}
		}
	}
	return g.outH * g.outW * g.ch * g.taps * lanes, nil
}

// dwGeom is where a depthwise instruction reads and writes: its tiles,
// and per channel block rows param rows (pre of them, the bias and the
// clamps' bounds, before the taps' weights).
type dwGeom struct {
	ch, inW, outH, outW   uint64
	src, dst, wgt         uint64
	taps, bias, pre, rows uint64
	dy, dx                uint64 // tap distances: gap + 1
	acc                   bool   // dwacc: add to what acc holds
}

// dwGeometry works out in's geometry and checks that its tiles lie in
// their SRAMs and, in int8, that its weights are int8.
func (e *engine) dwGeometry(in *isa.Insn) (dwGeom, *fault) {
	oh, ow := in.PoolOut()
	g := dwGeom{ch: uint64(in.Channels), inW: uint64(in.InW), outH: uint64(oh), outW: uint64(ow),
		src: uint64(in.PoolSrc), dst: uint64(in.PoolDst), wgt: uint64(in.DwWgt),
		taps: uint64(in.WinH) * uint64(in.WinW), dy: uint64(in.GapH) + 1, dx: uint64(in.GapW) + 1,
		acc: in.Pool == isa.PoolDepthwiseAcc}
	if in.DwBias {
		g.bias = 1
	}
	g.pre = g.bias
	if in.DwClamp {
		g.pre += 2
	}
	if in.DwInClamp {
		g.pre += 2
	}
	g.rows = g.pre + g.taps
	if srcEnd := g.src + uint64(in.InH)*g.inW*g.ch; srcEnd > uint64(e.cfg.InpSize) {
		return g, faultf(alidnn.CauseSRAM, "depthwise input [%d,%d): inp holds %d", g.src, srcEnd, e.cfg.InpSize)
	}
	if dstEnd := g.dst + g.outH*g.outW*g.ch; dstEnd > uint64(e.cfg.AccSize) {
		return g, faultf(alidnn.CauseSRAM, "depthwise output [%d,%d): acc holds %d", g.dst, dstEnd, e.cfg.AccSize)
	}
	if wEnd := g.wgt + g.ch*g.rows; wEnd > uint64(e.cfg.ParamSize) {
		return g, faultf(alidnn.CauseSRAM, "depthwise weights [%d,%d): param holds %d", g.wgt, wEnd, e.cfg.ParamSize)
	}
	if !in.FP32 {
		if f := e.dwCheckInt8(g.wgt, g.ch, g.rows, g.pre); f != nil {
			return g, f
		}
	}
	return g, nil
}

// dwVector computes output pixel (oy, ox) of channel block c: the bias
// (or what acc holds, for dwacc), the taps in window order, the clamp.
func (e *engine) dwVector(in *isa.Insn, g *dwGeom, oy, ox, c uint64) {
	p := (g.wgt + c*g.rows) * lanes
	out := (*[lanes]int32)(e.acc[(g.dst+(oy*g.outW+ox)*g.ch+c)*lanes:][:lanes])
	var s [lanes]int32
	var sf [lanes]float32
	started := g.acc || in.DwBias
	for l := range lanes {
		var v int32
		if g.acc {
			v = out[l]
		}
		if in.DwBias {
			b := int32(uint32(e.prm[p+uint64(l)]))
			if g.acc {
				v = dwAdd(in.FP32, v, b)
			} else {
				v = b
			}
		}
		s[l], sf[l] = v, f32(v)
	}
	var ilo, ihi []uint64
	if in.DwInClamp {
		ilo, ihi = e.prm[p+(g.pre-2)*lanes:][:lanes], e.prm[p+(g.pre-1)*lanes:][:lanes]
	}
	for wy := range uint64(in.WinH) {
		for wx := range uint64(in.WinW) {
			px := g.src + ((oy*uint64(in.StrideH)+wy*g.dy)*g.inW+ox*uint64(in.StrideW)+wx*g.dx)*g.ch + c
			w := e.prm[p+(g.pre+wy*uint64(in.WinW)+wx)*lanes:][:lanes]
			if in.FP32 {
				e.dwTapF32(&sf, px, w, ilo, ihi, started)
			} else {
				e.dwTapInt8(&s, px, w, ilo, ihi)
			}
			started = true
		}
	}
	var lo, hi []uint64
	if in.DwClamp {
		lo, hi = e.prm[p+g.bias*lanes:][:lanes], e.prm[p+(g.bias+1)*lanes:][:lanes]
	}
	for l := range lanes {
		switch {
		case in.FP32 && lo != nil:
			out[l] = f32bits(fmin(fmax(sf[l], math.Float32frombits(uint32(lo[l]))), math.Float32frombits(uint32(hi[l]))))
		case in.FP32:
			out[l] = f32bits(sf[l])
		case lo != nil:
			out[l] = min(max(s[l], int32(uint32(lo[l]))), int32(uint32(hi[l])))
		default:
			out[l] = s[l]
		}
	}
}

// dwTapF32 adds one tap of inp's fp32 vector px times w to sf, the input
// clamped to [ilo, ihi] when they are given; the first product (started
// false) replaces sf.
func (e *engine) dwTapF32(sf *[lanes]float32, px uint64, w, ilo, ihi []uint64, started bool) {
	x := e.inpF[px*lanes:][:lanes]
	for l := range lanes {
		v := x[l]
		if ilo != nil {
			v = fmin(fmax(v, math.Float32frombits(uint32(ilo[l]))), math.Float32frombits(uint32(ihi[l])))
		}
		// The conversion keeps the product its own rounding (no FMA).
		prod := float32(v * math.Float32frombits(uint32(w[l])))
		if started {
			sf[l] += prod
		} else {
			sf[l] = prod
		}
	}
}

// dwTapInt8 adds one tap of inp's int8 vector px times w to s, exactly.
func (e *engine) dwTapInt8(s *[lanes]int32, px uint64, w, ilo, ihi []uint64) {
	x := e.inp[px*lanes:][:lanes]
	for l := range lanes {
		v := int32(x[l])
		if ilo != nil {
			v = min(max(v, int32(uint32(ilo[l]))), int32(uint32(ihi[l])))
		}
		s[l] += v * int32(uint32(w[l]))
	}
}

// dwAdd adds b to a as the unit's adder does: fp32 or wrapping int32.
func dwAdd(fp bool, a, b int32) int32 {
	if fp {
		return f32bits(f32(a) + f32(b))
	}
	return a + b
}

// dwCheckInt8 faults if an int8 depthwise weight (not a bias or bound,
// the first pre rows of a block) lies outside −128..127: the unit's
// multipliers are 8 bits wide.
func (e *engine) dwCheckInt8(wgt, ch, rows, pre uint64) *fault {
	for c := range ch {
		for t := pre; t < rows; t++ {
			r := wgt + c*rows + t
			for l, v := range e.prm[r*lanes:][:lanes] {
				if w := int32(uint32(v)); w < math.MinInt8 || w > math.MaxInt8 {
					return faultf(alidnn.CauseIllegal, "depthwise int8 weight %d at param row %d lane %d outside -128..127", w, r, l)
				}
			}
		}
	}
	return nil
}

// dwCycles is a depthwise POOL's modeled duration: a pass of up to dwTaps
// taps per output vector, at the fp32 rate with fp32 set.
func (e *engine) dwCycles(in *isa.Insn) uint64 {
	oh, ow := in.PoolOut()
	taps := uint64(in.WinH) * uint64(in.WinW)
	n := uint64(oh) * uint64(ow) * uint64(in.Channels) * ceilDiv(taps, dwTaps)
	if in.FP32 {
		n *= uint64(e.cfg.FP32Rate)
	}
	return n
}
