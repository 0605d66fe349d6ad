package alidnn

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Lanes never broadcast in the ALU, which combines lane l with lane l. A
// computed operand [..., 1] that an element-wise operator broadcasts along
// the lanes of a tensor [..., C] holding its last axis there — a reduced
// mean or standard deviation, as the function bodies of the
// normalisations write them — is first spread to [..., C] by a MatMul by
// the row of C ones, exact; its padding lanes, which meet the ones'
// zero padding, are zeroed first as in pickLane0, so that an infinity
// there cannot make 0·∞ = NaN.

// spreadsLanes reports whether b, of a's rank, broadcasts along the last
// axis of a, whose storage holds that axis on the lanes.
func spreadsLanes(a, b *value, shape []int) bool {
	r := len(shape)
	if r == 0 || len(b.shape) != r || b.shape[r-1] != 1 || shape[r-1] == 1 || b.isConst {
		return false
	}
	ra, rb := a.root(), b.root()
	return ra.lay.shape != nil && eqInts(a.shape, ra.shape) && ra.lay.lane == r-1 &&
		rb.lay.shape != nil && eqInts(b.shape, rb.shape) && rb.lay.lane == r-1
}

// spreadLanes returns b [..., 1] spread to [..., C] for node n.
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
