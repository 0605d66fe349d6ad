package alidnn

import (
	"fmt"
	"math"
	"strings"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Softmax over the last axis on the engine, which holds that axis on the
// lanes: the ALU works lane by lane, so what crosses lanes is a MatMul by
// a constant C×C matrix. The row maximum takes ⌈log₂ C⌉ steps, each the
// maximum of the running one and itself rotated by 1, 2, 4, … lanes (a
// permutation matrix, exact in fp32 for finite values: one product by 1
// and sums of zeros), after which every lane holds the maximum of C
// consecutive lanes — its row's, the padding lanes never entering; then
// e^(x − max), its row sum by the matrix of ones (see laneReduce), and the
// quotient. A −Inf (a mask's) is first raised to −MaxFloat32, whose
// product by the permutation's zeros is 0 where −Inf's would be NaN, and
// whose e^(x − max) is 0 as −Inf's is; +Inf gives NaN, as in float64.

// softmaxNode compiles Softmax: on the host when only graph outputs read
// it, else on the engine over the last axis.
func (c *compiler) softmaxNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	axis, err := n.Int("axis", -1)
	if err != nil {
		return err
	}
	if c.opset() < 13 && axis == -1 {
		axis = 1
	}
	r := len(x.shape)
	a, err := normAxis(int(axis), r)
	if err != nil {
		return err
	}
	if c.dataReaders(n.Outputs[0]) == 0 {
		c.set(n, 0, &value{shape: x.shape, typ: x.typ, derived: derived{host: &hostOp{op: "Softmax", axis: a, src: x}}})
		if c.opset() < 13 {
			c.vals[n.Outputs[0]].host.op = "Softmax-1" // flattens from axis
		}
		return nil
	}
	if a != r-1 {
		return fmt.Errorf("Softmax %q of %s over axis %d, which other operators read: on the engine only over the last axis: %w", n.Name, x, a, ErrUnsupported)
	}
	// The clamp below is an fp32 constant; a post-training-quantised
	// producer dequantises first.
	if err := c.settle(x, false); err != nil {
		return err
	}
	C := x.shape[r-1]
	p := n.Outputs[0] + "/softmax/"
	c.vals[p+"lo"] = constFloat(p+"lo", nil, []float32{-math.MaxFloat32})
	xn := p + "x"
	seq := []*onnx.Node{{OpType: "Max", Inputs: []string{n.Inputs[0], p + "lo"}, Outputs: []string{xn}}}
	uses := map[string]int{}
	rots, m := c.laneMaxSeq(p, xn, C, uses)
	seq = append(seq, rots...)
	y := n.Outputs[0]
	seq = append(seq,
		&onnx.Node{OpType: "Sub", Inputs: []string{xn, m}, Outputs: []string{p + "d"}},
		&onnx.Node{OpType: "Exp", Inputs: []string{p + "d"}, Outputs: []string{p + "e"}},
		&onnx.Node{OpType: "ReduceSum", Inputs: []string{p + "e"}, Outputs: []string{p + "sum"}},
		&onnx.Node{OpType: "Div", Inputs: []string{p + "e", p + "sum"}, Outputs: []string{y}})
	uses[m], uses[p+"d"], uses[p+"e"], uses[p+"sum"] = 1, 1, 2, 1
	if C > 1 {
		uses[xn] = 3
	} else {
		uses[xn] = 1
	}
	// In int8 models the rotations stay fp32 too: a masked row's
	// −MaxFloat32 sets a per-tensor int8 scale that rounds every other
	// score to 0, leaving each lane its own maximum.
	keep := c.keepFP32
	c.keepFP32 = true
	err = c.runSeq(n, seq, uses)
	c.keepFP32 = keep
	return err
}

// laneMaxSeq writes the row maximum of in, C values on the lanes and
// finite, into every lane of its row: ⌈log₂ C⌉ maxima of the running one
// and itself rotated by 1, 2, 4, … lanes (a permutation MatMul). It
// returns the nodes, named from p, and the maximum's name, counting the
// reads of what they read in uses.
func (c *compiler) laneMaxSeq(p, in string, C int, uses map[string]int) ([]*onnx.Node, string) {
	var seq []*onnx.Node
	m := in
	for s := 1; s < C; s *= 2 {
		rot := fmt.Sprintf("%srot%d", p, s)
		w := make([]float32, C*C)
		for j := range C {
			w[(j+s)%C*C+j] = 1
		}
		c.vals[rot+"/w"] = constFloat(rot+"/w", []int{C, C}, w)
		mx := fmt.Sprintf("%smax%d", p, s)
		seq = append(seq,
			&onnx.Node{OpType: "MatMul", Inputs: []string{m, rot + "/w"}, Outputs: []string{rot}},
			&onnx.Node{OpType: "Max", Inputs: []string{m, rot}, Outputs: []string{mx}})
		uses[rot], uses[m] = 1, 2
		m = mx
	}
	return seq, m
}

// runSeq compiles the nodes seq standing for n — a ReduceMean or ReduceSum
// among them without axes over the last axis (see laneReduce), one with
// axes as the graph's (see reduceNode) — whose values are read
// uses times (n's input as often as seq reads it where n read it once), so
// none takes a reader into its layer's epilogue that another reads before
// it.
func (c *compiler) runSeq(n *onnx.Node, seq []*onnx.Node, uses map[string]int) error {
	for name, u := range uses {
		if v := c.vals[name]; v != nil {
			v.uses += u - 1
			c.uses[name] += u - 1
			continue
		}
		c.uses[name] = u
	}
	y := n.Outputs[0]
	for _, m := range seq {
		m.Name = n.Name
		if o := m.Outputs[0]; strings.HasPrefix(o, y+"/") {
			m.Name += "/" + o[len(y)+1:]
		}
		var err error
		if (m.OpType == "ReduceMean" || m.OpType == "ReduceSum") && m.Attr("axes") == nil {
			err = c.laneReduce(m)
		} else {
			err = c.node(m)
		}
		if err != nil {
			return fmt.Errorf("%s %q as %s: %w", n.OpType, n.Name, m.OpType, err)
		}
	}
	return nil
}
