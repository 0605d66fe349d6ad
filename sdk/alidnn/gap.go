package alidnn

// Global pooling of feature maps wider or taller than the POOL
// instruction's 15-pixel window (a squeeze-and-excitation gate pools its
// whole block, 56×56 in MobileNet-v3's first): the image's pixels load
// into the accumulator chunk by chunk, and one ALU add (max) per chunk,
// its destination factor 0, folds every pixel into one row, which a
// multiplication by 1/(H·W) then averages. fp32 only.

import (
	"fmt"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// poolWindowMax is the largest window the POOL instruction takes.
const poolWindowMax = 15

// globalByALU reports whether p, a global pooling, needs the ALU.
func (p *poolSpec) globalByALU() bool {
	return p.oh == 1 && p.ow == 1 && p.kh == p.ih && p.kw == p.iw && p.pt == 0 && p.pl == 0 && !p.dilated() &&
		(p.kh > poolWindowMax || p.kw > poolWindowMax)
}

// globalPool emits a global pooling layer by the ALU: for each image and
// channel block, its pixels in chunks of n acc rows, folded into row n.
func (e *emitter) globalPool(l *layer) error {
	in, out, p := l.in, l.out, l.pool
	if in.elem != f32 {
		return fmt.Errorf("layer %s: global pooling of %d×%d %v pixels: %w", out, p.ih, p.iw, in.elem, ErrUnsupported)
	}
	S := p.ih * p.iw
	n, ep, u, err := e.globalChunk(l, S)
	if err != nil {
		return err
	}
	clearU, foldU := u.addALU(n, 0), u.addALU(n, 0)
	if err := e.loadUops(u); err != nil {
		return fmt.Errorf("layer %s: %w", out, err)
	}
	fold := isa.AluAdd
	if !p.avg {
		fold = isa.AluMax
	}
	CB, se := out.lay.cb(), l.storeElem()
	for o := range out.lay.o() {
		for cb := range CB {
			e.beginTile()
			// Cleared as integers: an fp32 multiply by 0 keeps a NaN.
			e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluMul, UseImm: true, UopBegin: clearU, UopEnd: clearU + 1, IterOut: 1, IterIn: 1}, false)
			for r0 := 0; r0 < S; r0 += n {
				m := min(n, S-r0)
				e.compute(load(isa.MemAcc, f32, 0, in.addr+uint64(((o*CB+cb)*S+r0)*lanes*4), 1, m, m), false)
				op := fold
				if r0 == 0 && !p.avg {
					// The maximum starts from the first pixel, not 0.
					e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluAdd, FP32: true, UopBegin: foldU, UopEnd: foldU + 1, IterOut: 1, IterIn: 1}, false)
				}
				e.compute(isa.Insn{Op: isa.OpALU, Alu: op, FP32: true, UopBegin: foldU, UopEnd: foldU + 1, IterOut: 1, IterIn: uint32(m), SrcIn: 1}, false)
			}
			e.runSteps(ep, out, o, cb, 0, 1)
			e.store(isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: dtypeOf(se), SRAM: uint32(n),
				DRAM: out.addr + uint64((o*CB+cb)*se.size()*lanes), YSize: 1, XSize: 1, XStride: 1})
		}
	}
	return nil
}

// globalChunk chooses the most pixels a chunk loads, S at most, such that
// they, the folded row and the epilogue fit the accumulator.
func (e *emitter) globalChunk(l *layer, S int) (int, *epilogue, *uopTable, error) {
	n := min(S, hw.AccSize-1)
	for {
		u := &uopTable{}
		ep, err := e.plan(l, u, n, 1, n+1)
		if err != nil {
			return 0, nil, nil, err
		}
		if n+1+ep.rows+ep.tiles <= hw.AccSize {
			return n, ep, u, nil
		}
		if n = hw.AccSize - 1 - ep.rows - ep.tiles; n < 1 {
			return 0, nil, nil, fmt.Errorf("layer %s: epilogue does not fit the accumulator: %w", l.out, ErrUnsupported)
		}
	}
}
