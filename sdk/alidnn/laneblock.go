package alidnn

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// A lane mean or sum over more than two blocks of lanes is held as one
// block of 16 lanes a row, each lane holding the row's value (a MatMul by
// the C×16 matrix all of v, see laneBlock), not copied to all C lanes by
// a second MatMul of 16×C, which cost a LayerNorm two fp32 MatMuls and
// the load of a C-wide tensor. The element-wise operators between the
// reduction and a tensor of the full width (a LayerNorm's ε and square
// root) run on that one block, and where it meets the full tensor (x −
// mean, d / std, a Softmax's e / sum) the ALU reads the block for each
// block of C (see laneOperand). A reader that cannot read a block (a graph output, a
// Reshape, an operand of other lanes) gets the copy to every lane, made
// as it comes (see unblock): the MatMuls of before.

// readsBlocks reports whether n, reading a block of lanes, can read its
// blocks so (and which input is the full-width tensor, −1 for none): an
// element-wise operator (laneWise) of blocks, constants that do not vary
// along the last axis, and at most one computed tensor of the blocks'
// shape laid out as theirs save the lanes, as an Add's or a Mul's
// operand or a Sub's or a Div's first (x − mean, d / std). Without one,
// its result is a block, which a graph output may not be.
func (c *compiler) readsBlocks(n *onnx.Node) (int, bool) {
	if !laneWise[n.OpType] || len(n.Outputs) != 1 {
		return -1, false
	}
	full := -1
	var shape []int
	for _, in := range n.Inputs {
		if v := c.vals[in]; v != nil && v.block != nil {
			shape = v.shape
		}
	}
	for k, in := range n.Inputs {
		v := c.vals[in]
		switch {
		case v == nil || v.block != nil:
		case v.isConst:
			if r := len(v.shape); r > 0 && v.shape[r-1] != 1 || !v.isFloat() {
				return -1, false
			}
		case full < 0 && eqInts(v.shape, shape) && c.spreadFits(v) && meetsBlock(n.OpType, k):
			full = k
		default:
			return -1, false
		}
	}
	out := n.Outputs[0]
	return full, full >= 0 || !c.outputs[out] && !c.reduced[out]
}

// meetsBlock reports whether operator op reads a full-width tensor as its
// input k against a block of lanes: as an Add's or a Mul's either operand,
// a Sub's or a Div's first (x − mean, d / std).
func meetsBlock(op string, k int) bool {
	return op == "Add" || op == "Mul" || (op == "Sub" || op == "Div") && k == 0
}

// spreadFits reports whether a block of lanes can be read against the
// computed tensor v, stored as it is with its last axis on the lanes as
// a matrix stack is (the block's layout, save its lanes).
func (c *compiler) spreadFits(v *value) bool {
	r := v.root()
	return !v.isConst && v.isFloat() && v.view == nil && v.host == nil && eqInts(v.shape, r.shape) && r.lay.equal(matLayout(v.shape))
}

// laneBlock compiles m, the reduction of x [..., C] over its lanes, each
// lane weighed v, as one block of 16 lanes a row: a MatMul by the C×16
// matrix all of v, 16·C products a row, where the one MatMul by the C×C
// matrix of v would spend C·C, as many as one of a transformer's
// projections (a LayerNorm's two means cost BERT-base a third of its
// multiply-accumulates so). Each of the 16 columns gives the row's sum,
// term for term the one MatMul's. The block has no padding lanes: its
// value stands in all 16, finite wherever the row's is, so what divides
// by it (a LayerNorm's standard deviation) stays so in the full tensor's
// padding lanes too.
func (c *compiler) laneBlock(m *onnx.Node, x *value, v float32) error {
	C := x.shape[len(x.shape)-1]
	out := m.Outputs[0]
	w, b := out+"/lanes", out+"/block"
	c.vals[w] = constFloat(w, []int{C, lanes}, fill(C*lanes, v))
	c.uses[b] = c.uses[out]
	if err := c.matmulNode(&onnx.Node{OpType: "MatMul", Name: m.Name, Inputs: []string{m.Inputs[0], w}, Outputs: []string{b}}); err != nil {
		return err
	}
	if y := c.vals[b]; y.layer == nil || y.layer.out != y || !y.lay.equal(matLayout(y.shape)) {
		return fmt.Errorf("%s %q of %s: the MatMul by constants does not hold the last axis on the lanes: %w", m.OpType, m.Name, x, ErrUnsupported)
	}
	c.set(m, 0, &value{shape: x.shape, typ: x.typ, derived: derived{block: c.vals[b]}})
	return nil
}

// laneBlockOp is the compiler's own operator that declares its input,
// one block of 16 lanes [..., 16] each holding its row's value (a row
// maximum's butterflies leave one), the block of lanes of a tensor
// [..., C], C its attribute "lanes". The dot keeps it apart from ONNX's
// operator names.
const laneBlockOp = "alidnn.LaneBlock"

