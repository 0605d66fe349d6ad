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
// root) run on that one block, and where it meets the full tensor the ALU
// reads the block for each block of C (see laneOperand). A reduction is
// held so when every reader can read it so (see blockReaders); others
// keep the copy to every lane (see laneMatMuls).

// blockReaders reports whether name, a reduction of a tensor of shape
// over its last axis, is read only by element-wise operators (laneWise)
// that can read it as one block: with constants that do not vary along
// the last axis and other such blocks, their result a block too whose
// readers are checked in turn; or with a computed tensor of shape laid
// out as full (lane axis last), as an Add's or a Mul's operand or a Sub's
// or a Div's second. Never by a graph output or a shape. The readers are
// the graph's nodes and those of the sequence compiling (see
// layerNormNode); a value no node reads (a sequence's the compiler does
// not know) is not held so.
func (c *compiler) blockReaders(name string, shape []int) bool {
	if c.outputs[name] || c.reduced[name] {
		return false
	}
	read := false
	for _, m := range slices.Concat(c.g.Nodes, c.seq) {
		if !slices.Contains(m.Inputs, name) {
			continue
		}
		read = true
		if !laneWise[m.OpType] || len(m.Outputs) != 1 {
			return false
		}
		full := false
		for k, in := range m.Inputs {
			v := c.vals[in]
			switch {
			case in == name || v != nil && v.block != nil:
			case v == nil:
				return false // not compiled yet: another reduction's
			case v.isConst:
				if r := len(v.shape); r > 0 && v.shape[r-1] != 1 || !v.isFloat() {
					return false
				}
			case eqInts(v.shape, shape) && c.spreadFits(v):
				if full || !meetsBlock(m.OpType, k) {
					return false
				}
				full = true
			default:
				return false
			}
		}
		if !full && !c.blockReaders(m.Outputs[0], shape) {
			return false
		}
	}
	return read
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
// matrix all of v, whose 16 columns each give the row's sum of products,
// the sum laneMatMuls' first column gives, term for term. The block has no
// padding lanes: its value stands in all 16, finite wherever the row's is,
// so what divides by it (a LayerNorm's standard deviation) stays so in the
// full tensor's padding lanes too.
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

// blockNode compiles n, an element-wise operator reading a block of lanes
// (see blockReaders), and reports whether it did: on the blocks alone
// when no full-width tensor meets them, its result a block; else as a
// step of the full tensor's layer reading the block (see laneOperand).
func (c *compiler) blockNode(n *onnx.Node) (bool, error) {
	if !laneWise[n.OpType] || !slices.ContainsFunc(n.Inputs, func(in string) bool { v := c.vals[in]; return v != nil && v.block != nil }) {
		return false, nil
	}
	on := &onnx.Node{Name: n.Name, OpType: n.OpType, Attrs: n.Attrs, Inputs: slices.Clone(n.Inputs), Outputs: []string{n.Outputs[0] + "/block"}}
	var shape []int
	full := -1
	for k, in := range n.Inputs {
		v := c.vals[in]
		switch {
		case v == nil:
		case v.block != nil:
			on.Inputs[k] = v.block.name
			shape = v.shape
		case !v.isConst:
			full = k
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
