package alidnn

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// pool emits a POOL layer, tiles of whole output rows: the input rows load
// into the accumulator (int8 through a GEMM by the identity), POOL or, for
// a dilated window, ALU operations per tap pool them, an average's
// divisors are corrected at the padding, and the epilogue runs.
func (e *emitter) pool(l *layer) error {
	if l.pool.globalByALU() {
		return e.globalPool(l)
	}
	p, in, out := l.pool, l.in, l.out
	lay := out.lay
	CB := lay.cb()
	wp := (p.ow-1)*p.sw + p.spanW()
	xs, err := spanOf(-p.pl, wp, p.iw)
	if err != nil {
		return fmt.Errorf("layer %s: %w", out, err)
	}
	inRows := func(th int) int { return (th-1)*p.sh + p.spanH() }
	if p.dilated() && (in.elem != f32 || p.sh*wp > 2047 || p.ow > 2047) {
		return fmt.Errorf("layer %s: dilated pooling of %v rows %d wide: %w", out, in.elem, wp, ErrUnsupported)
	}
	scales, corr := p.scales()
	corr = corr && p.avg
	th, base, ep, u, err := e.poolTile(l, wp, corr)
	if err != nil {
		return err
	}
	n := th * p.ow
	var id uint64
	var copyU, corrU uint32
	if in.elem == i8 {
		id = e.identity()
		copyU = u.addGemm(0, 0, 0)
	}
	// A dilated window maxes or sums its taps with strided ALU operations
	// over the tile, one per tap, into base: the POOL instruction has no
	// dilation.
	var zeroU uint32
	var tapU []uint32
	if p.dilated() {
		zeroU = u.addALU(base, 0)
		for a := range p.kh {
			for b := range p.kw {
				tapU = append(tapU, u.addALU(base, a*p.dh*wp+b*p.dw))
			}
		}
	}
	var corrT uint64
	if corr {
		corrU = u.addALU(base, base+n)
		corrT = e.blob(p.scaleRows(scales))
	}
	if err := e.loadUops(u); err != nil {
		return fmt.Errorf("layer %s: %w", out, err)
	}
	eb := in.elem.size() * lanes
	se := l.storeElem()
	kind := isa.PoolMax
	if p.avg {
		kind = isa.PoolAvg
	}
	for o := range lay.o() {
		for cb := range CB {
			for r0 := 0; r0 < p.oh; r0 += th {
				t := min(th, p.oh-r0)
				ys, err := spanOf(r0*p.sh-p.pt, inRows(t), p.ih)
				if err != nil {
					return fmt.Errorf("layer %s: %w", out, err)
				}
				e.beginTile()
				src := in.addr + uint64(((o*CB+cb)*p.ih*p.iw+ys.y0*p.iw+xs.y0)*eb)
				mem := isa.MemAcc
				if in.elem == i8 {
					mem = isa.MemInp
				}
				ld := load(mem, in.elem, 0, src, ys.real, xs.real, p.iw)
				ld.PadY0, ld.PadY1, ld.PadX0, ld.PadX1 = uint8(ys.padB), uint8(ys.padE), uint8(xs.padB), uint8(xs.padE)
				ld.PadMin = !p.avg && (ys.padB|ys.padE|xs.padB|xs.padE) != 0
				rows := inRows(t) * wp
				if in.elem == i8 {
					e.copyToAcc(ld, id, copyU, rows)
				} else {
					e.compute(ld, false)
				}
				if p.dilated() {
					e.dilatedTaps(p, zeroU, tapU, t, wp)
				} else {
					e.compute(isa.Insn{Op: isa.OpPool, Pool: kind, FP32: in.elem == f32, WinH: uint8(p.kh), WinW: uint8(p.kw),
						StrideH: uint8(p.sh), StrideW: uint8(p.sw), PoolDst: uint32(base), PoolSrc: 0, Channels: 1,
						InH: uint32(inRows(t)), InW: uint32(wp)}, false)
				}
				if corr {
					e.compute(load(isa.MemAcc, f32, base+n, corrT+uint64(r0*p.ow*lanes*4), 1, t*p.ow, t*p.ow), false)
					e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluMul, FP32: true, UopBegin: corrU, UopEnd: corrU + 1, IterOut: 1, IterIn: uint32(t * p.ow), DstIn: 1, SrcIn: 1}, false)
				}
				e.runSteps(ep, out, o, cb, r0*p.ow, t*p.ow)
				st := isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: dtypeOf(se), SRAM: uint32(base),
					DRAM: out.addr + uint64(((o*CB+cb)*p.oh*p.ow+r0*p.ow)*se.size()*lanes), YSize: 1, XSize: uint32(t * p.ow), XStride: uint32(t * p.ow)}
				e.store(st)
			}
		}
	}
	return nil
}

// poolTile chooses the tallest tile of whole output rows whose input rows,
// pooled rows, divisor correction (if corr) and epilogue fit the
// accumulator. Its pooled rows start at acc row base, after the input
// rows, wp elements wide.
func (e *emitter) poolTile(l *layer, wp int, corr bool) (th, base int, ep *epilogue, u *uopTable, err error) {
	p := l.pool
	for th = p.oh; th >= 1; th-- {
		base = ((th-1)*p.sh + p.spanH()) * wp
		n := th * p.ow
		if l.in.elem == i8 && base > hw.InpSize {
			continue
		}
		u = &uopTable{}
		ep, err = e.plan(l, u, base, n, base+n*(1+boolN(corr)))
		if err != nil {
			return 0, 0, nil, nil, err
		}
		if base+n*(1+boolN(corr))+ep.rows+ep.tiles*n <= hw.AccSize {
			return th, base, ep, u, nil
		}
	}
	return 0, 0, nil, nil, fmt.Errorf("layer %s: a pooling row does not fit the accumulator: %w", l.out, ErrUnsupported)
}

