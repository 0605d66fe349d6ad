package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// gemm emits a GEMM layer: planGemm chooses its tiles; then, tile by tile,
// each chunk of input blocks loads in one batch and computes while the next
// loads, the epilogue runs and the tile is stored.
func (e *emitter) gemm(l *layer) error {
	if l.conv.groups > 1 {
		if ok, err := e.dwUnit(l); ok || err != nil {
			return err
		}
		if len(l.inClamp) > 0 {
			// deferInputClamps planned l on the unit with the same
			// emitter state; without it the producer's clamp is lost.
			return fmt.Errorf("layer %s: the depthwise unit, planned to clamp its input, cannot run it", l.out)
		}
		if ok, err := e.depthwise(l); ok || err != nil {
			return err
		}
	}
	p, err := e.planGemm(l)
	if err != nil {
		return err
	}
	p.addUops()
	e.addConstants(p)
	if err := e.loadUops(p.u); err != nil {
		return fmt.Errorf("layer %s: %w", p.out, err)
	}
	e.buffers(p.bufs, p.accBufs)
	return e.gemmTiles(p)
}

// gemmTile is one tile of a GEMM layer: images o0..o0+ni−1, output block
// ob, t rows from r0 and w columns from c0, whose input spans ys and xs,
// computed in acc buffer ab.
type gemmTile struct {
	o0, ni, ob int
	r0, t      int
	c0, w      int
	ys, xs     span
	ab         int
}

// gemmTiles emits p's tiles, images outermost, then rows, column strips
// and output blocks: the output blocks of one place read the same input,
// which a load buffer may still hold (see chunkLoads).
func (e *emitter) gemmTiles(p *gemmPlan) error {
	cv := p.cv
	for o0 := 0; o0 < p.lay.o(); o0 += p.nb {
		for r0 := 0; r0 < cv.oh; r0 += p.th {
			t := gemmTile{o0: o0, ni: min(p.nb, p.lay.o()-o0), r0: r0, t: min(p.th, cv.oh-r0)}
			var err error
			if t.ys, err = spanOf(r0*cv.sh-cv.pt, cv.inRows(t.t), cv.ih); err != nil {
				return fmt.Errorf("layer %s: %w", p.out, err)
			}
			for c0 := 0; c0 < cv.ow; c0 += p.tw {
				t.c0, t.w = c0, min(p.tw, cv.ow-c0)
				if t.xs, err = spanOf(c0*cv.sw-cv.pl, p.wp, cv.iw); err != nil {
					return fmt.Errorf("layer %s: %w", p.out, err)
				}
				for ob := range p.outBlocks {
					t.ob = ob
					t.ab = p.tiles % p.accBufs
					p.tiles++
					e.emitGemmTile(p, t)
				}
			}
		}
	}
	return nil
}

// emitGemmTile emits tile t: its chunks of input blocks, the zero-point
// correction, the epilogue and the store.
func (e *emitter) emitGemmTile(p *gemmPlan, t gemmTile) {
	e.beginTile()
	bl := p.blocks[t.ob]
	for kb0 := 0; kb0 < len(bl); kb0 += p.kbc {
		kn := min(p.kbc, len(bl)-kb0)
		buf := p.chunks % p.bufs
		p.chunks++
		e.loadBatch(p.chunkLoads(t, kb0, kn, buf)...)
		e.computeChunk(p, t, kb0, kn, buf)
		e.release()
	}
	if p.zx {
		e.correctZeroPoint(p, t)
	}
	tr := tileRef{o: t.o0, nb: t.ni, ob: t.ob, y0: t.r0, h: t.t, x0: t.c0, w: t.w, pitch: p.cv.ow, span: p.pix, sc: p.cv.scatter}
	e.runTile(p.eps[t.ab], p.out, tr)
	if p.cv.scatter != nil {
		e.store(p.scatterStores(t)...)
		return
	}
	e.store(p.tileStore(t))
}

