package alidnn

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// hw is the engine configuration programs are compiled for.
var hw = alidnn.Default

// uopALU is where a layer's ALU micro-ops start in the uop SRAM; GEMM
// micro-ops take the space below.
const uopALU = 4096

// emitter builds the instruction stream and the constant segment, keeping
// the dependency-token protocol between the queues:
//
//   - load → compute: each batch of inp/wgt LOADs pushes one token that the
//     GEMM using it pops; the GEMM pushes one back when it is done with the
//     SRAMs, and the next batch pops it before overwriting them.
//   - compute → store: a tile's last compute instruction pushes a token the
//     tile's first STORE pops; the last STORE pushes one back, popped by the
//     next tile's first compute instruction before it overwrites acc.
//   - between layers a barrier (a compute NOP popping the store's token and
//     pushing one to the load queue, and a load NOP popping it) keeps the
//     next layer's loads behind the previous layer's stores in DRAM.
type emitter struct {
	insns  []isa.Insn
	consts []byte

	batches      int  // load batches issued
	storePending int  // store → compute tokens not yet popped
	lastCompute  int  // index of the last compute instruction, −1 none
	tileOpen     bool // the next compute instruction starts a tile
}

func (e *emitter) blob(b []byte) uint64 {
	for len(e.consts)%64 != 0 {
		e.consts = append(e.consts, 0)
	}
	off := uint64(len(e.consts))
	e.consts = append(e.consts, b...)
	return off
}

func (e *emitter) loadBatch(loads ...isa.Insn) {
	if e.batches > 0 {
		loads[0].PopNext = true
	}
	loads[len(loads)-1].PushNext = true
	e.insns = append(e.insns, loads...)
	e.batches++
}

// compute appends a compute-queue instruction; popPrev consumes a load
// batch's token.
func (e *emitter) compute(i isa.Insn, popPrev bool) {
	i.PopPrev = i.PopPrev || popPrev
	if e.tileOpen {
		e.tileOpen = false
		if e.storePending > 0 {
			i.PopNext = true
			e.storePending--
		}
	}
	e.lastCompute = len(e.insns)
	e.insns = append(e.insns, i)
}

// release marks the last compute instruction as done with the load batch.
func (e *emitter) release() { e.insns[e.lastCompute].PushPrev = true }

func (e *emitter) beginTile() { e.tileOpen = true }

// store ends a tile with its STOREs.
func (e *emitter) store(st ...isa.Insn) {
	e.insns[e.lastCompute].PushNext = true
	st[0].PopPrev = true
	st[len(st)-1].PushPrev = true
	e.insns = append(e.insns, st...)
	e.storePending++
}

func (e *emitter) barrier() {
	n := isa.Insn{Op: isa.OpNop, NopQueue: isa.QueueCompute, PushPrev: true}
	if e.storePending > 0 {
		n.PopNext = true
		e.storePending--
	}
	e.insns = append(e.insns, n, isa.Insn{Op: isa.OpNop, NopQueue: isa.QueueLoad, PopNext: true})
	e.lastCompute = -1
}

func (e *emitter) finish(job uint32) {
	f := isa.Insn{Op: isa.OpFinish, JobID: job}
	if e.storePending > 0 {
		f.PopNext = true
		e.storePending--
	}
	if e.batches > 0 {
		e.insns = append(e.insns, isa.Insn{Op: isa.OpNop, NopQueue: isa.QueueLoad, PopNext: true})
	}
	e.insns = append(e.insns, f)
}

func dtypeOf(el elem) isa.DType {
	switch el {
	case i8:
		return isa.Int8
	case i32:
		return isa.Int32
	}
	return isa.FP32
}

func load(mem isa.MemSpace, el elem, sram int, dram uint64, y, x, stride int) isa.Insn {
	return isa.Insn{Op: isa.OpLoad, Mem: mem, DType: dtypeOf(el), SRAM: uint32(sram), DRAM: dram,
		YSize: uint32(y), XSize: uint32(x), XStride: uint32(stride)}
}

// uopTable collects a layer's micro-ops.
type uopTable struct {
	gemm []uint32
	alu  []uint32
	err  error
}

func (u *uopTable) addGemm(acc, inp, wgt int) uint32 {
	w, err := isa.GemmUop{Acc: uint32(acc), Inp: uint32(inp), Wgt: uint32(wgt)}.Encode()
	if err != nil && u.err == nil {
		u.err = err
	}
	u.gemm = append(u.gemm, w)
	return uint32(len(u.gemm) - 1)
}

