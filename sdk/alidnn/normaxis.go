package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// normFromAxis compiles LayerNormalization or RMSNormalization n of x over
// the axes from a, before the last: of rank 3 or more, and RMSNormalization
// of any rank, over those axes of x as it is stored (see normOverAxes),
// whose lanes need not hold a flattened view; a LayerNormalization of a
// matrix as the same normalisation over the last axis of x viewed as
// [outer, inner] — ONNX defines them so, the normalised axes flattened —
// its scale and bias viewed as [inner] and its outputs viewed back: Y as
// x, Mean and InvStdDev as x's leading axes and ones.
func (c *compiler) normFromAxis(n *onnx.Node, x *value, a int) error {
	if len(x.shape) >= 3 || n.OpType == "RMSNormalization" {
		return c.normOverAxes(n, x, a)
	}
	outer, inner := 1, 1
	for k, d := range x.shape {
		if k < a {
			outer *= d
		} else {
			inner *= d
		}
	}
	stats := append([]int(nil), x.shape[:a]...)
	for range x.shape[a:] {
		stats = append(stats, 1)
	}
	p := n.Outputs[0] + "/axis/"
	m := &onnx.Node{Name: n.Name, OpType: n.OpType}
	for _, at := range n.Attrs {
		if at.Name != "axis" {
			m.Attrs = append(m.Attrs, at) // the last axis, the default
		}
	}
	var seq []*onnx.Node
	uses := map[string]int{} // the views between, each read once
	view := func(in, out string, shape []int) {
		seq = append(seq, &onnx.Node{OpType: "Reshape", Inputs: []string{in, c.shapeConst(out+"/shape", shape)}, Outputs: []string{out}})
	}
	for k, in := range n.Inputs {
		if in == "" {
			m.Inputs = append(m.Inputs, "")
			continue
		}
		shape := []int{inner}
		if k == 0 {
			shape = []int{outer, inner}
		}
		name := fmt.Sprintf("%sin%d", p, k)
		view(in, name, shape)
		m.Inputs = append(m.Inputs, name)
		uses[name] = 1
	}
	seq = append(seq, m)
	for k, out := range n.Outputs {
		if out == "" {
			m.Outputs = append(m.Outputs, "")
			continue
		}
		name := fmt.Sprintf("%sout%d", p, k)
		m.Outputs = append(m.Outputs, name)
		uses[name] = 1
		shape := stats
		if k == 0 {
			shape = x.shape
		}
		view(name, out, shape)
	}
	return c.runSeq(n, seq, uses)
}
