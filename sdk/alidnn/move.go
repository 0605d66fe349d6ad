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

// move emits a move layer: tiles of the input loaded into the
// accumulator (int8 through the array's identity), the steps, a STORE.
// Tiles alternate between two acc buffers when the accumulator holds
// them, so a tile's load and steps need not wait for the STORE of the one
// before.
func (e *emitter) move(l *layer) error {
	in, out := l.in, l.out
	lay := in.lay
	S := lay.s()
	outCB := out.lay.cb()
	n, bufs, eps, u, err := e.moveTiles(l)
	if err != nil {
		return err
	}
	var id uint64
	var reset []uint32
	if in.elem == i8 {
		id = e.identity()
		for ab := range bufs {
			reset = append(reset, u.addGemm(ab*n, 0, 0))
		}
	}
	if err := e.loadUops(u); err != nil {
		return err
	}
	e.buffers(1, bufs)
	// A tile holds kb whole blocks when they are short (a transformer's
	// [tokens, hidden] is 192 blocks of 128 rows at BERT-base) and lie
	// one after the other in the input and the output: each load then
	// pays the DDR latency once for them all.
	kb := 1
	if in.elem != i8 && l.rows == nil && out.lay.s() == S && e.uniformSteps(eps[0], outCB) {
		kb = max(1, n/S)
	}
	eb := in.elem.size() * lanes
	tile := 0
	for o := range lay.o() {
		for cb := 0; cb < lay.cb(); cb += kb {
			for r, m := 0, 0; r < S; r += m {
				var dst int
				m, dst = l.placeRows(r, min(n, S-r))
				if kb > 1 { // then r = dst = 0 and m = S
					m = min(kb, lay.cb()-cb) * S
				}
				ab := tile % bufs
				tile++
				base := ab * n
				e.beginTile()
				src := in.addr + uint64(((o*lay.cb()+cb)*S+r)*eb)
				if in.elem == i8 {
					e.loadBatch(load(isa.MemInp, i8, 0, src, 1, m, m), load(isa.MemWgt, i8, 0, id, 1, 1, 1))
					g := isa.Insn{Op: isa.OpGEMM, UopBegin: reset[ab], UopEnd: reset[ab] + 1, IterOut: 1, IterIn: uint32(m), DstIn: 1, SrcIn: 1, Reset: true}
					e.compute(g, true)
					g.Reset = false
					e.compute(g, false)
					e.release()
				} else {
					e.compute(load(isa.MemAcc, in.elem, base, src, 1, m, m), false)
				}
				e.runSteps(eps[ab], out, o, cb, r, m)
				se := l.storeElem()
				e.store(isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: dtypeOf(se), SRAM: uint32(base),
					DRAM:  out.addr + uint64((((o+l.outOuter)*outCB+l.outBlock+cb)*out.lay.s()+dst)*se.size()*lanes),
					YSize: 1, XSize: uint32(m), XStride: uint32(m)})
			}
		}
	}
	return nil
}

// moveTiles sizes a move layer's tiles, n acc rows (the input rows, of
// several blocks when they load straight into the accumulator), and
// plans the steps of each of its bufs acc buffers: two when the
// accumulator holds them with tiles of at least half as many rows as one
// buffer would have, else one.
func (e *emitter) moveTiles(l *layer) (n, bufs int, eps []*epilogue, u *uopTable, err error) {
	in := l.in
	most := min(in.lay.s(), hw.InpSize, hw.AccSize)
	if in.elem != i8 {
		most = min(in.lay.s()*in.lay.cb(), hw.AccSize)
	}
	n1, eps1, u1, err := e.fitMove(l, most, 1)
	if err != nil {
		return 0, 0, nil, nil, err
	}
	if n1 == 0 {
		return 0, 0, nil, nil, fmt.Errorf("layer %s: epilogue does not fit the accumulator: %w", l.out, ErrUnsupported)
	}
	n2, eps2, u2, err := e.fitMove(l, most, 2)
	if err != nil {
		return 0, 0, nil, nil, err
	}
	if n2 > 0 && 2*n2 >= n1 {
		return n2, 2, eps2, u2, nil
	}
	return n1, 1, eps1, u1, nil
}

// fitMove plans bufs acc buffers of the largest tile of at most most rows
// that the accumulator holds with the steps' rows and regions; n is 0 if
// none does.
func (e *emitter) fitMove(l *layer, most, bufs int) (n int, eps []*epilogue, u *uopTable, err error) {
	for n = most; ; {
		u, eps = &uopTable{}, nil
		for ab := range bufs {
			ep, err := e.plan(l, u, ab*n, n, bufs*n)
			if err != nil {
				return 0, nil, nil, err
			}
			eps = append(eps, ep)
		}
		need := bufs*n + eps[0].rows + eps[0].tiles*n
		if need <= hw.AccSize {
			return n, eps, u, nil
		}
		if n == 1 {
			return 0, nil, nil, nil
		}
		n = max(1, (hw.AccSize-eps[0].rows)/(bufs+eps[0].tiles))
	}
}
