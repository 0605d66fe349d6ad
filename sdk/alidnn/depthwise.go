package alidnn

// Depthwise convolutions on the ALU, for fp32 layers the depthwise unit
// cannot take (dwunit.go: a kernel side or stride past 15, a dilation past
// 16, or an input row too wide for inp). A depthwise layer's output channel
// sees only its own input channel, so on the array each 16×16 weight tile
// is diagonal: a micro-op retires 16 useful multiply-accumulates of its 256,
// and in fp32 a tap costs 4 cycles per output pixel and block. The ALU
// works lane by lane at one cycle per 16-lane vector in fp32 as in int32,
// but has no multiply-add and multiplies in place. So an fp32 depthwise
// layer loads each input tile once into the accumulator (its padding from
// the LOAD) and folds the taps in Horner form, each tap a shifted add of
// the tile and a multiplication by a per-channel row:
//
//	y = ((…((x₀·r₀ + x₁)·r₁ + x₂)·r₂ …) + x₈)·w₈,  r_t = w_t / w_{t+1}
//
// which is Σ w_t·x_t with each weight rounded a few more times (a few fp32
// ulps of each term, as the summation's own rounding). That is 2 cycles a
// tap instead of 4, and no weights to load. Dividing by the weights needs
// them nonzero and within a range that keeps the partial sums finite;
// layers whose weights are not are left to the array.