func (u *uopTable) addALU(dst, src int) uint32 {
	w, err := isa.AluUop{Dst: uint32(dst), Src: uint32(src)}.Encode()
	if err != nil && u.err == nil {
		u.err = err
	}
	u.alu = append(u.alu, w)
	return uopALU + uint32(len(u.alu)-1)
}

// loadUops places the table in the constant segment and loads it.
func (e *emitter) loadUops(u *uopTable) error {
	if u.err != nil {
		return u.err
	}
	if len(u.gemm) > uopALU || len(u.alu) > hw.UopSize-uopALU {
		return fmt.Errorf("%d GEMM and %d ALU micro-ops exceed the uop SRAM: %w", len(u.gemm), len(u.alu), ErrUnsupported)
	}
	put := func(ws []uint32, sram int) {
		if len(ws) == 0 {
			return
		}
		b := make([]byte, 4*len(ws))
		for k, w := range ws {
			binary.LittleEndian.PutUint32(b[4*k:], w)
		}
		off := e.blob(b)
		e.compute(load(isa.MemUop, i32, sram, off, 1, len(ws), len(ws)), false)
	}
	put(u.gemm, 0)
	put(u.alu, uopALU)
	return nil
}

func (l *layer) storeElem() elem {
	switch {
	case l.acc8:
		return i8
	case l.accFP:
		return f32
	}
	return i32
}

func (e *emitter) layer(l *layer) error {
	var err error
	switch l.kind {
	case lGemm:
		err = e.gemm(l)
	case lPool:
		err = e.pool(l)
	default:
		err = e.move(l)
	}
	if err != nil {
		return err
	}
	e.barrier()
	return nil
}

// identity places the 16×16 int8 identity matrix used to move int8 data
// into the accumulator through the GEMM array.
func (e *emitter) identity() uint64 {
	b := make([]byte, lanes*lanes)
	for k := range lanes {
		b[k*lanes+k] = 1
	}
	return e.blob(b)
}

func (e *emitter) move(l *layer) error {
	in, out := l.in, l.out
	lay := in.lay
	S := lay.s()
	outCB := out.lay.cb()
	budget := hw.AccSize
	u := &uopTable{}
	// Size the tile: the input rows, plus what the steps need.
	n := min(S, hw.InpSize, budget)
	var ep *epilogue
	for {
		var err error
		u = &uopTable{}
		ep, err = e.plan(l, u, 0, n, n)
		if err != nil {
			return err
		}
		if n+ep.rows+ep.tiles*n <= budget || n == 1 {
			break
		}
		n = max(1, (budget-ep.rows)/(1+ep.tiles))
	}
	if n+ep.rows+ep.tiles*n > budget {
		return fmt.Errorf("layer %s: epilogue does not fit the accumulator: %w", out, ErrUnsupported)
	}
	var id uint64
	var reset, copyU uint32
	if in.elem == i8 {
		id = e.identity()
		reset = u.addGemm(0, 0, 0)
		copyU = reset
	}
	if err := e.loadUops(u); err != nil {
		return err
	}
	eb := in.elem.size() * lanes
	for o := range lay.o() {
		for cb := range lay.cb() {
			for r := 0; r < S; r += n {
				m := min(n, S-r)
				e.beginTile()
				src := in.addr + uint64(((o*lay.cb()+cb)*S+r)*eb)
				if in.elem == i8 {
					e.loadBatch(load(isa.MemInp, i8, 0, src, 1, m, m), load(isa.MemWgt, i8, 0, id, 1, 1, 1))
					g := isa.Insn{Op: isa.OpGEMM, UopBegin: reset, UopEnd: reset + 1, IterOut: 1, IterIn: uint32(m), DstIn: 1, SrcIn: 1, Reset: true}
					e.compute(g, true)
					g.Reset = false
					g.UopBegin, g.UopEnd = copyU, copyU+1
					e.compute(g, false)
					e.release()
				} else {
					e.compute(load(isa.MemAcc, in.elem, 0, src, 1, m, m), false)
				}
				e.runSteps(ep, out, o, cb, r, m)
				se := l.storeElem()
				e.store(isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: dtypeOf(se), DRAM: out.addr + uint64(((o*outCB+l.outBlock+cb)*S+r)*se.size()*lanes),
					YSize: 1, XSize: uint32(m), XStride: uint32(m)})
			}
		}
	}
	return nil
}

