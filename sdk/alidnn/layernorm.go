package alidnn

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Layer normalisation over the last axis, which a transformer's tensors
// [N,S,C] hold on the lanes. The engine moves no value across lanes
// outside the GEMM array, so a mean over the lanes is a MatMul by the
// constant C×C matrix of 1/C: every lane of a row gets the row's mean, the
// mean broadcast to the row as the Sub, Add and Div after it read it. A
// ReduceMean over the last axis compiles so when what reads its result
// are element-wise operators whose results meet a tensor of the full width
// — the decomposition exporters write (ReduceMean, Sub, Pow 2, ReduceMean,
// Add ε, Sqrt, Div, Mul, Add), and RMSNorm's — and LayerNormalization
// (opset 17) becomes that sequence.

// laneWise are the element-wise operators a mean broadcast over the lanes
// may feed.
var laneWise = map[string]bool{"Add": true, "Sub": true, "Mul": true, "Div": true, "Pow": true, "Sqrt": true,
	"Neg": true, "Abs": true, "Exp": true, "Log": true, "Relu": true, "Sigmoid": true, "Tanh": true, "Erf": true}

// meanMatrix is the C×C matrix of 1/C, named name.
func meanMatrix(name string, C int) *value {
	f := make([]float32, C*C)
	for k := range f {
		f[k] = 1 / float32(C)
	}
	return constFloat(name, []int{C, C}, f)
}

// reduceMeanNode compiles ReduceMean of a computed tensor over its last
// axis, kept, as a MatMul by the mean matrix; its result holds C lanes
// where the graph declares one, so everything that reads it must be
// element-wise operators whose results meet a tensor of the full width
// (see broadcastsSafely).
func (c *compiler) reduceMeanNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	r := len(x.shape)
	axes, err := n.Ints("axes")
	if err != nil {
		return err
	}
	if len(n.Inputs) > 1 && n.Inputs[1] != "" {
		a, err := c.needConst(n, 1, "axes")
		if err != nil {
			return err
		}
		axes = a.ints()
	}
	keep, err := n.Int("keepdims", 1)
	if err != nil {
		return err
	}
	last := len(axes) == 1 && r > 0
	if last {
		a, err := normAxis(int(axes[0]), r)
		if err != nil {
			return err
		}
		last = a == r-1
	}
	if !last || keep != 1 {
		return fmt.Errorf("ReduceMean over axes %v (keepdims %d) of %s: only over the last axis, kept: %w", axes, keep, x, ErrUnsupported)
	}
	C := x.shape[r-1]
	if !c.broadcastsSafely(n.Outputs[0], C) {
		return fmt.Errorf("ReduceMean of %s over its last axis: only into element-wise operators that meet a tensor of %d values on that axis (a LayerNorm's), as the mean is held broadcast to them: %w", x, C, ErrUnsupported)
	}
	avg := n.Outputs[0] + "/avg"
	c.vals[avg] = meanMatrix(avg, C)
	return c.matmulNode(&onnx.Node{OpType: "MatMul", Name: n.Name, Inputs: []string{n.Inputs[0], avg}, Outputs: n.Outputs[:1]})
}

// broadcastsSafely reports whether the value name, whose last axis of 1
// the engine holds broadcast to C, is read only by element-wise operators
// (laneWise) whose results either meet a compiled operand of C values on
// the last axis — so they are what the graph declares — or are read so in
// turn; never by a graph output or a shape.
func (c *compiler) broadcastsSafely(name string, C int) bool {
	if c.outputs[name] {
		return false
	}
	for _, m := range c.g.Nodes {
		if !slices.Contains(m.Inputs, name) {
			continue
		}
		if !laneWise[m.OpType] || len(m.Outputs) != 1 {
			return false
		}
		meets := false
		for _, in := range m.Inputs {
			if v := c.vals[in]; in != name && v != nil && len(v.shape) > 0 && v.shape[len(v.shape)-1] == C && !v.isConst {
				meets = true
			}
		}
		if !meets && !c.broadcastsSafely(m.Outputs[0], C) {
			return false
		}
	}
	return true
}

// layerNormNode compiles LayerNormalization over the last axis as the
// sequence exporters write before opset 17: mean, difference, variance,
// its square root and the quotient, scaled and shifted.
func (c *compiler) layerNormNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	r := len(x.shape)
	axis, err := n.Int("axis", -1)
	if err != nil {
		return err
	}
	a, err := normAxis(int(axis), r)
	if err != nil {
		return err
	}
	if a != r-1 {
		return fmt.Errorf("LayerNormalization of %s from axis %d: only over the last axis: %w", x, axis, ErrUnsupported)
	}
	for k := 1; k < len(n.Outputs); k++ {
		if n.Outputs[k] != "" {
			return fmt.Errorf("LayerNormalization's output %d (Mean, InvStdDev) %q: only Y: %w", k, n.Outputs[k], ErrUnsupported)
		}
	}
	if _, err := c.needConst(n, 1, "Scale"); err != nil {
		return err
	}
	eps, err := n.Float("epsilon", 1e-5)
	if err != nil {
		return err
	}
	p := n.Outputs[0] + "/ln/"
	xn := n.Inputs[0]
	c.vals[p+"avg"] = meanMatrix(p+"avg", x.shape[r-1])
	c.vals[p+"two"] = constFloat(p+"two", nil, []float32{2})
	c.vals[p+"eps"] = constFloat(p+"eps", nil, []float32{eps})
	y := n.Outputs[0]
	seq := []*onnx.Node{
		{OpType: "MatMul", Inputs: []string{xn, p + "avg"}, Outputs: []string{p + "mean"}},
		{OpType: "Sub", Inputs: []string{xn, p + "mean"}, Outputs: []string{p + "d"}},
		{OpType: "Pow", Inputs: []string{p + "d", p + "two"}, Outputs: []string{p + "d2"}},
		{OpType: "MatMul", Inputs: []string{p + "d2", p + "avg"}, Outputs: []string{p + "var"}},
		{OpType: "Add", Inputs: []string{p + "var", p + "eps"}, Outputs: []string{p + "vare"}},
		{OpType: "Sqrt", Inputs: []string{p + "vare"}, Outputs: []string{p + "std"}},
		{OpType: "Div", Inputs: []string{p + "d", p + "std"}, Outputs: []string{p + "norm"}},
		{OpType: "Mul", Inputs: []string{p + "norm", n.Inputs[1]}, Outputs: []string{p + "scaled"}},
	}
	if len(n.Inputs) > 2 && n.Inputs[2] != "" {
		seq = append(seq, &onnx.Node{OpType: "Add", Inputs: []string{p + "scaled", n.Inputs[2]}, Outputs: []string{y}})
	} else {
		seq[len(seq)-1].Outputs[0] = y
	}
	// x is read twice where the node read it once, d twice: neither may
	// take a reader into its layer's epilogue.
	x.uses++
	c.uses[xn]++
	for _, m := range seq {
		for _, o := range m.Outputs {
			if o != y {
				c.uses[o] = 1
			}
		}
	}
	c.uses[p+"d"] = 2
	for _, m := range seq {
		m.Name = n.Name
		if o := m.Outputs[0]; o != y {
			m.Name += "/" + o[len(p):]
		}
		if err := c.node(m); err != nil {
			return fmt.Errorf("LayerNormalization %q as %s: %w", n.Name, m.OpType, err)
		}
	}
	return nil
}