// scaleRows are the average's per-pixel divisor corrections, one fp32 row
// of lanes per output pixel.
func (p *poolSpec) scaleRows(scales []float32) []byte {
	b := make([]byte, p.oh*p.ow*lanes*4)
	for k, f := range scales {
		for c := range lanes {
			binary.LittleEndian.PutUint32(b[(k*lanes+c)*4:], math.Float32bits(f))
		}
	}
	return b
}

// copyToAcc loads int8 input rows with ld and copies them into the
// accumulator: a GEMM of rows pixels by the identity weights at id, reset
// then accumulated once.
func (e *emitter) copyToAcc(ld isa.Insn, id uint64, copyU uint32, rows int) {
	e.loadBatch(ld, load(isa.MemWgt, i8, 0, id, 1, 1, 1))
	g := isa.Insn{Op: isa.OpGEMM, UopBegin: copyU, UopEnd: copyU + 1, IterOut: 1, IterIn: uint32(rows), DstIn: 1, SrcIn: 1, Reset: true}
	e.compute(g, true)
	g.Reset = false
	e.compute(g, false)
	e.release()
}

// dilatedTaps pools t output rows from the fp32 tile at acc 0, wp wide,
// into the rows the micro-ops write: zeroed as integers first (an fp32
// multiply by 0 would keep a NaN left there), then each tap's strided view
// added, or for max the first added and the rest maxed.
func (e *emitter) dilatedTaps(p *poolSpec, zeroU uint32, tapU []uint32, t, wp int) {
	e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluMul, UseImm: true, UopBegin: zeroU, UopEnd: zeroU + 1,
		IterOut: 1, IterIn: uint32(t * p.ow), DstIn: 1}, false)
	for k, u := range tapU {
		op := isa.AluAdd
		if !p.avg && k > 0 {
			op = isa.AluMax
		}
		e.compute(isa.Insn{Op: isa.OpALU, Alu: op, FP32: true, UopBegin: u, UopEnd: u + 1,
			IterOut: uint32(t), IterIn: uint32(p.ow), DstOut: uint32(p.ow), DstIn: 1,
			SrcOut: uint32(p.sh * wp), SrcIn: uint32(p.sw)}, false)
	}
}

func (c *compiler) poolNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	if len(x.shape) != 4 {
		return fmt.Errorf("pooling of a rank-%d tensor: only 2-D: %w", len(x.shape), ErrUnsupported)
	}
	N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	var y, xw window
	switch n.OpType {
	case "GlobalAveragePool", "GlobalMaxPool":
		y = window{k: H, s: 1, d: 1, out: 1}
		xw = window{k: W, s: 1, d: 1, out: 1}
	default:
		if y, xw, err = windows(n, H, W, nil); err != nil {
			return err
		}
		if sr, err := n.Int("storage_order", 0); err != nil || sr != 0 {
			return fmt.Errorf("storage_order: %w", ErrUnsupported)
		}
		if len(n.Outputs) > 1 && n.Outputs[1] != "" {
			return fmt.Errorf("MaxPool's indices output: %w", ErrUnsupported)
		}
	}
	cip, err := n.Int("count_include_pad", 0)
	if err != nil {
		return err
	}
	avg := n.OpType == "AveragePool" || n.OpType == "GlobalAveragePool"
	spec := &poolSpec{avg: avg, kh: y.k, kw: xw.k, sh: y.s, sw: xw.s, dh: y.d, dw: xw.d, pt: y.pb, pl: xw.pb, pb: y.pe, pr: xw.pe,
		ih: H, iw: W, oh: y.out, ow: xw.out, countPad: cip != 0}
	if !spec.dilated() && !spec.globalByALU() && max(spec.kh, spec.kw, spec.sh, spec.sw) > poolWindowMax {
		return fmt.Errorf("pooling window %d×%d, strides %d×%d: the POOL instruction takes up to %d: %w", spec.kh, spec.kw, spec.sh, spec.sw, poolWindowMax, ErrUnsupported)
	}
	// Max pooling, and average pooling whose windows all count kh·kw
	// elements, run on int8 tensors as they are (the engine's average
	// rounds the sum's quotient half away from zero); averages that need
	// another divisor read fp32.
	// Dilated windows pool on the fp32 ALU.
	_, rescale := spec.scales()
	if err := c.settle(x, !spec.dilated() && !spec.globalByALU() && (!avg || !rescale)); err != nil {
		return err
	}
	x, err = c.deviceInput(x, convLayout(x.shape))
	if err != nil {
		return err
	}
	if avg && rescale && x.el() != f32 {
		return fmt.Errorf("average pooling of an integer tensor with windows over the padding: %w", ErrUnsupported)
	}
	if (spec.dilated() || spec.globalByALU()) && x.el() != f32 {
		return fmt.Errorf("dilated or %d×%d global pooling of the integer tensor %s: %w", H, W, x, ErrUnsupported)
	}
	l := &layer{kind: lPool, in: x, pool: spec, accFP: x.el() == f32, acc8: x.el() == i8}
	if avg && spec.globalByALU() {
		// The ALU sums; the mean is the sum's multiple.
		l.steps = append(l.steps, step{kind: sMulRow, fp: true, rowF: fill(C, 1/float32(H*W))})
	}
	outShape := []int{N, C, y.out, xw.out}
	out := &value{shape: outShape, typ: x.typ, q: x.q, device: device{lay: convLayout(outShape), layer: l}}
	l.out = out
	c.layers = append(c.layers, l)
	c.set(n, 0, out)
	return nil
}
