package alidnn

// Depthwise convolutions on the engine's depthwise unit (POOL kind dw, see
// ISA.md): a window of up to 9 taps per output pixel and 16 channels a
// cycle in int8, a quarter of that in fp32, against the ALU's 2 cycles a
// tap (depthwise.go) and the array's 16 useful lanes of 256.
//
// A layer runs tile by tile as a GEMM layer does: the input rows of th
// output rows of one channel block load into inp (padded by the LOAD)
// through the load queue while the unit works on the previous tile; the
// block's weights, and its bias and clamp when the epilogue starts by
// adding one and applying a ReLU or Clip, sit in the top rows of param,
// loaded once per block; the epilogue's other steps and the STORE follow.

import (
	"encoding/binary"
	"math"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// dwuPlan is how a depthwise layer runs on the unit: tiles of th output
// rows of the whole width, their inputs tr×wp pixels in bufs inp buffers of
// inpCap, accBufs output buffers of n rows, the weight rows (rows a block,
// the fused steps' rows first) at param row wrow, and the epilogues of the
// steps the unit does not fuse.
type dwuPlan struct {
	cv             *convSpec
	in, out        *value
	rest           layer // l without the steps the unit fuses
	ie, storeEl    elem
	blocks, taps   int
	rows, wrow     int
	bias, clamp    bool
	inClamp        bool
	weights        uint64 // blocks × rows param rows in the constant segment
	th, tr, wp, n  int
	bufs, inpCap   int
	accBufs, tiles int
	eps            []*epilogue
	u              *uopTable
}

// dwUnitFits reports whether cv is a depthwise convolution the unit
// computes: one input channel per output channel, the window, strides and
// dilations within its fields, and, in int8, weights within −128..127 (its
// multipliers' width) and no input zero point to correct per pixel.
func dwUnitFits(cv *convSpec) bool {
	if cv.batched || cv.wT != nil || cv.scatter != nil || cv.zx != 0 || cv.groups != cv.ic || cv.oc != cv.ic ||
		cv.kh > 15 || cv.kw > 15 || cv.sh > 15 || cv.sw > 15 || cv.dh > 16 || cv.dw > 16 {
		return false
	}
	if !cv.fp {
		if len(cv.wI) < cv.oc*cv.kh*cv.kw {
			return false
		}
		for _, w := range cv.wI {
			if w < math.MinInt8 || w > math.MaxInt8 {
				return false
			}
		}
	}
	return true
}

// planDwUnit plans l on the depthwise unit, or returns nil when it cannot
// run there (see dwUnitFits), its layouts are not whole images, or no tile
// of whole rows fits inp, acc and param.
func (e *emitter) planDwUnit(l *layer) *dwuPlan {
	cv := l.conv
	if l.in == nil || !dwUnitFits(cv) || l.in.lay.cb() != (cv.ic+lanes-1)/lanes || l.in.lay.s() != cv.ih*cv.iw ||
		l.out.lay.cb() != (cv.oc+lanes-1)/lanes || l.out.lay.s() != cv.oh*cv.ow {
		return nil
	}
	p := &dwuPlan{cv: cv, in: l.in, out: l.out, rest: *l, ie: i8, storeEl: l.storeElem(),
		blocks: (cv.oc + lanes - 1) / lanes, taps: cv.kh * cv.kw, wp: cv.inCols(cv.ow)}
	if cv.fp {
		p.ie = f32
	}
	if _, err := spanOf(-cv.pl, p.wp, cv.iw); err != nil || p.wp > 4095 {
		return nil
	}
	pre := p.fuse(l.steps)
	if len(l.inClamp) > 0 {
		rows, err := p.inClampRows(l.inClamp)
		if err != nil {
			return nil
		}
		pre, p.inClamp = append(pre, rows...), true
	}
	p.rows = p.taps + len(pre)
	p.wrow = hw.ParamSize - p.rows
	if p.wrow < paramRowsOf(p.rest.steps) {
		return nil
	}
	for _, b := range [][2]int{{2, 2}, {2, 1}, {1, 1}} {
		p.bufs, p.accBufs = b[0], b[1]
		p.inpCap = hw.InpSize / p.bufs
		for th := cv.oh; th >= 1; th-- {
			p.th, p.tr, p.n = th, cv.inRows(th), th*cv.ow
			if p.tr*p.wp > p.inpCap || p.tr > 4095 || !p.rowsPadded() {
				continue
			}
			if p.planEpilogues(e) {
				p.weights = e.blob(dwWeightRows(cv, p.blocks, p.rows, pre))
				return p
			}
		}
	}
	return nil
}

// rowsPadded reports whether every tile's input rows need no more padding
// than a LOAD gives (15 rows a side).
func (p *dwuPlan) rowsPadded() bool {
	cv := p.cv
	for r0 := 0; r0 < cv.oh; r0 += p.th {
		if _, err := spanOf(r0*cv.sh-cv.pt, cv.inRows(min(p.th, cv.oh-r0)), cv.ih); err != nil {
			return false
		}
	}
	return true
}

// paramRowsOf is how many param rows the epilogue of steps takes (from row
// 0 up; see emitter.plan).
func paramRowsOf(steps []step) int {
	n := 0
	for _, s := range steps {
		switch s.kind {
		case sRequant, sQuantize, sDequantize:
			n++
		case sLut:
			n += isa.LutRows
		}
	}
	return n
}

// planEpilogues plans the epilogue of each acc buffer and reports whether
// the acc SRAM holds the buffers and what the steps need.
func (p *dwuPlan) planEpilogues(e *emitter) bool {
	p.u = &uopTable{}
	p.eps = p.eps[:0]
	free := p.accBufs * p.n
	e.paramTop = p.wrow // the unit's weight rows
	defer func() { e.paramTop = 0 }()
	var ep *epilogue
	for ab := range p.accBufs {
		var err error
		if ep, err = e.plan(&p.rest, p.u, ab*p.n, p.n, free); err != nil {
			return false
		}
		p.eps = append(p.eps, ep)
	}
	return free+ep.rows+ep.tiles*p.n <= hw.AccSize
}

// fuse takes the steps at the start of steps the unit does itself — the
// addition of a bias row, then a ReLU or the max of a Clip and its min if
// it has one — sets p.rest to the others and returns the fused steps'
// param rows in the unit's order (bias, low, high). A Clip without a low
// bound stays an ALU step: the unit's max with −∞ would turn a NaN into
// −∞ where ALU min alone gives the bound.
func (p *dwuPlan) fuse(steps []step) [][]byte {
	var rows [][]byte
	k := 0
	if k < len(steps) && steps[k].kind == sAddRow {
		if r := p.paramRow(steps[k]); r != nil {
			rows, p.bias = append(rows, r), true
			k++
		}
	}
	if k < len(steps) && (steps[k].kind == sMaxRow || steps[k].kind == sRelu) {
		lo := p.paramRow(steps[k])
		hi, n := p.unbounded(), 1
		if k+1 < len(steps) && steps[k+1].kind == sMinRow {
			if r := p.paramRow(steps[k+1]); r != nil {
				hi, n = r, 2
			}
		}
		if lo != nil {
			rows, p.clamp = append(rows, lo, hi), true
			k += n
		}
	}
	p.rest.steps = steps[k:]
	return rows
}

// paramRow returns, as param lanes (low 32 bits) for p's channel blocks,
// the per-channel constant of s (a row step, or ReLU's zero) when s works
// in the accumulator's own form and the constant fits it; else nil.
func (p *dwuPlan) paramRow(s step) []byte {
	if s.fp != p.cv.fp {
		return nil
	}
	b := make([]byte, p.blocks*lanes*8)
	if s.kind == sRelu {
		return b
	}
	for k := range p.blocks * lanes {
		var w uint32
		switch {
		case s.fp && k < len(s.rowF):
			w = math.Float32bits(s.rowF[k])
		case !s.fp && k < len(s.rowI):
			if s.rowI[k] < math.MinInt32 || s.rowI[k] > math.MaxInt32 {
				return nil
			}
			w = uint32(int32(s.rowI[k]))
		}
		binary.LittleEndian.PutUint32(b[8*k:], w)
	}
	return b
}

// unbounded is the high row of a clamp without a min: +∞ or the largest
// int32, which min leaves every sum below (NaN is the low bound by then).
func (p *dwuPlan) unbounded() []byte {
	b := make([]byte, p.blocks*lanes*8)
	v := uint32(math.MaxInt32)
	if p.cv.fp {
		v = math.Float32bits(float32(math.Inf(1)))
	}
	for k := range p.blocks * lanes {
		binary.LittleEndian.PutUint32(b[8*k:], v)
	}
	return b
}

// dwWeightRows lays out cv's weights as the unit reads them: for each
// channel block its rows param rows, first the block's lanes of each of
// pre (bias, clamp bounds, input clamp bounds), then a row per tap; lanes
// past the channels are 0.
func dwWeightRows(cv *convSpec, blocks, rows int, pre [][]byte) []byte {
	b := make([]byte, blocks*rows*lanes*8)
	off := len(pre)
	for ob := range blocks {
		for k, r := range pre {
			copy(b[(ob*rows+k)*lanes*8:], r[ob*lanes*8:(ob+1)*lanes*8])
		}
		for l := range lanes {
			c := ob*lanes + l
			if c >= cv.oc {
				break
			}
			for t := range cv.kh * cv.kw {
				var w uint32
				if k := cv.weight(0, c, c, t); cv.fp {
					w = math.Float32bits(cv.wF[k])
				} else {
					w = uint32(int32(cv.wI[k]))
				}
				binary.LittleEndian.PutUint32(b[((ob*rows+off+t)*lanes+l)*8:], w)
			}
		}
	}
	return b
}

// dwUnit emits l on the depthwise unit if planDwUnit can plan it, and
// reports whether it did.
func (e *emitter) dwUnit(l *layer) (bool, error) {
	p := e.planDwUnit(l)
	if p == nil {
		return false, nil
	}
	if err := e.loadUops(p.u); err != nil {
		return true, err
	}
	e.buffers(p.bufs, p.accBufs)
	return true, dwTiles(p.cv, p.out.lay.o(), p.blocks, p.th, func(o, ob, r0, t int, ys span) {
		e.dwUnitTile(p, o, ob, r0, t, ys)
	})
}

// dwUnitTile emits the tile of t output rows from r0 of image o and block
// ob, whose input rows are ys.
func (e *emitter) dwUnitTile(p *dwuPlan, o, ob, r0, t int, ys span) {
	cv := p.cv
	ab, buf := p.tiles%p.accBufs, p.tiles%p.bufs
	p.tiles++
	e.beginTile()
	if r0 == 0 {
		// The compute queue is in order: the previous block's POOLs have
		// read its weights before this LOAD replaces them.
		e.compute(load(isa.MemParam, p.paramElem(), p.wrow, p.weights+uint64(ob*p.rows*lanes*8), 1, p.rows, p.rows), false)
	}
	xs, _ := spanOf(-cv.pl, p.wp, cv.iw)
	ld := load(isa.MemInp, p.ie, buf*p.inpCap, p.in.addr+uint64(((o*p.blocks+ob)*cv.ih*cv.iw+ys.y0*cv.iw+xs.y0)*lanes*p.ie.size()), ys.real, xs.real, cv.iw)
	ld.PadY0, ld.PadY1, ld.PadX0, ld.PadX1 = uint8(ys.padB), uint8(ys.padE), uint8(xs.padB), uint8(xs.padE)
	e.loadBatch(ld)
	kind := isa.Insn{Op: isa.OpPool, Pool: isa.PoolDepthwise, WinH: uint8(cv.kh), WinW: uint8(cv.kw), StrideH: uint8(cv.sh), StrideW: uint8(cv.sw),
		GapH: uint8(cv.dh - 1), GapW: uint8(cv.dw - 1), PoolDst: uint32(ab * p.n), PoolSrc: uint32(buf * p.inpCap), Channels: 1,
		InH: uint32(cv.inRows(t)), InW: uint32(p.wp), DwWgt: uint32(p.wrow), DwBias: p.bias, DwClamp: p.clamp, DwInClamp: p.inClamp, FP32: cv.fp}
	e.compute(kind, true)
	e.release()
	e.runTile(p.eps[ab], p.out, tileRef{o: o, nb: 1, ob: ob, y0: r0, h: t, x0: 0, w: cv.ow, pitch: cv.ow, span: p.n})
	se := p.storeEl
	e.store(isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: dtypeOf(se), SRAM: uint32(ab * p.n),
		DRAM: p.out.addr + uint64(((o*p.blocks+ob)*cv.oh*cv.ow+r0*cv.ow)*se.size()*lanes), YSize: uint32(t), XSize: uint32(cv.ow), XStride: uint32(cv.ow)})
}

// paramElem is the data type the weight rows load as.
func (p *dwuPlan) paramElem() elem {
	if p.cv.fp {
		return f32
	}
	return i32
}
