package alidnn

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Layer normalisation over the last axis, which a transformer's tensors
// [N,S,C] hold on the lanes. The engine moves no value across lanes
// outside the GEMM array, so a mean over the lanes is a MatMul by
// constants (of 1/C, see laneReduce): every lane of a row gets the row's mean, the
// mean broadcast to the row as the Sub, Add and Div after it read it (see
// laneReduce). A
// ReduceMean over the last axis compiles so when what reads its result
// are element-wise operators whose results meet a tensor of the full width
// — the decomposition exporters write (ReduceMean, Sub, Pow 2, ReduceMean,
// Add ε, Sqrt, Div, Mul, Add), and RMSNorm's — and LayerNormalization
// (opset 17) becomes that sequence (see reduce.go; other readers get the
// reduced tensor, see picklane.go).

// laneWise are the element-wise operators a mean broadcast over the lanes
// may feed.
var laneWise = map[string]bool{"Add": true, "Sub": true, "Mul": true, "Div": true, "Pow": true, "Sqrt": true,
	"Neg": true, "Abs": true, "Exp": true, "Log": true, "Relu": true, "Sigmoid": true, "Tanh": true, "Erf": true}

// laneReduce compiles m, a ReduceMean or ReduceSum of its input over the
// last axis, as a MatMul by constants after which every lane of a row
// holds the row's mean or sum: over one or two blocks of lanes, or an x
// not laid out as matrices (a normalisation's view from an earlier axis,
// whose result the layouts after it decide), one MatMul by the C×C
// matrix of v; over more, one block of lanes (see laneBlock), copied to
// every lane where a graph output or a normalisation's statistic needs
// the tensor the graph declares (see unblock). The padding lanes of a
// result on every lane, which the matrix leaves 0, are made 1, so what
// divides by them (a LayerNorm's standard deviation, a Softmax's sum)
// stays finite there, as a MatMul reading the quotient needs (0 × Inf is
// NaN). It runs in fp32 in int8 models too.
func (c *compiler) laneReduce(m *onnx.Node) error {
	if c.isBlock(m.Inputs[0]) {
		if err := c.unblock(m.Inputs[0]); err != nil {
			return err
		}
	}
	x, err := c.need(m, 0)
	if err != nil {
		return err
	}
	C := x.shape[len(x.shape)-1]
	v := float32(1)
	if m.OpType == "ReduceMean" {
		v = 1 / float32(C)
	}
	// In int8 models the mean or sum stays fp32: a per-tensor int8 scale
	// set by the largest rows rounds a row of small values (a ViT's class
	// token beside its patches) to a few steps, and the variance of those
	// to about 0, which the normalisation then divides by; a ViT's
	// Softmax sums lose its class token's attention so too. An int8 x (a
	// Softmax's e^(x − max) at 1/127, see softmaxInt8) sums exactly in
	// the int32 accumulator.
	keep := c.keepFP32
	c.keepFP32 = x.el() != i8
	defer func() { c.keepFP32 = keep }()
	out := m.Outputs[0]
	if C > 2*lanes && x.lay.equal(matLayout(x.shape)) {
		if err := c.laneBlock(m, x, v); err != nil {
			return err
		}
		if c.outputs[out] || c.reduced[out] {
			return c.unblock(out)
		}
		return nil
	}
	w := out + "/lanes"
	c.vals[w] = constFloat(w, []int{C, C}, fill(C*C, v))
	if err := c.matmulNode(&onnx.Node{OpType: "MatMul", Name: m.Name, Inputs: []string{m.Inputs[0], w}, Outputs: m.Outputs[:1]}); err != nil {
		return err
	}
	return c.padLanes(c.vals[out], fmt.Sprintf("%s %q of %s", m.OpType, m.Name, x))
}

