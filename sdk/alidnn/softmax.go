package alidnn

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Softmax over the last axis on the engine, which holds that axis on the
// lanes: the ALU works lane by lane, so what crosses lanes is a MatMul by
// constant matrices. The row maximum takes steps, each the maximum of the
// running one and the lanes of a butterfly (see laneMaxSeq and butterfly: a
// 0/1 matrix with one 1 a column, exact in fp32 for finite values: one
// product by 1 and sums of zeros), after which every lane holds its
// row's maximum, the padding lanes never entering; then
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
	uses[xn]++ // and the Sub; what the maximum's steps read of it, they counted
	// In int8 models the maximum's MatMuls stay fp32 too: a masked row's
	// −MaxFloat32 would set a per-tensor int8 scale that rounds every
	// other score to 0, leaving each lane its own maximum; and quantising
	// the running maximum before each step costs a pass and a load of the
	// scores, more than the fp32 products of a permutation's one block a
	// column.
	pv := c.normalizesLater(n, x)
	late := pv != nil
	if late {
		seq = seq[:len(seq)-2] // the sum after e's quantisation, the Div after the MatMul (see lateNorm)
	}
	keep := c.keepFP32
	c.keepFP32 = true
	err = c.runSeq(n, seq, uses)
	c.keepFP32 = keep
	if err != nil || !late {
		return err
	}
	if err := c.softmaxInt8(p+"e", pv); err != nil {
		return err
	}
	if err := c.laneReduce(&onnx.Node{OpType: "ReduceSum", Name: n.Name + "/sum", Inputs: []string{p + "e"}, Outputs: []string{p + "sum"}}); err != nil {
		return err
	}
	sum := c.vals[p+"sum"]
	if sum.block == nil {
		// The row sum is held on every lane (one block or two): the Div
		// as before.
		return c.node(&onnx.Node{OpType: "Div", Name: n.Name + "/div", Inputs: []string{p + "e", p + "sum"}, Outputs: []string{y}})
	}
	c.vals[y] = c.vals[p+"e"]
	if c.lateNorm == nil {
		c.lateNorm = map[string]*value{}
	}
	c.lateNorm[y] = sum.block
	return nil
}

// softmaxInt8 quantises, in a post-training-quantised model, the
// unnormalised Softmax e (e^(x − max), in [0, 1] with 1 in every row) in
// its own layer at the scale 1/127, for the int8 MatMul by V and its row
// sums, which the int32 accumulator then adds exactly: the normalisation
// divides the product of the quantised e by their own sum. Elsewhere e
// stays fp32, and where the MatMul pv stays fp32 (WithFloatNodes).
func (c *compiler) softmaxInt8(name string, pv *onnx.Node) error {
	e := c.vals[name]
	l := e.layer
	if !c.opts.int8 || c.keepFP32 || c.opts.floatNodes[pv.Name] || l == nil || l.out != e || !l.accFP || !l.takesSteps() {
		return nil
	}
	v := c.quantizeStep(l, fill(e.lay.c(), 1.0/127), 0, onnx.Int8)
	v.name, v.uses = e.name, e.uses
	c.vals[name] = v
	return nil
}

// normalizesLater returns the one MatMul reading Softmax n, as its A,
// when the division of e^(x − max) by the row sums can follow it:
// attention's softmax·V is (e·V) / sum, whose division runs over the
// context's D lanes where the probabilities have the S keys' (FlashAttention
// defers it so): one ALU pass of a GEMM's epilogue on [S, D] for a move
// layer's load and pass on [S, S]. Only over more than two blocks of
// lanes, where the sums are a block of lanes (see laneblock.go); nil
// otherwise.
func (c *compiler) normalizesLater(n *onnx.Node, x *value) *onnx.Node {
	y := n.Outputs[0]
	if x.shape[len(x.shape)-1] <= 2*lanes || c.outputs[y] || c.dataReaders(y) != 1 {
		return nil
	}
	for _, m := range c.g.Nodes {
		if slices.Contains(m.Inputs, y) {
			if m.OpType == "MatMul" && len(m.Inputs) == 2 && m.Inputs[0] == y && m.Inputs[1] != y {
				return m
			}
			return nil
		}
	}
	return nil
}

