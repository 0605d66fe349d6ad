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
	ch := uint64(in.Channels)
	inH, inW := uint64(in.InH), uint64(in.InW)
	oh32, ow32 := in.PoolOut()
	outH, outW := uint64(oh32), uint64(ow32)
	src, dst := uint64(in.PoolSrc), uint64(in.PoolDst)
	taps := uint64(in.WinH) * uint64(in.WinW)
	bias := uint64(0)
	if in.DwBias {
		bias = 1
	}
	pre := bias // rows before the taps
	if in.DwClamp {
		pre += 2
	}
	if in.DwInClamp {
		pre += 2
	}
	rows := pre + taps
	wgt := uint64(in.DwWgt)
	if srcEnd := src + inH*inW*ch; srcEnd > uint64(e.cfg.InpSize) {
		return 0, faultf(alidnn.CauseSRAM, "depthwise input [%d,%d): inp holds %d", src, srcEnd, e.cfg.InpSize)
	}
	if dstEnd := dst + outH*outW*ch; dstEnd > uint64(e.cfg.AccSize) {
		return 0, faultf(alidnn.CauseSRAM, "depthwise output [%d,%d): acc holds %d", dst, dstEnd, e.cfg.AccSize)
	}
	if wEnd := wgt + ch*rows; wEnd > uint64(e.cfg.ParamSize) {
		return 0, faultf(alidnn.CauseSRAM, "depthwise weights [%d,%d): param holds %d", wgt, wEnd, e.cfg.ParamSize)
	}
	if !in.FP32 {
		if f := e.dwCheckInt8(wgt, ch, rows, pre); f != nil {
			return 0, f
		}
	}
	dy, dx := uint64(in.GapH)+1, uint64(in.GapW)+1
	acc := in.Pool == isa.PoolDepthwiseAcc
	for oy := range outH {
		for ox := range outW {
			for c := range ch {
				if e.stop.Load() {
					return 0, errStopped
				}
				p := (wgt + c*rows) * lanes
				out := (*[lanes]int32)(e.acc[(dst+(oy*outW+ox)*ch+c)*lanes:][:lanes])
				var s [lanes]int32
				var sf [lanes]float32
				started := acc || in.DwBias
				for l := range lanes {
					var v int32
					if acc {
						v = out[l]
					}
					if in.DwBias {
						b := int32(uint32(e.prm[p+uint64(l)]))
						if acc {
							v = dwAdd(in.FP32, v, b)
						} else {
							v = b
						}
					}
					s[l], sf[l] = v, f32(v)
				}
				var ilo, ihi []uint64
				if in.DwInClamp {
					ilo, ihi = e.prm[p+(pre-2)*lanes:][:lanes], e.prm[p+(pre-1)*lanes:][:lanes]
				}
				for wy := range uint64(in.WinH) {
					for wx := range uint64(in.WinW) {
						px := src + ((oy*uint64(in.StrideH)+wy*dy)*inW+ox*uint64(in.StrideW)+wx*dx)*ch + c
						w := e.prm[p+(pre+wy*uint64(in.WinW)+wx)*lanes:][:lanes]
						if in.FP32 {
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
						} else {
							x := e.inp[px*lanes:][:lanes]
							for l := range lanes {
								v := int32(x[l])
								if ilo != nil {
									v = min(max(v, int32(uint32(ilo[l]))), int32(uint32(ihi[l])))
								}
								s[l] += v * int32(uint32(w[l]))
							}
						}
						started = true
					}
				}
				var lo, hi []uint64
				if in.DwClamp {
					lo, hi = e.prm[p+bias*lanes:][:lanes], e.prm[p+(bias+1)*lanes:][:lanes]
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
		}
	}
	return outH * outW * ch * taps * lanes, nil
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
