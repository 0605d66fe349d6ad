package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

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
	// Size the tile: the input rows (of several blocks, see kb below, when
	// they load straight into the accumulator), plus what the steps need.
	n := min(S, hw.InpSize, budget)
	if in.elem != i8 {
		n = min(S*lay.cb(), budget)
	}
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
	// A tile holds kb whole blocks when they are short (a transformer's
	// [tokens, hidden] is 192 blocks of 128 rows at BERT-base) and lie
	// one after the other in the input and the output: each load then
	// pays the DDR latency once for them all.
	kb := 1
	if in.elem != i8 && l.rows == nil && out.lay.s() == S && e.uniformSteps(ep, outCB) {
		kb = max(1, n/S)
	}
	eb := in.elem.size() * lanes
	for o := range lay.o() {
		for cb := 0; cb < lay.cb(); cb += kb {
			for r, m := 0, 0; r < S; r += m {
				var dst int
				m, dst = l.placeRows(r, min(n, S-r))
				if kb > 1 { // then r = dst = 0 and m = S
					m = min(kb, lay.cb()-cb) * S
				}
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
				e.store(isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: dtypeOf(se), DRAM: out.addr + uint64((((o+l.outOuter)*outCB+l.outBlock+cb)*out.lay.s()+dst)*se.size()*lanes),
					YSize: 1, XSize: uint32(m), XStride: uint32(m)})
			}
		}
	}
	return nil
}
