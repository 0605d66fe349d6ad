package alidnn

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TensorFlow converters keep a model's NHWC interface and wrap the NCHW
// operators in Transposes: the graph input [N,H,W,C] goes through
// Transpose(0,3,1,2), and the last feature map through Transpose(0,2,3,1)
// to a graph output, or to a Flatten feeding the classifier's MatMul. The
// engine moves no data across lanes outside the GEMM array, so these
// Transposes cost nothing instead: inputs are packed and outputs unpacked on
// the host with the axes in the graph's order, and a flattened transpose
// permutes the rows of the MatMul's constant weights.

// transposeOf says a value is Transpose(src, perm), computed by the node
// named node: its axis k is src's axis perm[k].
type transposeOf struct {
	src  *value
	perm []int
	node string
}

// relabel is l with its axes renamed: axis a becomes to[a], in a tensor of
// the given shape. The device data stays where it is.
func (l layout) relabel(shape []int, to []int) layout {
	m := layout{shape: shape, lane: -1}
	for _, a := range l.outer {
		m.outer = append(m.outer, to[a])
	}
	if l.lane >= 0 {
		m.lane = to[l.lane]
	}
	for _, a := range l.rows {
		m.rows = append(m.rows, to[a])
	}
	return m
}

// invertPerm is the permutation undoing perm.
func invertPerm(perm []int) []int {
	inv := make([]int, len(perm))
	for k, a := range perm {
		inv[a] = k
	}
	return inv
}

// transposeData compiles a Transpose of x that reorders its data: a graph
// input read by nothing else (but Shape) is packed transposed on the host;
// other device tensors become a view that graph outputs and a Flatten into
// a MatMul or Gemm read as it is, and other readers have permuted on the
// engine (see permute.go), as is a Transpose of a reshaped tensor.
func (c *compiler) transposeData(n *onnx.Node, x *value, perm, shape []int) error {
	if x.input && x.alias == nil && x.bcast == nil && x.packed == nil && x.lay.shape == nil && c.dataReaders(x.name) == 1 && !c.outputs[x.name] {
		t := &value{shape: shape, typ: x.typ, device: device{input: true, elem: x.elem}, derived: derived{packed: &transposeOf{src: x, perm: perm}}}
		for k, in := range c.inputs {
			if in == x {
				c.inputs[k] = t
			}
		}
		c.set(n, 0, t)
		return nil
	}
	r := x.root()
	if !eqInts(x.shape, r.shape) || x.host != nil || x.cols != nil {
		return c.permuteNode(n, x, perm, shape)
	}
	c.set(n, 0, &value{shape: shape, typ: x.typ, q: r.q, derived: derived{alias: r, view: &transposeOf{src: r, perm: perm, node: n.Name}}})
	return nil
}

// consumers are the nodes reading the tensor name.
func (c *compiler) consumers(name string) []*onnx.Node {
	var out []*onnx.Node
	for _, m := range c.g.Nodes {
		if slices.Contains(m.Inputs, name) {
			out = append(out, m)
		}
	}
	return out
}

// dataReaders counts the nodes that read the data of the value name: all
// its consumers but Shape and Size.
func (c *compiler) dataReaders(name string) int {
	k := 0
	for _, n := range c.g.Nodes {
		if shapeOnly[n.OpType] {
			continue
		}
		for _, in := range n.Inputs {
			if in == name {
				k++
				break
			}
		}
	}
	return k
}

// readsView reports whether input k of n can be a transposed view: a
// Reshape, Flatten or Transpose of it, or a Shape, Size or Identity. Other
// readers have the view permuted on the engine first (see permute.go).
func readsView(n *onnx.Node, k int) bool {
	switch n.OpType {
	case "Shape", "Size":
		return true
	case "Identity", "Dropout", "Transpose", "Reshape", "Flatten":
		return k == 0
	}
	return false
}

// checkView refuses a flattened transposed view as input k of n unless n
// can read it: a MatMul or Gemm, or a Shape, Size or Identity.
func (c *compiler) checkView(n *onnx.Node, k int, v *value) error {
	switch {
	case shapeOnly[n.OpType] || (n.OpType == "Identity" || n.OpType == "Dropout") && k == 0:
		return nil
	case v.cols != nil && k == 0 && (n.OpType == "MatMul" || n.OpType == "Gemm"):
		return nil
	case v.cols != nil:
		return fmt.Errorf("%s flattens a transposed tensor, and %s cannot read it (a MatMul or Gemm can): %w", v, n.OpType, ErrUnsupported)
	}
	return nil
}