// chunkLoads are the loads of tile t's input blocks kb0..kb0+kn−1 (of its
// output block's list) into load buffer buf: each image's input, the ones
// image beside it for the zero-point correction, and the weights.
func (p *gemmPlan) chunkLoads(t gemmTile, kb0, kn, buf int) []isa.Insn {
	cv, bl := p.cv, p.blocks[t.ob]
	ieb := p.ie.size() * lanes
	ys, xs := t.ys, t.xs
	// The buffer may hold this input already: the chunk of another output
	// block at the same place and of the same input blocks.
	held := fmt.Sprint(t.o0, t.ni, t.ys, t.xs, bl[kb0:kb0+kn])
	if p.held == nil {
		p.held = make([]string, p.bufs)
	}
	if p.held[buf] == held {
		return []isa.Insn{p.weightLoad(t, kb0, kn, buf)}
	}
	p.held[buf] = held
	var loads []isa.Insn
	// Whole images of consecutive blocks without padding lie one after the
	// other in both memories: one LOAD takes them all, paying the DDR
	// latency once (a fully connected layer's 80 blocks of one pixel would
	// otherwise pay it 80 times).
	whole := !p.zx && ys.real == cv.ih && p.stride == cv.ih*xs.real && ys.padB+ys.padE+xs.padB+xs.padE == 0 && bl[kb0+kn-1]-bl[kb0] == kn-1
	for i := range t.ni {
		if whole {
			loads = append(loads, load(isa.MemInp, p.ie, buf*p.inpCap+i*p.ist,
				p.in.addr+uint64((((t.o0+i)*p.inBlocks+bl[kb0])*cv.ih*cv.iw+xs.y0)*ieb), kn*cv.ih, xs.real, cv.iw))
			continue
		}
		for kb := range kn {
			ld := load(isa.MemInp, p.ie, buf*p.inpCap+i*p.ist+kb*p.stride,
				p.in.addr+uint64((((t.o0+i)*p.inBlocks+bl[kb0+kb])*cv.ih*cv.iw+ys.y0*cv.iw+xs.y0)*ieb), ys.real, xs.real, cv.iw)
			ld.PadY0, ld.PadY1, ld.PadX0, ld.PadX1 = uint8(ys.padB), uint8(ys.padE), uint8(xs.padB), uint8(xs.padE)
			loads = append(loads, ld)
			if p.zx {
				z := ld
				z.SRAM = uint32(buf*p.inpCap + (p.kbc+kb)*p.stride)
				z.DRAM = p.ones + uint64((bl[kb0+kb]*cv.ih*cv.iw+ys.y0*cv.iw+xs.y0)*lanes)
				loads = append(loads, z)
			}
		}
	}
	return append(loads, p.weightLoad(t, kb0, kn, buf))
}

// weightLoad loads the weights of tile t's input blocks kb0..kb0+kn−1 into
// load buffer buf.
func (p *gemmPlan) weightLoad(t gemmTile, kb0, kn, buf int) isa.Insn {
	cv := p.cv
	if cv.wT != nil {
		// Rows ob·16… of Bᵀ's lane blocks bl[kb0…], N rows (padded to
		// whole blocks) apart.
		rows := (cv.oc + lanes - 1) / lanes * lanes
		src := cv.wT.addr + uint64(((t.o0*p.inBlocks+p.blocks[t.ob][kb0])*rows+t.ob*lanes)*lanes*p.ie.size())
		return load(isa.MemWgt, p.ie, buf*p.wgtCap, src, kn, 1, rows/lanes)
	}
	wsel := 0
	if cv.batched {
		wsel = t.o0
	}
	wb := lanes * lanes * p.ie.size()
	n := kn * p.parts * p.taps
	return load(isa.MemWgt, p.ie, buf*p.wgtCap, p.waddr+uint64((wsel*p.wstart[p.outBlocks]+p.wstart[t.ob]+kb0)*p.parts*p.taps*wb), 1, n, n)
}