import (
	"encoding/binary"
	"math"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// dwMaxRange is the widest ratio of a channel's largest to smallest
// weight magnitude the Horner form takes: the partial sums grow by at most
// that much over the terms they hold.
const dwMaxRange = 1 << 24

// dwPlan is how a depthwise layer runs on the ALU: tiles of th output rows
// of the whole width, an input tile of tr rows of wp padded pixels at acc
// row tin, accBufs output buffers of n rows, the ratio rows of the current
// block at rat (the ratios in the constant segment), and the epilogues.
type dwPlan struct {
	cv            *convSpec
	in, out       *value
	blocks        int
	th, tr, wp, n int
	accBufs       int
	tin, rat      int
	eps           []*epilogue
	u             *uopTable
	// [acc buffer]: the clear, and the first tap's add and multiply
	// micro-ops; tap k's are 2k further.
	clear, add, mul []uint32
	ratios          uint64
	storeEl         elem
	taps, tiles     int
	cur             int // the block whose ratios the rows at rat hold, −1 none
}

// dwRatios returns the Horner rows of cv's weights, taps rows of 16 lanes
// for each block, or nil when a channel's weights do not allow the form.
func dwRatios(cv *convSpec) []float32 {
	if !cv.fp || cv.batched || cv.wT != nil || cv.scatter != nil || cv.zx != 0 ||
		cv.groups != cv.ic || cv.oc != cv.ic || cv.kh*cv.kw < 2 {
		return nil
	}
	taps, blocks := cv.kh*cv.kw, (cv.oc+lanes-1)/lanes
	r := make([]float32, blocks*taps*lanes)
	for c := range cv.oc {
		w := cv.wF[c*taps : (c+1)*taps]
		lo, hi := math.Inf(1), 0.0
		for _, v := range w {
			a := math.Abs(float64(v))
			lo, hi = min(lo, a), max(hi, a)
		}
		if lo < 0x1p-60 || hi > 0x1p60 || math.IsInf(hi, 0) || math.IsNaN(hi) || hi > lo*dwMaxRange {
			return nil
		}
		b, l := c/lanes, c%lanes
		for t := range taps {
			v := float64(w[t])
			if t+1 < taps {
				v /= float64(w[t+1])
			}
			r[(b*taps+t)*lanes+l] = float32(v)
		}
	}
	return r
}

// planDepthwise plans l on the ALU, or returns nil when it cannot run
// there: its weights refuse the Horner form, or no tile fits the
// accumulator.
func (e *emitter) planDepthwise(l *layer) *dwPlan {
	cv := l.conv
	if l.in == nil || l.in.lay.cb() != (cv.ic+lanes-1)/lanes || l.in.lay.s() != cv.ih*cv.iw ||
		l.out.lay.cb() != (cv.oc+lanes-1)/lanes || l.out.lay.s() != cv.oh*cv.ow {
		return nil
	}
	rat := dwRatios(cv)
	if rat == nil {
		return nil
	}
	p := &dwPlan{cv: cv, in: l.in, out: l.out, blocks: (cv.oc + lanes - 1) / lanes, taps: cv.kh * cv.kw,
		wp: cv.inCols(cv.ow), storeEl: l.storeElem(), cur: -1}
	if _, err := spanOf(-cv.pl, p.wp, cv.iw); err != nil || cv.sh*p.wp > 2047 || cv.ow > 2047 {
		return nil
	}
	for _, ab := range []int{2, 1} {
		p.accBufs = ab
		for th := cv.oh; th >= 1; th-- {
			p.th, p.tr, p.n = th, cv.inRows(th), th*cv.ow
			p.tin = ab * p.n
			p.rat = p.tin + p.tr*p.wp
			if p.rat+p.taps > hw.AccSize || p.n > 4095 {
				continue
			}
			if ok, err := p.planEpilogues(e, l); err == nil && ok {
				p.ratios = e.blob(f32Bytes(rat))
				return p
			}
		}
	}
	return nil
}

// planEpilogues plans the epilogue of each output buffer and its micro-ops,
// and reports whether the accumulator holds them.
func (p *dwPlan) planEpilogues(e *emitter, l *layer) (bool, error) {
	cv := p.cv
	p.u = &uopTable{}
	p.eps = p.eps[:0]
	p.clear, p.add, p.mul = nil, nil, nil
	free := p.rat + p.taps
	var ep *epilogue
	for ab := range p.accBufs {
		base := ab * p.n
		p.clear = append(p.clear, p.u.addALU(base, 0))
		for y := range cv.kh {
			for x := range cv.kw {
				t := y*cv.kw + x
				a := p.u.addALU(base, p.tin+y*cv.dh*p.wp+x*cv.dw)
				m := p.u.addALU(base, p.rat+t)
				if t == 0 {
					p.add, p.mul = append(p.add, a), append(p.mul, m)
				}
			}
		}
		var err error
		if ep, err = e.plan(l, p.u, base, p.n, free); err != nil {
			return false, err
		}
		p.eps = append(p.eps, ep)
	}
	return free+ep.rows+ep.tiles*p.n <= hw.AccSize, nil
}

// depthwise emits l on the ALU if planDepthwise can plan it, and reports
// whether it did.
func (e *emitter) depthwise(l *layer) (bool, error) {
	p := e.planDepthwise(l)
	if p == nil {
		return false, nil
	}
	if err := e.loadUops(p.u); err != nil {
		return true, err
	}
	e.buffers(1, p.accBufs)
	return true, dwTiles(p.cv, p.out.lay.o(), p.blocks, p.th, func(o, ob, r0, t int, ys span) {
		e.dwTile(p, o, ob, r0, t, ys)
	})
}

// dwTiles calls tile for each tile of th output rows (t in the last) from
// r0 of image o and channel block ob of a depthwise layer cv, with the
// input rows ys it reads, in the order both depthwise paths emit them.
func dwTiles(cv *convSpec, images, blocks, th int, tile func(o, ob, r0, t int, ys span)) error {
	for o := range images {
		for ob := range blocks {
			for r0 := 0; r0 < cv.oh; r0 += th {
				t := min(th, cv.oh-r0)
				ys, err := spanOf(r0*cv.sh-cv.pt, cv.inRows(t), cv.ih)
				if err != nil {
					return err
				}
				tile(o, ob, r0, t, ys)
			}
		}
	}
	return nil
}

// dwTile emits the tile of t output rows from r0 of image o and block ob,
// whose input rows are ys.
func (e *emitter) dwTile(p *dwPlan, o, ob, r0, t int, ys span) {
	cv := p.cv
	ab := p.tiles % p.accBufs
	p.tiles++
	e.beginTile()
	if p.cur != ob {
		e.compute(load(isa.MemAcc, f32, p.rat, p.ratios+uint64(ob*p.taps*lanes*4), 1, p.taps, p.taps), false)
		p.cur = ob
	}
	xs, _ := spanOf(-cv.pl, p.wp, cv.iw)
	ld := load(isa.MemAcc, f32, p.tin, p.in.addr+uint64(((o*p.blocks+ob)*cv.ih*cv.iw+ys.y0*cv.iw+xs.y0)*lanes*4), ys.real, xs.real, cv.iw)
	ld.PadY0, ld.PadY1, ld.PadX0, ld.PadX1 = uint8(ys.padB), uint8(ys.padE), uint8(xs.padB), uint8(xs.padE)
	e.compute(ld, false)
	n := uint32(t * cv.ow)
	first := e.dwFirstTap(p, o, ob, r0, t, ab)
	if !first {
		// The buffer may hold any bits: an integer multiply by zero
		// clears it (fp32 0 × NaN would not).
		e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluMul, UseImm: true, UopBegin: p.clear[ab], UopEnd: p.clear[ab] + 1, IterOut: 1, IterIn: n, DstIn: 1}, false)
	}
	for k := range p.taps {
		if k == 0 && first {
			e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluMul, UopBegin: p.mul[ab], UopEnd: p.mul[ab] + 1, IterOut: 1, IterIn: n, DstIn: 1, FP32: true}, false)
			continue
		}
		a := isa.Insn{Op: isa.OpALU, Alu: isa.AluAdd, UopBegin: p.add[ab] + uint32(2*k), UopEnd: p.add[ab] + uint32(2*k) + 1,
			IterOut: uint32(t), IterIn: uint32(cv.ow), DstOut: uint32(cv.ow), DstIn: 1, SrcOut: uint32(cv.sh * p.wp), SrcIn: uint32(cv.sw), FP32: true}
		e.compute(a, false)
		e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluMul, UopBegin: p.mul[ab] + uint32(2*k), UopEnd: p.mul[ab] + uint32(2*k) + 1, IterOut: 1, IterIn: n, DstIn: 1, FP32: true}, false)
	}
	e.runTile(p.eps[ab], p.out, tileRef{o: o, nb: 1, ob: ob, y0: r0, h: t, x0: 0, w: cv.ow, pitch: cv.ow, span: p.n})
	se := p.storeEl
	e.store(isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: dtypeOf(se), SRAM: uint32(ab * p.n),
		DRAM: p.out.addr + uint64(((o*p.blocks+ob)*cv.oh*cv.ow+r0*cv.ow)*se.size()*lanes), YSize: uint32(t), XSize: uint32(cv.ow), XStride: uint32(cv.ow)})
}

// dwFirstTap loads the first tap's pixels of a stride-1 tile straight into
// its output buffer ab, a LOAD of its rows costing about what clearing the
// buffer alone would, and reports whether it did: strided taps are not
// rows of the input.
func (e *emitter) dwFirstTap(p *dwPlan, o, ob, r0, t, ab int) bool {
	cv := p.cv
	if cv.sh != 1 || cv.sw != 1 {
		return false
	}
	ys, err := spanOf(r0-cv.pt, t, cv.ih)
	if err != nil {
		return false
	}
	xs, err := spanOf(-cv.pl, cv.ow, cv.iw)
	if err != nil {
		return false
	}
	ld := load(isa.MemAcc, f32, ab*p.n, p.in.addr+uint64(((o*p.blocks+ob)*cv.ih*cv.iw+ys.y0*cv.iw+xs.y0)*lanes*4), ys.real, xs.real, cv.iw)
	ld.PadY0, ld.PadY1, ld.PadX0, ld.PadX1 = uint8(ys.padB), uint8(ys.padE), uint8(xs.padB), uint8(xs.padE)
	e.compute(ld, false)
	return true
}

// f32Bytes is v as little-endian fp32.
func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for k, f := range v {
		binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(f))
	}
	return b
}
