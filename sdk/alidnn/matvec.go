package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// matmulVectors compiles a MatMul with a constant B and a rank-1 operand as
// numpy defines it: a vector A is the row [1,K], a vector B the column
// [K,1], and the unit axis each adds is dropped from the product. The
// reshapes are views (a constant's fold), so the engine runs the MatMul of
// matrices it maps already; a vector by stacks of B, see vectorByStacks.
func (c *compiler) matmulVectors(n *onnx.Node, a, b *value) error {
	if len(a.shape) == 1 && len(b.shape) > 2 {
		return c.vectorByStacks(n, a, b)
	}
	as, bs := a.shape, b.shape
	if len(as) == 1 {
		as = []int{1, as[0]}
	}
	if len(bs) == 1 {
		bs = []int{bs[0], 1}
	}
	lead, err := broadcastShape(as[:len(as)-2], bs[:len(bs)-2])
	if err != nil {
		return fmt.Errorf("MatMul of %v and %v: %w", a.shape, b.shape, err)
	}
	out := append(lead, as[len(as)-2:len(as)-1]...)
	if len(a.shape) == 1 {
		out = out[:len(out)-1]
	}
	if len(b.shape) > 1 {
		out = append(out, bs[len(bs)-1])
	}
	y, p := n.Outputs[0], n.Outputs[0]+"/vec/"
	ins := []string{n.Inputs[0], n.Inputs[1]}
	var seq []*onnx.Node
	for k, s := range [][]int{as, bs} {
		if len(s) == len([]*value{a, b}[k].shape) {
			continue // a matrix already
		}
		name := fmt.Sprintf("%s%d", p, k)
		seq = append(seq, &onnx.Node{OpType: "Reshape", Inputs: []string{ins[k], c.shapeConst(name+"shape", s)}, Outputs: []string{name}})
		ins[k] = name
	}
	seq = append(seq,
		&onnx.Node{OpType: "MatMul", Inputs: ins, Outputs: []string{p + "prod"}},
		&onnx.Node{OpType: "Reshape", Inputs: []string{p + "prod", c.shapeConst(p+"shape", out)}, Outputs: []string{y}})
	return c.runSeq(n, seq, map[string]int{p + "0": 1, p + "1": 1, p + "prod": 1})
}

// shapeConst names an INT64 constant holding shape, a Reshape's target.
func (c *compiler) shapeConst(name string, shape []int) string {
	v := make([]int64, len(shape))
	for k, d := range shape {
		v[k] = int64(d)
	}
	c.vals[name] = constInt(name, onnx.Int64, []int{len(v)}, v)
	return name
}

// vectorByStacks compiles a vector A [K] by a constant stack B [S..., K, N]
// as one MatMul of the row [1, K] by B's matrices side by side, [K, S·N]
// (A's one row would otherwise repeat for every matrix), its product
// viewed as [S..., N].
func (c *compiler) vectorByStacks(n *onnx.Node, a, b *value) error {
	r := len(b.shape)
	K, N := b.shape[r-2], b.shape[r-1]
	if a.shape[0] != K {
		return fmt.Errorf("MatMul of %v and %v: inner dimensions %d and %d differ", a.shape, b.shape, a.shape[0], K)
	}
	S := size(b.shape[:r-2])
	bf := b.floats()
	w := make([]float32, K*S*N)
	for s := range S {
		for k := range K {
			copy(w[k*S*N+s*N:][:N], bf[(s*K+k)*N:][:N])
		}
	}
	y, p := n.Outputs[0], n.Outputs[0]+"/vec/"
	c.vals[p+"w"] = constFloat(p+"w", []int{K, S * N}, w)
	out := append(append([]int(nil), b.shape[:r-2]...), N)
	seq := []*onnx.Node{
		{OpType: "Reshape", Inputs: []string{n.Inputs[0], c.shapeConst(p+"0shape", []int{1, K})}, Outputs: []string{p + "0"}},
		{OpType: "MatMul", Inputs: []string{p + "0", p + "w"}, Outputs: []string{p + "prod"}},
		{OpType: "Reshape", Inputs: []string{p + "prod", c.shapeConst(p+"shape", out)}, Outputs: []string{y}},
	}
	return c.runSeq(n, seq, map[string]int{p + "0": 1, p + "prod": 1})
}
