package alidnn

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Operators that ONNX defines as functions of others compile as the
// sequence their function body writes, which the compiler maps already:
// exporters of older opsets write the same sequences themselves, so one
// path serves both (and the ONNX node tests' _expanded variants check it).

// functionNode compiles Gelu, Swish, Mish and RMSNormalization as their
// function bodies, CastLike as Cast and Reciprocal as the division of 1.
func (c *compiler) functionNode(n *onnx.Node) error {
	switch n.OpType {
	case "Gelu":
		return c.geluNode(n)
	case "Swish":
		return c.swishNode(n)
	case "Mish":
		return c.mishNode(n)
	case "RMSNormalization":
		return c.rmsNormNode(n)
	case "CastLike":
		return c.castLikeNode(n)
	case "Reciprocal":
		one := c.constScalar(n.Outputs[0]+"/reciprocal/one", 1)
		return c.runSeq(n, []*onnx.Node{{OpType: "Div", Inputs: []string{one, n.Inputs[0]}, Outputs: n.Outputs[:1]}}, nil)
	}
	return fmt.Errorf("operator %s: %w", n.OpType, ErrUnsupported)
}

// constScalar names a scalar constant of a sequence.
func (c *compiler) constScalar(name string, v float64) string {
	c.vals[name] = constFloat(name, nil, []float32{float32(v)})
	return name
}

// geluNode: x·(1 + erf(x/√2))/2, or with approximate "tanh"
// x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))/2, as the opset-20 function body.
func (c *compiler) geluNode(n *onnx.Node) error {
	approx, err := n.String("approximate", "none")
	if err != nil {
		return err
	}
	x, y, p := n.Inputs[0], n.Outputs[0], n.Outputs[0]+"/gelu/"
	one, half := c.constScalar(p+"one", 1), c.constScalar(p+"half", 0.5)
	var seq []*onnx.Node
	uses := map[string]int{x: 2, p + "inner": 1, p + "f": 1, p + "f1": 1, p + "xf": 1}
	switch approx {
	case "none":
		seq = []*onnx.Node{
			{OpType: "Mul", Inputs: []string{x, c.constScalar(p+"rsqrt2", 1/math.Sqrt2)}, Outputs: []string{p + "inner"}},
			{OpType: "Erf", Inputs: []string{p + "inner"}, Outputs: []string{p + "f"}},
		}
	case "tanh":
		seq = []*onnx.Node{
			{OpType: "Pow", Inputs: []string{x, c.constScalar(p+"three", 3)}, Outputs: []string{p + "x3"}},
			{OpType: "Mul", Inputs: []string{p + "x3", c.constScalar(p+"k", 0.044715)}, Outputs: []string{p + "kx3"}},
			{OpType: "Add", Inputs: []string{x, p + "kx3"}, Outputs: []string{p + "s"}},
			{OpType: "Mul", Inputs: []string{p + "s", c.constScalar(p+"c", math.Sqrt(2/math.Pi))}, Outputs: []string{p + "inner"}},
			{OpType: "Tanh", Inputs: []string{p + "inner"}, Outputs: []string{p + "f"}},
		}
		uses[x], uses[p+"x3"], uses[p+"kx3"], uses[p+"s"] = 3, 1, 1, 1
	default:
		return fmt.Errorf("Gelu's approximate %q: want none or tanh: %w", approx, ErrUnsupported)
	}
	seq = append(seq,
		&onnx.Node{OpType: "Add", Inputs: []string{p + "f", one}, Outputs: []string{p + "f1"}},
		&onnx.Node{OpType: "Mul", Inputs: []string{x, p + "f1"}, Outputs: []string{p + "xf"}},
		&onnx.Node{OpType: "Mul", Inputs: []string{p + "xf", half}, Outputs: []string{y}})
	return c.runSeq(n, seq, uses)
}

