package model

import (
	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// The GEMM fast paths. The functional model must keep up with real
// workloads, so the inner kernels work on fixed-size array pointers (one
// bounds check per block, not per lane) and the int8 kernel multiplies two
// products at once (SWAR): a weight pair w0 + w1·2³² times an input x is
// x·w0 + x·w1·2³², and with |x·w| ≤ 2¹⁴ a sum of 16 such products never
// reaches 2³¹ in either half, so both dot products come out exactly.

// pairWeights refreshes the shadow of int8 wgt element s.
func (e *engine) pairWeights(s uint64) {
	w := (*[wgtSize]int8)(e.wgt[s*wgtSize:][:wgtSize])
	p := (*[lanes * pairs]int64)(e.wgtPair[s*lanes*pairs:][:lanes*pairs])
	for k := range lanes {
		for q := range pairs {
			p[k*pairs+q] = int64(w[2*q*lanes+k]) + int64(w[(2*q+1)*lanes+k])<<32
		}
	}
}

// dotInt8 adds x · wᵀ to a, with w in the pair layout of wgtPair.
func dotInt8(a *[lanes]int32, x *[lanes]int8, w *[lanes * pairs]int64) {
	var s0, s1, s2, s3, s4, s5, s6, s7 int64
	for k := range lanes {
		xk := int64(x[k])
		wk := (*[pairs]int64)(w[k*pairs:])
		s0 += xk * wk[0]
		s1 += xk * wk[1]
		s2 += xk * wk[2]
		s3 += xk * wk[3]
		s4 += xk * wk[4]
		s5 += xk * wk[5]
		s6 += xk * wk[6]
		s7 += xk * wk[7]
	}
	split := func(s int64) (lo, hi int32) {
		lo = int32(s)
		return lo, int32((s - int64(lo)) >> 32)
	}
	var lo, hi int32
	lo, hi = split(s0)
	a[0] += lo
	a[1] += hi
	lo, hi = split(s1)
	a[2] += lo
	a[3] += hi
	lo, hi = split(s2)
	a[4] += lo
	a[5] += hi
	lo, hi = split(s3)
	a[6] += lo
	a[7] += hi
	lo, hi = split(s4)
	a[8] += lo
	a[9] += hi
	lo, hi = split(s5)
	a[10] += lo
	a[11] += hi
	lo, hi = split(s6)
	a[12] += lo
	a[13] += hi
	lo, hi = split(s7)
	a[14] += lo
	a[15] += hi
}

// dotFP32 adds x · wᵀ to the fp32 lanes of a (bit patterns). Each lane's
// products are rounded to fp32 and summed in index order k = 0..15 starting
// from the first product, then added to the accumulator: the explicit
// float32 conversions keep the compiler from fusing multiply and add, so the
// result is the same on every host.
func dotFP32(a *[lanes]int32, x *[lanes]float32, w *[wgtSize]float32) {
	for o := range lanes {
		r := (*[lanes]float32)(w[o*lanes:])
		s := float32(x[0] * r[0])
		s += float32(x[1] * r[1])
		s += float32(x[2] * r[2])
		s += float32(x[3] * r[3])
		s += float32(x[4] * r[4])
		s += float32(x[5] * r[5])
		s += float32(x[6] * r[6])
		s += float32(x[7] * r[7])
		s += float32(x[8] * r[8])
		s += float32(x[9] * r[9])
		s += float32(x[10] * r[10])
		s += float32(x[11] * r[11])
		s += float32(x[12] * r[12])
		s += float32(x[13] * r[13])
		s += float32(x[14] * r[14])
		s += float32(x[15] * r[15])
		a[o] = f32bits(f32(a[o]) + s)
	}
}

// gemm runs a GEMM instruction. Every index the loop nest can produce is
// checked before the first write.
func (e *engine) gemm(in *isa.Insn) *fault {
	if f := e.uopRange(in); f != nil {
		return f
	}
	uops := make([]isa.GemmUop, 0, in.UopEnd-in.UopBegin)
	var ma, mx, mw uint32
	for _, w := range e.uop[in.UopBegin:in.UopEnd] {
		u := isa.DecodeGemmUop(w)
		uops = append(uops, u)
		ma, mx, mw = max(ma, u.Acc), max(mx, u.Inp), max(mw, u.Wgt)
	}
	for _, c := range []struct {
		space string
		max   uint64
		size  int
	}{
		{"acc", loopMax(ma, in, in.DstOut, in.DstIn), e.cfg.AccSize},
		{"inp", loopMax(mx, in, in.SrcOut, in.SrcIn), e.cfg.InpSize},
		{"wgt", loopMax(mw, in, in.WgtOut, in.WgtIn), e.cfg.WgtSize},
	} {
		if in.Reset && c.space != "acc" {
			continue // a reset reads neither inp nor wgt
		}
		if c.max >= uint64(c.size) {
			return faultf(alidnn.CauseSRAM, "GEMM %s index %d: %s holds %d", c.space, c.max, c.space, c.size)
		}
	}
	for i0 := range in.IterOut {
		for i1 := range in.IterIn {
			if e.stop.Load() {
				return errStopped
			}
			da := i0*in.DstOut + i1*in.DstIn
			dx := i0*in.SrcOut + i1*in.SrcIn
			dw := i0*in.WgtOut + i1*in.WgtIn
			switch {
			case in.Reset:
				for _, u := range uops {
					a := (u.Acc + da) * lanes
					clear(e.acc[a : a+lanes])
				}
			case in.FP32:
				for _, u := range uops {
					a, x, w := (u.Acc+da)*lanes, (u.Inp+dx)*lanes, (u.Wgt+dw)*wgtSize
					dotFP32((*[lanes]int32)(e.acc[a:a+lanes]), (*[lanes]float32)(e.inpF[x:x+lanes]), (*[wgtSize]float32)(e.wgtF[w:w+wgtSize]))
				}
			default:
				for _, u := range uops {
					a, x, w := (u.Acc+da)*lanes, (u.Inp+dx)*lanes, (u.Wgt+dw)*lanes*pairs
					dotInt8((*[lanes]int32)(e.acc[a:a+lanes]), (*[lanes]int8)(e.inp[x:x+lanes]), (*[lanes * pairs]int64)(e.wgtPair[w:w+lanes*pairs]))
				}
			}
		}
	}
	return nil
}