// laneBlockNode compiles a laneBlockOp node: no layer, a value.
func (c *compiler) laneBlockNode(n *onnx.Node) error {
	b, err := c.need(n, 0)
	if err != nil {
		return err
	}
	C, err := n.Int("lanes", 0)
	if err != nil {
		return err
	}
	r := len(b.shape)
	if r < 2 || b.shape[r-1] != lanes || b.layer == nil || b.layer.out != b || !b.lay.equal(matLayout(b.shape)) {
		return fmt.Errorf("block of lanes %s: %w", b, ErrUnsupported)
	}
	shape := append(slices.Clone(b.shape[:r-1]), int(C))
	c.set(n, 0, &value{shape: shape, typ: b.typ, derived: derived{block: b}})
	return nil
}

// blockNode compiles n when it reads a block of lanes, and reports
// whether it did: on the blocks alone when no full-width tensor meets
// them, its result a block; else as a step of the full tensor's layer
// reading the block (see laneOperand). For a reader that cannot read them
// so (see readsBlocks), the blocks it reads are copied to every lane
// first, and n compiles as any node.
func (c *compiler) blockNode(n *onnx.Node) (bool, error) {
	if !slices.ContainsFunc(n.Inputs, c.isBlock) {
		return false, nil
	}
	full, ok := c.readsBlocks(n)
	if !ok {
		for _, in := range n.Inputs {
			if c.isBlock(in) {
				if err := c.unblock(in); err != nil {
					return true, err
				}
			}
		}
		return false, nil
	}
	on := &onnx.Node{Name: n.Name, OpType: n.OpType, Attrs: n.Attrs, Inputs: slices.Clone(n.Inputs), Outputs: []string{n.Outputs[0] + "/block"}}
	var shape []int
	for k, in := range n.Inputs {
		if c.isBlock(in) {
			shape = c.vals[in].shape
			on.Inputs[k] = c.vals[in].block.name
		}
	}
	if full < 0 {
		c.uses[on.Outputs[0]] = c.uses[n.Outputs[0]]
		if err := c.node(on); err != nil {
			return true, err
		}
		b := c.vals[on.Outputs[0]]
		c.set(n, 0, &value{shape: shape, typ: b.typ, derived: derived{block: b}})
		return true, nil
	}
	a, b := c.vals[n.Inputs[full]], c.vals[on.Inputs[1-full]]
	op := n.OpType
	if op == "Sub" {
		nb, err := c.negate(b)
		if err != nil {
			return true, err
		}
		b, op = nb, "Add"
	}
	return true, c.laneOperand(n, op, a, b)
}

// isBlock reports whether the value name is held as a block of lanes.
func (c *compiler) isBlock(name string) bool {
	v := c.vals[name]
	return v != nil && v.block != nil
}

// unblock replaces the block of lanes name [..., C] by its copy to every
// lane, for a reader that needs the full width: a MatMul by the 16×C
// matrix whose first row is ones, exact for finite values (a row holding
// ±Inf or NaN gives NaN, a zero times it, where the one MatMul gave ±Inf
// or NaN), and its padding lanes made 1, as laneReduce's.
func (c *compiler) unblock(name string) error {
	v := c.vals[name]
	C := v.shape[len(v.shape)-1]
	w := name + "/broadcast"
	c.vals[w] = constFloat(w, []int{lanes, C}, append(fill(C, 1), make([]float32, (lanes-1)*C)...))
	keep := c.keepFP32
	c.keepFP32 = true
	err := c.matmulNode(&onnx.Node{OpType: "MatMul", Name: w, Inputs: []string{v.block.name, w}, Outputs: []string{name}})
	c.keepFP32 = keep
	if err != nil {
		return err
	}
	return c.padLanes(c.vals[name], w)
}

// laneOperand compiles a op b for a computed tensor a [..., C] holding C
// on the lanes and b, one block of lanes [..., 16] each holding its row's
// value: a step of a's layer (or of a move after b's) that reads b's
// block for every block of a's lanes.
func (c *compiler) laneOperand(n *onnx.Node, op string, a, b *value) error {
	a, err := c.floatOperand(a)
	if err != nil {
		return err
	}
	l, err := c.openAfter(a, b)
	if err != nil {
		return err
	}
	if !l.accFP {
		return fmt.Errorf("%s of integer tensors: %w", op, ErrUnsupported)
	}
	full := l.out.lay
	r := b.root()
	tl := layout{shape: r.shape, outer: full.outer, lane: full.lane, rows: full.rows}
	if full.lane != len(full.shape)-1 || r.lay.shape == nil || !eqInts(r.lay.offsets(), tl.offsets()) || r.el() != f32 {
		return fmt.Errorf("%s of %s and the lanes of %s: %w", op, a, b, ErrUnsupported)
	}
	l.steps = append(l.steps, step{kind: rowKinds[op][1], fp: true, t: r, tlay: &tl, spread: true})
	c.set(n, 0, c.rename(l, a.typ))
	return nil
}