// padLanes makes 1 the padding lanes of y, a lane reduction on every lane
// that its layer has just written (see laneReduce); what names it in
// errors.
func (c *compiler) padLanes(y *value, what string) error {
	l := y.layer
	if l == nil || l.out != y || y.lay.lane != len(y.shape)-1 {
		return fmt.Errorf("%s: the MatMul by constants does not hold the last axis on the lanes: %w", what, ErrUnsupported)
	}
	pad := make([]float32, y.lay.cb()*lanes)
	for k := y.shape[len(y.shape)-1]; k < len(pad); k++ {
		pad[k] = 1
	}
	l.steps = append(l.steps, step{kind: sAddRow, fp: true, rowF: pad})
	return nil
}

// broadcastsSafely reports whether the value name, whose last axis of 1
// the engine holds broadcast to C, is read only by element-wise operators
// (laneWise) whose results either meet a compiled operand of C values on
// the last axis — so they are what the graph declares — or are read so in
// turn; never by a graph output or a shape. Of two such values meeting,
// the one compiled first saw the other not yet compiled and followed their
// result.
func (c *compiler) broadcastsSafely(name string, C int) bool {
	return c.broadcastsSafelyAt(name, 1, C)
}

// broadcastsSafelyAt is broadcastsSafely for a value held broadcast to C
// along the axis fromEnd axes from the end (1 the last), as numpy aligns
// the shapes of an element-wise operator's operands.
func (c *compiler) broadcastsSafelyAt(name string, fromEnd, C int) bool {
	if c.outputs[name] || c.reduced[name] {
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
			if v := c.vals[in]; in != name && v != nil && len(v.shape) >= fromEnd && v.shape[len(v.shape)-fromEnd] == C && !v.isConst {
				meets = true
			}
		}
		if !meets && !c.broadcastsSafelyAt(m.Outputs[0], fromEnd, C) {
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
		return c.normFromAxis(n, x, a)
	}
	if _, err := c.needConst(n, 1, "Scale"); err != nil {
		return err
	}
	hiddenLayout(x)
	eps, err := n.Float("epsilon", 1e-5)
	if err != nil {
		return err
	}
	p := n.Outputs[0] + "/ln/"
	xn := n.Inputs[0]
	c.vals[p+"two"] = constFloat(p+"two", nil, []float32{2})
	c.vals[p+"eps"] = constFloat(p+"eps", nil, []float32{eps})
	y := n.Outputs[0]
	seq := []*onnx.Node{
		{OpType: "ReduceMean", Inputs: []string{xn}, Outputs: []string{p + "mean"}},
		{OpType: "Sub", Inputs: []string{xn, p + "mean"}, Outputs: []string{p + "d"}},
		{OpType: "Pow", Inputs: []string{p + "d", p + "two"}, Outputs: []string{p + "d2"}},
		{OpType: "ReduceMean", Inputs: []string{p + "d2"}, Outputs: []string{p + "var"}},
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
	uses := map[string]int{xn: 2, p + "d": 2, p + "mean": 1, p + "d2": 1, p + "var": 1, p + "vare": 1, p + "std": 1, p + "norm": 1, p + "scaled": 1}
	seq = append(seq, c.layerNormStats(n, x.shape[r-1], uses)...)
	return c.runSeq(n, seq, uses)
}

// layerNormStats writes LayerNormalization's optional outputs Mean and
// InvStdDev, [..., 1], which the sequence holds broadcast to every lane:
// pickLane0 reduces them to the one value the graph declares.
func (c *compiler) layerNormStats(n *onnx.Node, C int, uses map[string]int) []*onnx.Node {
	p := n.Outputs[0] + "/ln/"
	var seq []*onnx.Node
	if len(n.Outputs) > 1 && n.Outputs[1] != "" {
		seq = append(seq, c.pickLane0(p+"mean", n.Outputs[1], C, uses)...)
	}
	if len(n.Outputs) > 2 && n.Outputs[2] != "" {
		c.vals[p+"one"] = constFloat(p+"one", nil, []float32{1})
		seq = append(seq, &onnx.Node{OpType: "Div", Inputs: []string{p + "one", p + "std"}, Outputs: []string{p + "inv"}})
		uses[p+"std"]++
		seq = append(seq, c.pickLane0(p+"inv", n.Outputs[2], C, uses)...)
	}
	return seq
}
