package alidnn

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Lanes never broadcast in the ALU, which combines lane l with lane l. A
// computed operand [..., 1] that an element-wise operator broadcasts along
// the lanes of a tensor [..., C] holding its last axis there — a reduced
// mean or standard deviation, as the function bodies of the
// normalisations write them — is first spread to the 16 lanes of one
// block by a MatMul by the row of 16 ones, exact, which the ALU reads for
// every block of C (see laneOperand); to [..., C], by the row of C ones,
// for what reads it otherwise (an Expand's result). Its padding lanes,
// which meet the ones' zero padding, are zeroed first as in pickLane0, so
// that an infinity there cannot make 0·∞ = NaN.

// spreadsLanes reports whether b, of a's rank, broadcasts along the last
// axis of a, whose storage holds that axis on the lanes.
func spreadsLanes(a, b *value, shape []int) bool {
	r := len(shape)
	if r == 0 || len(b.shape) != r || b.shape[r-1] != 1 || shape[r-1] == 1 {
		return false
	}
	return lastOnLanes(a) && lastOnLanes(b)
}

// lastOnLanes reports whether v, computed, is stored as it is with its last
// axis on the lanes.
func lastOnLanes(v *value) bool {
	r := v.root()
	return !v.isConst && r.lay.shape != nil && eqInts(v.shape, r.shape) && r.lay.lane == len(v.shape)-1
}

// spreadLanes returns b [..., 1] spread to [..., C] (C = lanes: one
// block) for node n.
func (c *compiler) spreadLanes(n *onnx.Node, b *value, C int) (*value, error) {
	p := n.Outputs[0] + "/spread/"
	c.vals[p+"keep"] = constFloat(p+"keep", []int{1}, []float32{float32(math.NaN())})
	c.vals[p+"ones"] = constFloat(p+"ones", []int{1, C}, fill(C, 1))
	seq := []*onnx.Node{
		{Name: n.Name, OpType: "Min", Inputs: []string{b.name, p + "keep"}, Outputs: []string{p + "lo"}},
		{Name: n.Name, OpType: "Max", Inputs: []string{p + "lo", p + "keep"}, Outputs: []string{p + "z"}},
		{Name: n.Name, OpType: "MatMul", Inputs: []string{p + "z", p + "ones"}, Outputs: []string{p + "b"}},
	}
	for _, m := range seq {
		c.uses[m.Outputs[0]] = 1
		if err := c.node(m); err != nil {
			return nil, err
		}
	}
	return c.vals[p+"b"], nil
}

// expandNode compiles Expand of a computed tensor by a constant shape: the
// identity when nothing grows, a spread along the lanes (spreadLanes)
// when only the last axis, held on them, grows from 1, and copies along
// rows or outer axes otherwise (see expandRepeat). A graph input not
// laid out yet is laid out so (see hiddenLayout).
func (c *compiler) expandNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	sv, err := c.needConst(n, 1, "shape")
	if err != nil {
		return err
	}
	shape, err := foldedShape(x.shape, toInts(sv.ints()))
	if err != nil {
		return fmt.Errorf("Expand of %s: %w", x, err)
	}
	r := len(shape)
	switch {
	case eqInts(shape, x.shape):
		c.set(n, 0, &value{shape: x.shape, typ: x.typ, derived: derived{alias: x.root(), view: x.view, cols: x.cols}})
		return nil
	case len(x.shape) == r && eqInts(shape[:r-1], x.shape[:r-1]) && x.shape[r-1] == 1 && x.typ == onnx.Float:
		hiddenLayout(x)
		if !lastOnLanes(x) {
			break
		}
		v, err := c.spreadLanes(n, x, shape[r-1])
		if err != nil {
			return err
		}
		c.set(n, 0, &value{shape: shape, typ: x.typ, derived: derived{alias: v}})
		return nil
	}
	return c.expandRepeat(n, x, shape)
}