// computeChunk multiplies the chunk in load buffer buf into tile t's acc
// buffer, resetting it (and the correction's region) on the tile's first
// chunk.
func (e *emitter) computeChunk(p *gemmPlan, t gemmTile, kb0, kn, buf int) {
	cv := p.cv
	// Rows of one image, or the images of a one-row tile.
	g := isa.Insn{Op: isa.OpGEMM, IterOut: uint32(t.t), IterIn: uint32(t.w), DstOut: uint32(p.tw), DstIn: 1,
		SrcOut: uint32(cv.sh * p.wp), SrcIn: uint32(cv.sw), FP32: cv.fp}
	if p.nb > 1 {
		g.IterOut, g.DstOut, g.SrcOut = uint32(t.ni), uint32(p.pix), uint32(p.ist)
	}
	pop := true
	if kb0 == 0 {
		r := g
		r.SrcOut, r.SrcIn = 0, 0
		r.Reset, r.UopBegin, r.UopEnd = true, p.uops.reset[t.ab], p.uops.reset[t.ab]+1
		e.compute(r, true)
		pop = false
		if p.zx {
			r.UopBegin, r.UopEnd = p.uops.resetZ, p.uops.resetZ+1
			e.compute(r, false)
		}
	}
	taps := uint32(kn * p.parts * p.taps)
	g.UopBegin, g.UopEnd = p.uops.first[buf][t.ab], p.uops.first[buf][t.ab]+taps
	e.compute(g, pop)
	if p.zx {
		g.UopBegin, g.UopEnd = p.uops.firstZ[buf], p.uops.firstZ[buf]+taps
		e.compute(g, false)
	}
}

// correctZeroPoint subtracts zx times the weights each pixel of tile t met,
// which its correction region holds, from the tile.
func (e *emitter) correctZeroPoint(p *gemmPlan, t gemmTile) {
	u := p.uops
	e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluMul, UseImm: true, Imm: -p.cv.zx, UopBegin: u.mulZ, UopEnd: u.mulZ + 1, IterOut: 1, IterIn: uint32(t.t * p.tw), DstIn: 1}, false)
	e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluAdd, UopBegin: u.addZ[t.ab], UopEnd: u.addZ[t.ab] + 1, IterOut: 1, IterIn: uint32(t.t * p.tw), DstIn: 1, SrcIn: 1}, false)
}

// tileStore is one STORE of tile t: its rows, or its images' one row.
func (p *gemmPlan) tileStore(t gemmTile) isa.Insn {
	cv, se := p.cv, p.storeEl
	S := cv.oh * cv.ow
	st := isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: dtypeOf(se), SRAM: uint32(t.ab * p.n),
		DRAM: p.out.addr + uint64(((t.o0*p.outBlocks+t.ob)*S+t.r0*cv.ow+t.c0)*se.size()*lanes), YSize: uint32(t.t), XSize: uint32(t.w), XStride: uint32(cv.ow)}
	if p.nb > 1 {
		st.YSize, st.XSize, st.XStride = uint32(t.ni), uint32(t.w), uint32(p.outBlocks*S)
	}
	return st
}

// scatterStores are the STOREs of tile t when the layer scatters its
// output: one a row, every step-th pixel.
func (p *gemmPlan) scatterStores(t gemmTile) []isa.Insn {
	sc, se := p.cv.scatter, p.storeEl
	var sts []isa.Insn
	for y := range t.t {
		px := ((t.r0+y)*sc.step+sc.y0)*sc.w + t.c0*sc.step + sc.x0
		sts = append(sts, isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: dtypeOf(se), SRAM: uint32(t.ab*p.n + y*p.tw),
			DRAM: p.out.addr + uint64(((t.o0*p.outBlocks+t.ob)*p.lay.s()+px)*se.size()*lanes), YSize: uint32(t.w), XSize: 1, XStride: uint32(sc.step)})
	}
	return sts
}
