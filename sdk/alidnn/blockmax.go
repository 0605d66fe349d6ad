package alidnn

// The first step of a row maximum over more lanes than one block: the
// lane-wise maximum of a row's 16-lane blocks, which the ALU takes in one
// pass with the blocks side by side in the accumulator (a destination
// factor of 0 folds a run of source rows into one, ISA.md). The 16 lanes
// left are then reduced by butterflies one block wide (see laneMaxSeq).
// Butterflies across the full width cost each a MatMul of the whole row
// at the fp32 rate, four cycles a block, where the fold costs one.

import (
	"fmt"
	"math"
	"slices"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// blockMaxOp is the compiler's own operator for the fold: input [..., C]
// with C > 16 on the lanes, output [..., 16], lane l the maximum of the
// row's lanes l, l+16, l+32, … (see laneMaxSeq). The dot keeps it apart
// from ONNX's operator names.
const blockMaxOp = "alidnn.BlockMax"

// blockMaxNode compiles a blockMaxOp node as an lBlockMax layer.
func (c *compiler) blockMaxNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	if err := c.settle(x, false); err != nil {
		return err
	}
	r := len(x.shape)
	if r < 2 || !slices.Equal(x.shape, x.root().shape) {
		return fmt.Errorf("row maximum of %s: %w", x, ErrUnsupported)
	}
	if x, err = c.deviceInput(x, matLayout(x.root().shape)); err != nil {
		return err
	}
	if x.el() != f32 || !x.lay.equal(matLayout(x.shape)) {
		return fmt.Errorf("row maximum of %s, %v laid out %+v, want fp32 matrices: %w", x, x.el(), x.lay, ErrUnsupported)
	}
	shape := append(slices.Clone(x.shape[:r-1]), lanes)
	l := &layer{kind: lBlockMax, in: x, accFP: true}
	out := &value{shape: shape, typ: onnx.Float, device: device{lay: matLayout(shape), layer: l}}
	l.out = out
	c.layers = append(c.layers, l)
	c.set(n, 0, out)
	return nil
}

// blockMax emits an lBlockMax layer: tiles of m rows of every block load
// side by side ([block][row] in acc), the padding lanes of the last block
// are lowered to −MaxFloat32 (a min with a row of ±MaxFloat32) so they
// never win, and one ALU max folds blocks 1… into block 0, which is
// stored.
func (e *emitter) blockMax(l *layer) error {
	in, out := l.in, l.out
	S, B := in.lay.s(), in.lay.cb()
	C := in.shape[len(in.shape)-1]
	if B < 2 || len(l.steps) > 0 {
		return fmt.Errorf("row maximum of %s over %d blocks with %d steps: %w", in, B, len(l.steps), ErrUnsupported)
	}
	// B tiles of n rows and the padding row.
	n := min(S, (hw.AccSize-1)/B)
	if n < 1 {
		return fmt.Errorf("row maximum of %s: %d blocks exceed the accumulator: %w", in, B, ErrUnsupported)
	}
	padRow := B * n
	pad := C%lanes != 0
	var table uint64
	if pad {
		row := make([]float32, lanes)
		for k := range row {
			row[k] = math.MaxFloat32
			if (B-1)*lanes+k >= C {
				row[k] = -math.MaxFloat32
			}
		}
		table = e.blob(f32Bytes(row))
	}
	// A tile of m rows: the fold's micro-op reads block 1 at m, the
	// padding's writes the last block at (B−1)·m. The last tile may be
	// shorter.
	u := &uopTable{}
	uops := map[int][2]uint32{}
	for _, m := range []int{n, S % n} {
		if _, ok := uops[m]; m > 0 && !ok {
			uops[m] = [2]uint32{u.addALU(0, m), u.addALU((B-1)*m, padRow)}
		}
	}
	if err := e.loadUops(u); err != nil {
		return err
	}
	for o := range in.lay.o() {
		for r := 0; r < S; r += n {
			m := min(n, S-r)
			e.beginTile()
			e.compute(load(isa.MemAcc, f32, 0, in.addr+uint64(((o*B)*S+r)*lanes*4), B, m, S), false)
			if pad {
				e.loadRow(f32, padRow, table)
				lo := uops[m][1]
				e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluMin, UopBegin: lo, UopEnd: lo + 1, IterOut: 1, IterIn: uint32(m), DstIn: 1, FP32: true}, false)
			}
			fold := uops[m][0]
			e.compute(isa.Insn{Op: isa.OpALU, Alu: isa.AluMax, UopBegin: fold, UopEnd: fold + 1, IterOut: uint32(B - 1), IterIn: uint32(m),
				DstIn: 1, SrcOut: uint32(m), SrcIn: 1, FP32: true}, false)
			e.store(isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: isa.FP32, DRAM: out.addr + uint64((o*S+r)*lanes*4),
				YSize: 1, XSize: uint32(m), XStride: uint32(m)})
		}
	}
	return nil
}
