package alidnn

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// sliceNode compiles Slice of a computed tensor by constant starts, ends,
// axes and steps (a Slice of constants folds) as one pick per sliced axis
// (see select.go): whole 16-lane elements gathered by a permute layer, in
// the steps' order, negative ones included. A slice along the last axis
// where that is on the lanes moves values between them: it is a MatMul by
// a 0/1 selection matrix (see sliceLanes). An empty one is an empty
// constant (see empty.go).
func (c *compiler) sliceNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	lo, step, shape, err := c.sliceBounds(n, x.shape)
	if err != nil {
		return fmt.Errorf("Slice of %s: %w", x, err)
	}
	if slices.Contains(shape, 0) {
		c.set(n, 0, emptyValue(x.typ, shape))
		return nil
	}
	v := x
	for a := range shape {
		if shape[a] == x.shape[a] && step[a] == 1 {
			continue // the whole axis
		}
		idx := make([]int, shape[a])
		for k := range idx {
			idx[k] = lo[a] + k*step[a]
		}
		to := slices.Clone(v.shape)
		to[a] = shape[a]
		picked, err := c.selectAxis(fmt.Sprintf("Slice %q", n.Name), v, a, idx, to)
		if errors.Is(err, errBetweenLanes) && a == len(shape)-1 && v.typ == onnx.Float {
			picked, err = c.sliceLanes(n, v, idx)
		}
		if err != nil {
			return err
		}
		v = picked
	}
	if v == x {
		v = &value{shape: x.shape, typ: x.typ, derived: derived{alias: x.root(), view: x.view, cols: x.cols}}
	}
	c.set(n, 0, v)
	return nil
}

// errBetweenLanes is selectAxis's refusal of a pick along the lanes.
var errBetweenLanes = errors.New("moves values between the lanes of its 16-lane blocks")

// sliceLanes compiles the slice of x along its last axis, on the lanes, at
// indices idx (any start, end and step, negative ones included) as x · E,
// E [d, m] 0/1 with E[idx[j], j] = 1, as the Split of GPT-2's fused QKV and
// BERT's pooler Gather regroup lanes (see where.go): each output a sum of
// one product by 1 and products by 0, exact for finite x (an infinity or
// NaN elsewhere in the row makes NaN, 0 × ∞; −0 comes out +0).
func (c *compiler) sliceLanes(n *onnx.Node, x *value, idx []int) (*value, error) {
	d, m := x.shape[len(x.shape)-1], len(idx)
	name := x.name
	if name == "" || c.vals[name] != x {
		// A pick along another axis made x: it needs a name to be read.
		name = fmt.Sprintf("%s/sliced%d", n.Outputs[0], len(c.vals))
		x.name = name
		c.vals[name] = x
		c.uses[name] = 1
	}
	e := make([]float32, d*m)
	for j, i := range idx {
		e[i*m+j] = 1
	}
	en, out := n.Outputs[0]+"/select", n.Outputs[0]+"/lanes"
	c.vals[en] = constFloat(en, []int{d, m}, e)
	c.uses[out] = 1
	if err := c.matmulNode(&onnx.Node{OpType: "MatMul", Name: n.Name, Inputs: []string{name, en}, Outputs: []string{out}}); err != nil {
		return nil, err
	}
	return c.vals[out], nil
}