// transposeView compiles a Transpose of the transposed view x: the two
// compose, to the stored tensor itself when they cancel out (a converter's
// NHWC round trip) or only move unit axes, else to another view.
func (c *compiler) transposeView(n *onnx.Node, x *value, perm, shape []int) error {
	src := x.view.src
	q := make([]int, len(perm))
	for k, a := range perm {
		q[k] = x.view.perm[a]
	}
	last := -1
	for _, a := range q {
		if src.shape[a] == 1 {
			continue
		}
		if a < last {
			c.set(n, 0, &value{shape: shape, typ: x.typ, q: src.q, derived: derived{alias: src, view: &transposeOf{src: src, perm: q, node: n.Name}}})
			return nil
		}
		last = a
	}
	c.set(n, 0, aliasOf(src, shape, x.typ))
	return nil
}

// flattensView reports whether flattenView compiles x reshaped to shape.
func flattensView(x *value, shape []int) bool {
	return len(shape) == 2 && x.view.perm[0] == 0 && shape[0] == x.shape[0]
}

// flattenView compiles a Reshape or Flatten of the transposed view x to
// [N, rest] keeping the batch axis: the stored data, flattened, holds the
// same rows with the columns permuted, which the consuming MatMul undoes on
// its weights.
func (c *compiler) flattenView(n *onnx.Node, x *value, shape []int) error {
	perm := x.view.perm
	src := x.view.src
	st := rowMajorStrides(src.shape)
	cols := make([]int, 0, shape[1])
	idx := make([]int, len(x.shape))
	for range shape[1] {
		off := 0
		for k := 1; k < len(idx); k++ {
			off += idx[k] * st[perm[k]]
		}
		cols = append(cols, off)
		for k := len(idx) - 1; k >= 1; k-- {
			idx[k]++
			if idx[k] < x.shape[k] {
				break
			}
			idx[k] = 0
		}
	}
	c.set(n, 0, &value{shape: shape, typ: x.typ, q: src.q, derived: derived{alias: src, cols: cols}})
	return nil
}

// matmulCols compiles a MatMul or Gemm of a flattened transposed view: the
// stored column cols[j] is the logical column j, so B's row j (column j
// when transposed) moves to cols[j].
func (c *compiler) matmulCols(n *onnx.Node) error {
	a := c.vals[n.Inputs[0]]
	b, err := c.needConst(n, 1, "B")
	if err != nil {
		return err
	}
	transA, err := n.Int("transA", 0)
	if err != nil {
		return err
	}
	transB, err := n.Int("transB", 0)
	if err != nil {
		return err
	}
	if transA != 0 || len(b.shape) != 2 {
		return fmt.Errorf("%s of the flattened transposed tensor %s with transA %d and B %v: %w", n.OpType, a, transA, b.shape, ErrUnsupported)
	}
	K, M := b.shape[0], b.shape[1]
	if transB != 0 {
		K, M = M, K
	}
	if K != len(a.cols) {
		return fmt.Errorf("%s of %s by B %v", n.OpType, a, b.shape)
	}
	at := func(k, m int) int {
		if transB != 0 {
			return m*K + k
		}
		return k*M + m
	}
	idx := make([]int, K*M)
	for k, s := range a.cols {
		for m := range M {
			idx[at(s, m)] = at(k, m)
		}
	}
	pb := constIndex(b, b.shape, idx)
	pb.name, pb.isConst = b.name, true
	pa := &value{name: a.name, shape: a.shape, typ: a.typ, uses: a.uses, q: a.q, derived: derived{alias: a.alias}}
	c.vals[n.Inputs[0]], c.vals[n.Inputs[1]] = pa, pb
	err = c.matmulNode(n)
	c.vals[n.Inputs[0]], c.vals[n.Inputs[1]] = a, b
	return err
}

// inputBinding gives a graph input packed transposed the graph's name,
// shape and axis order.
func inputBinding(b Binding, v *value) Binding {
	if v.packed != nil {
		b.Name, b.Shape = v.packed.src.name, v.packed.src.shape
		b.Lay = v.lay.relabel(b.Shape, v.packed.perm).export()
	}
	return b
}

// outputBinding reads a graph output that is a transposed view in the
// graph's axis order.
func outputBinding(b Binding, v *value) Binding {
	if v.view != nil {
		b.Lay = v.view.src.lay.relabel(v.shape, invertPerm(v.view.perm)).export()
	}
	return b
}