// lateNormMatMul compiles MatMul n whose A is a Softmax left unnormalised
// (see normalizesLater): the product of e^(x − max), then its division by
// the row sums, read as a block of lanes.
func (c *compiler) lateNormMatMul(n *onnx.Node, sum *value) error {
	y := n.Outputs[0]
	raw := y + "/unnormalised"
	c.uses[raw] = 1
	m := &onnx.Node{OpType: n.OpType, Name: n.Name, Attrs: n.Attrs, Inputs: n.Inputs, Outputs: []string{raw}}
	if err := c.matmulFamily(m); err != nil {
		return err
	}
	prod := c.vals[raw]
	// An int8 sum (see softmaxInt8) dequantises in its own layer.
	if err := c.settle(sum, false); err != nil {
		return err
	}
	s := y + "/sums"
	c.vals[s] = &value{name: s, shape: prod.shape, typ: prod.typ, uses: 1, derived: derived{block: sum}}
	c.uses[s] = 1
	return c.node(&onnx.Node{OpType: "Div", Name: n.Name + "/normalise", Inputs: []string{raw, s}, Outputs: []string{y}})
}

// laneMaxSeq writes the row maximum of in, C values on the lanes and
// finite, into every lane of its row. It returns the nodes, named from p,
// and the maximum's name, counting the reads of what they read in uses.
// Within 16-lane blocks they are butterflies (s = 1 … 8), each a MatMul of
// one weight block a column. Over more than one block, the row's blocks
// are first folded into one by the ALU's lane-wise maximum (see
// blockmax.go), its 16 lanes then reduced by butterflies one block wide,
// and that block, each lane the row's maximum, read for every block of
// the row's C lanes (a block of lanes, see laneblock.go): butterflies
// over the full width would cost each a MatMul of the whole row. All are
// maxima and products by 1 with sums of zeros, exact.
func (c *compiler) laneMaxSeq(p, in string, C int, uses map[string]int) ([]*onnx.Node, string) {
	var seq []*onnx.Node
	steps := func(m, tag string, width int) string {
		for s := 1; s < width && s < lanes; s *= 2 {
			rot := fmt.Sprintf("%s%srot%d", p, tag, s)
			c.vals[rot+"/w"] = constFloat(rot+"/w", []int{width, width}, butterfly(width, s))
			mx := fmt.Sprintf("%s%smax%d", p, tag, s)
			seq = append(seq,
				&onnx.Node{OpType: "MatMul", Inputs: []string{m, rot + "/w"}, Outputs: []string{rot}},
				&onnx.Node{OpType: "Max", Inputs: []string{m, rot}, Outputs: []string{mx}})
			uses[rot], uses[m] = 1, 2
			m = mx
		}
		return m
	}
	if C <= lanes {
		return seq, steps(in, "", C)
	}
	seq = append(seq, &onnx.Node{OpType: blockMaxOp, Inputs: []string{in}, Outputs: []string{p + "blocks"}})
	uses[in] = 1
	mb := steps(p+"blocks", "blocks/", lanes)
	seq = append(seq, &onnx.Node{OpType: laneBlockOp, Inputs: []string{mb}, Outputs: []string{p + "rowmax"},
		Attrs: []*onnx.Attribute{{Name: "lanes", Type: onnx.AttrInt, I: int64(C)}}})
	uses[mb] = 1
	return seq, p + "rowmax"
}

// butterfly is step s (1, 2, 4, …) of the row maximum over C lanes: the
// C×C matrix that gives lane j the value of lane j XOR s, its partner in
// the group of 2s lanes. Each lane holds the maximum of its group of s
// before the step, so of its group of 2s after it. A partner beyond the
// row is replaced by the first lane of the partner's group of s, which
// holds that group's maximum, or by j itself when the whole group lies
// beyond. The partners of a 16-lane block lie in one block (two at the
// row's end), which is all the array multiplies (see blockLists): a
// rotation's would span two.
func butterfly(C, s int) []float32 {
	w := make([]float32, C*C)
	for j := range C {
		p := j ^ s
		if p >= C {
			p &^= s - 1
		}
		if p >= C {
			p = j
		}
		w[p*C+j] = 1
	}
	return w
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