// swishNode: x·Sigmoid(αx), the gated form selfchain.go fuses.
func (c *compiler) swishNode(n *onnx.Node) error {
	alpha, err := n.Float("alpha", 1)
	if err != nil {
		return err
	}
	x, y, p := n.Inputs[0], n.Outputs[0], n.Outputs[0]+"/swish/"
	seq := []*onnx.Node{
		{OpType: "Mul", Inputs: []string{x, c.constScalar(p+"alpha", float64(alpha))}, Outputs: []string{p + "ax"}},
		{OpType: "Sigmoid", Inputs: []string{p + "ax"}, Outputs: []string{p + "s"}},
		{OpType: "Mul", Inputs: []string{x, p + "s"}, Outputs: []string{y}},
	}
	return c.runSeq(n, seq, map[string]int{x: 2, p + "ax": 1, p + "s": 1})
}

// mishNode: x·tanh(softplus(x)).
func (c *compiler) mishNode(n *onnx.Node) error {
	x, y, p := n.Inputs[0], n.Outputs[0], n.Outputs[0]+"/mish/"
	seq := []*onnx.Node{
		{OpType: "Softplus", Inputs: []string{x}, Outputs: []string{p + "sp"}},
		{OpType: "Tanh", Inputs: []string{p + "sp"}, Outputs: []string{p + "t"}},
		{OpType: "Mul", Inputs: []string{x, p + "t"}, Outputs: []string{y}},
	}
	return c.runSeq(n, seq, map[string]int{x: 2, p + "sp": 1, p + "t": 1})
}

// rmsNormNode compiles RMSNormalization (opset 23) over the last axis as
// x / √(mean(x²) + ε) · scale, the mean a lane reduction as
// LayerNormalization's (see layernorm.go).
func (c *compiler) rmsNormNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	axis, err := n.Int("axis", -1)
	if err != nil {
		return err
	}
	a, err := normAxis(int(axis), len(x.shape))
	if err != nil {
		return fmt.Errorf("RMSNormalization of %s: %w", x, err)
	}
	if a != len(x.shape)-1 {
		return c.normFromAxis(n, x, a)
	}
	if _, err := c.needConst(n, 1, "Scale"); err != nil {
		return err
	}
	eps, err := n.Float("epsilon", 1e-5)
	if err != nil {
		return err
	}
	hiddenLayout(x)
	xn, y, p := n.Inputs[0], n.Outputs[0], n.Outputs[0]+"/rms/"
	seq := []*onnx.Node{
		{OpType: "Pow", Inputs: []string{xn, c.constScalar(p+"two", 2)}, Outputs: []string{p + "x2"}},
		{OpType: "ReduceMean", Inputs: []string{p + "x2"}, Outputs: []string{p + "ms"}},
		{OpType: "Add", Inputs: []string{p + "ms", c.constScalar(p+"eps", float64(eps))}, Outputs: []string{p + "mse"}},
		{OpType: "Sqrt", Inputs: []string{p + "mse"}, Outputs: []string{p + "rms"}},
		{OpType: "Div", Inputs: []string{xn, p + "rms"}, Outputs: []string{p + "norm"}},
		{OpType: "Mul", Inputs: []string{p + "norm", n.Inputs[1]}, Outputs: []string{y}},
	}
	return c.runSeq(n, seq, map[string]int{xn: 2, p + "x2": 1, p + "ms": 1, p + "mse": 1, p + "rms": 1, p + "norm": 1})
}

// castLikeNode compiles CastLike as Cast to its second input's type.
func (c *compiler) castLikeNode(n *onnx.Node) error {
	like, err := c.need(n, 1)
	if err != nil {
		return err
	}
	m := &onnx.Node{Name: n.Name, OpType: "Cast", Inputs: n.Inputs[:1], Outputs: n.Outputs,
		Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(like.typ)}}}
	return c.node(m)
}

// hiddenLayout lays out a graph input that a normalisation over its last
// axis reads first as a MatMul reads one (see matmulNode), that axis on the
// lanes as a transformer's hidden states, rather than as an image of rank 3
// or 4 with axis 1 on them, over which the lane mean could not run.
func hiddenLayout(x *value) {
	if r := x.root(); r.input && r.lay.shape == nil && eqInts(x.shape, r.shape) {
		r.lay = matLayout(r.shape)
	}
}