// span is the padded input window of a tile: in rows [start, start+rows)
// of an axis of size size, with pads before and after.
type span struct{ y0, real, padB, padE int }

func spanOf(start, rows, size int) (span, error) {
	s := span{y0: max(start, 0)}
	s.padB = s.y0 - start
	end := min(start+rows, size)
	s.real = end - s.y0
	s.padE = start + rows - end
	if s.real <= 0 {
		return s, fmt.Errorf("tile window [%d, %d) misses the input of %d", start, start+rows, size)
	}
	if s.padB > 15 || s.padE > 15 {
		return s, fmt.Errorf("padding %d/%d exceeds the engine's 15: %w", s.padB, s.padE, ErrUnsupported)
	}
	return s, nil
}

func (e *emitter) gemm(l *layer) error {
	cv, in, out := l.conv, l.in, l.out
	lay := out.lay
	KB := (cv.ic + lanes - 1) / lanes
	OB := (cv.oc + lanes - 1) / lanes
	if lay.cb() != OB || lay.s() != cv.oh*cv.ow {
		return fmt.Errorf("layer %s: output layout %d blocks × %d rows, want %d × %d", out, lay.cb(), lay.s(), OB, cv.oh*cv.ow)
	}
	wp := (cv.ow-1)*cv.sw + (cv.kw-1)*cv.dw + 1
	xs, err := spanOf(-cv.pl, wp, cv.iw)
	if err != nil {
		return fmt.Errorf("layer %s: %w", out, err)
	}
	ie := i8
	if cv.fp {
		ie = f32
	}
	zx := cv.zx != 0
	regions := 1
	if zx {
		regions = 2
	}
	taps := cv.kh * cv.kw
	parts := 1
	for _, w := range cv.wI {
		switch {
		case w < -256 || w > 254:
			parts = 3
		case (w < -128 || w > 127) && parts < 2:
			parts = 2
		}
	}
	if taps*parts > hw.WgtSize {
		return fmt.Errorf("layer %s: a %dx%d kernel exceeds the weight SRAM: %w", out, cv.kh, cv.kw, ErrUnsupported)
	}
	// Choose the tile height th and the input-channel chunk kbc.
	inRows := func(th int) int { return (th-1)*cv.sh + (cv.kh-1)*cv.dh + 1 }
	var th, kbc, stride int
	var ep *epilogue
	var u *uopTable
	for th = cv.oh; th >= 1; th-- {
		stride = inRows(th) * wp
		if stride*regions > hw.InpSize {
			continue
		}
		kbc = min(KB, hw.InpSize/(stride*regions), hw.WgtSize/(taps*parts), uopALU/(taps*parts*regions)-1)
		if kbc < 1 {
			continue
		}
		n := th * cv.ow
		u = &uopTable{}
		ep, err = e.plan(l, u, 0, n, n*regions)
		if err != nil {
			return err
		}
		if n*regions+ep.rows+ep.tiles*n <= hw.AccSize {
			break
		}
	}
	if th < 1 {
		return fmt.Errorf("layer %s: an output row of %d pixels (input row %d wide) does not fit the engine's SRAMs: %w", out, cv.ow, wp, ErrUnsupported)
	}
	n := th * cv.ow
	if cv.ow > 2047 || cv.sh*wp > 2047 || cv.sw > 2047 {
		return fmt.Errorf("layer %s: loop factors exceed 11 bits: %w", out, ErrUnsupported)
	}
	// Micro-ops: reset, the taps of each input block, and the zero-point
	// correction's taps reading the ones image into the second acc region.
	reset := u.addGemm(0, 0, 0)
	var resetZ uint32
	if zx {
		resetZ = u.addGemm(n, 0, 0)
	}
	taps4 := func(acc, inp int) {
		for kb := range kbc {
			for part := range parts {
				for y := range cv.kh {
					for x := range cv.kw {
						u.addGemm(acc, inp+kb*stride+y*cv.dh*wp+x*cv.dw, (kb*parts+part)*taps+y*cv.kw+x)
					}
				}
			}
		}
	}
	first := uint32(len(u.gemm))
	taps4(0, 0)
	firstZ := uint32(len(u.gemm))
	if zx {
		taps4(n, kbc*stride)
	}
	var mulZ, addZ uint32
	if zx {
		mulZ = u.addALU(n, 0)
		addZ = u.addALU(0, n)
	}
	// Weights [batch][OB][KB][kh][kw] of 16×16 blocks.
	batches := 1
	if cv.batched {
		batches = lay.o()
	}
	wb := lanes * lanes * ie.size()
	wblob := make([]byte, batches*OB*KB*parts*taps*wb)
	for b := range batches {
		for o := range cv.oc {
			for k := range cv.ic {
				for t := range taps {
					src := ((b*cv.oc+o)*cv.ic+k)*taps + t
					for part := range parts {
						el := ((b*OB+o/lanes)*KB+k/lanes)*parts*taps + part*taps + t
						off := el*wb + ((o%lanes)*lanes+k%lanes)*ie.size()
						if cv.fp {
							binary.LittleEndian.PutUint32(wblob[off:], math.Float32bits(cv.wF[src]))
						} else {
							wblob[off] = byte(int8(split(cv.wI[src], parts, part)))
						}
					}
				}
			}
		}
	}
	waddr := e.blob(wblob)
	var ones uint64
	if zx {
		b := make([]byte, KB*cv.ih*cv.iw*lanes)
		for kb := range KB {
			for p := range cv.ih * cv.iw {
				for c := range lanes {
					if kb*lanes+c < cv.ic {
						b[(kb*cv.ih*cv.iw+p)*lanes+c] = 1
					}
				}
			}
		}
		ones = e.blob(b)
	}
	if err := e.loadUops(u); err != nil {
		return fmt.Errorf("layer %s: %w", out, err)
	}
	ieb := ie.size() * lanes
	se := l.storeElem()
	for o := range lay.o() {
		for ob := range OB {
			for r0 := 0; r0 < cv.oh; r0 += th {
				t := min(th, cv.oh-r0)
				ys, err := spanOf(r0*cv.sh-cv.pt, inRows(t), cv.ih)
				if err != nil {
					return fmt.Errorf("layer %s: %w", out, err)
				}
				e.beginTile()
				for kb0 := 0; kb0 < KB; kb0 += kbc {
					kn := min(kbc, KB-kb0)
					var loads []isa.Insn
					for kb := range kn {
						ld := load(isa.MemInp, ie, kb*stride, in.addr+uint64(((o*KB+kb0+kb)*cv.ih*cv.iw+ys.y0*cv.iw+xs.y0)*ieb), ys.real, xs.real, cv.iw)
						ld.PadY0, ld.PadY1, ld.PadX0, ld.PadX1 = uint8(ys.padB), uint8(ys.padE), uint8(xs.padB), uint8(xs.padE)
						loads = append(loads, ld)
						if zx {
							z := ld
							z.SRAM = uint32((kbc + kb) * stride)
							z.DRAM = ones + uint64(((kb0+kb)*cv.ih*cv.iw+ys.y0*cv.iw+xs.y0)*lanes)
							loads = append(loads, z)
						}
					}
					wsel := 0
					if cv.batched {
						wsel = o
					}
					loads = append(loads, load(isa.MemWgt, ie, 0, waddr+uint64(((wsel*OB+ob)*KB+kb0)*parts*taps*wb), 1, kn*parts*taps, kn*parts*taps))
					e.loadBatch(loads...)
					g := isa.Insn{Op: isa.OpGEMM, IterOut: uint32(t), IterIn: uint32(cv.ow), DstOut: uint32(cv.ow), DstIn: 1, FP32: cv.fp}
					pop := true
					if kb0 == 0 {
						r := g
						r.Reset, r.UopBegin, r.UopEnd = true, reset, reset+1
						e.compute(r, true)
						pop = false
						if zx {
							r.UopBegin, r.UopEnd = resetZ, resetZ+1
							e.compute(r, false)
						}
					}
					g.SrcOut, g.SrcIn = uint32(cv.sh*wp), uint32(cv.sw)
					g.UopBegin, g.UopEnd = first, first+uint32(kn*parts*taps)
					e.compute(g, pop)
					if zx {
						g.UopBegin, g.UopEnd = firstZ, firstZ+uint32(kn*parts*taps)
						e.compute(g, false)
					}
					e.release()
				}
				if zx {
					e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluMul, UseImm: true, Imm: -cv.zx, UopBegin: mulZ, UopEnd: mulZ + 1, IterOut: 1, IterIn: uint32(t * cv.ow), DstIn: 1}, false)
					e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluAdd, UopBegin: addZ, UopEnd: addZ + 1, IterOut: 1, IterIn: uint32(t * cv.ow), DstIn: 1, SrcIn: 1}, false)
				}
				e.runSteps(ep, out, o, ob, r0*cv.ow, t*cv.ow)
				e.store(isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: dtypeOf(se),
					DRAM: out.addr + uint64(((o*OB+ob)*cv.oh*cv.ow+r0*cv.ow)*se.size()*lanes), YSize: 1, XSize: uint32(t * cv.ow), XStride: uint32(t * cv.ow)})
			}
		}
	}
	return nil
}

