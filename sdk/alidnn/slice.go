package alidnn

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// sliceNode compiles Slice of a computed tensor by constant starts, ends,
// axes and steps (a Slice of constants folds) as one pick per sliced axis
// (see select.go): whole 16-lane elements gathered by a permute layer, in
// the steps' order, negative ones included. A slice along the lanes, which
// would move values between them, is refused; so is an empty one.
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
		if v, err = c.selectAxis(fmt.Sprintf("Slice %q", n.Name), v, a, idx, to); err != nil {
			return err
		}
	}
	if v == x {
		v = &value{shape: x.shape, typ: x.typ, derived: derived{alias: x.root(), view: x.view, cols: x.cols}}
	}
	c.set(n, 0, v)
	return nil
}