func (e *emitter) pool(l *layer) error {
	p, in, out := l.pool, l.in, l.out
	lay := out.lay
	CB := lay.cb()
	wp := (p.ow-1)*p.sw + p.kw
	xs, err := spanOf(-p.pl, wp, p.iw)
	if err != nil {
		return fmt.Errorf("layer %s: %w", out, err)
	}
	inRows := func(th int) int { return (th-1)*p.sh + p.kh }
	corr := p.avg && !p.countPad && (p.pt > 0 || p.pl > 0 || xs.padE > 0 || (p.oh-1)*p.sh+p.kh > p.ih+p.pt)
	var th, base int
	var ep *epilogue
	var u *uopTable
	for th = p.oh; th >= 1; th-- {
		base = inRows(th) * wp
		n := th * p.ow
		if in.elem == i8 && base > hw.InpSize {
			continue
		}
		u = &uopTable{}
		ep, err = e.plan(l, u, base, n, base+n*(1+boolN(corr)))
		if err != nil {
			return err
		}
		if base+n*(1+boolN(corr))+ep.rows+ep.tiles*n <= hw.AccSize {
			break
		}
	}
	if th < 1 {
		return fmt.Errorf("layer %s: a pooling row does not fit the accumulator: %w", out, ErrUnsupported)
	}
	n := th * p.ow
	var id uint64
	var copyU, corrU uint32
	if in.elem == i8 {
		id = e.identity()
		copyU = u.addGemm(0, 0, 0)
	}
	var corrT uint64
	if corr {
		corrU = u.addALU(base, base+n)
		b := make([]byte, p.oh*p.ow*lanes*4)
		for y := range p.oh {
			for x := range p.ow {
				h0, w0 := y*p.sh-p.pt, x*p.sw-p.pl
				h1, w1 := min(h0+p.kh, p.ih), min(w0+p.kw, p.iw)
				cnt := (h1 - max(h0, 0)) * (w1 - max(w0, 0))
				f := float32(p.kh*p.kw) / float32(cnt)
				for c := range lanes {
					binary.LittleEndian.PutUint32(b[((y*p.ow+x)*lanes+c)*4:], math.Float32bits(f))
				}
			}
		}
		corrT = e.blob(b)
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
					e.loadBatch(ld, load(isa.MemWgt, i8, 0, id, 1, 1, 1))
					g := isa.Insn{Op: isa.OpGEMM, UopBegin: copyU, UopEnd: copyU + 1, IterOut: 1, IterIn: uint32(rows), DstIn: 1, SrcIn: 1, Reset: true}
					e.compute(g, true)
					g.Reset = false
					e.compute(g, false)
					e.release()
				} else {
					e.compute(ld, false)
				}
				e.compute(isa.Insn{Op: isa.OpPool, Pool: kind, FP32: in.elem == f32, WinH: uint8(p.kh), WinW: uint8(p.kw),
					StrideH: uint8(p.sh), StrideW: uint8(p.sw), PoolDst: uint32(base), PoolSrc: 0, Channels: 1,
					InH: uint32(inRows(t)), InW: uint32(wp)}, false)
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

// split returns part j of w divided into n int8 parts that sum to w.
func split(w int64, n, j int) int64 {
	q, r := w/int64(n), w%int64(n)
	if int64(j) < abs(r) {
		if r < 0 {
			return q - 1
		}
		return q + 1
	}
	return q
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func boolN(b bool) int {
	if b {
		return 1
	}
	return 0
}
