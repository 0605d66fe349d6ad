package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// reduceNode compiles ReduceMean, ReduceSum, ReduceMax and ReduceMin: as
// the identity when their axes are empty and noop_with_empty_axes is set,
// and over the last axis, kept, as a lane reduction — ReduceMean and
// ReduceSum a MatMul by the matrix of 1/C or of ones (see laneReduce),
// ReduceMax and ReduceMin rotations (see laneExtreme). Its result holds C
// lanes where the graph declares one, so everything that reads it must be
// element-wise operators whose results meet a tensor of the full width
// (see broadcastsSafely): no graph output, no other axes.
func (c *compiler) reduceNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
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
	noop, err := n.Int("noop_with_empty_axes", 0)
	if err != nil {
		return err
	}
	if len(axes) == 0 && noop != 0 {
		c.set(n, 0, &value{shape: x.shape, typ: x.typ, derived: derived{alias: x.root(), view: x.view, cols: x.cols}})
		return nil
	}
	keep, err := n.Int("keepdims", 1)
	if err != nil {
		return err
	}
	r := len(x.shape)
	last := len(axes) == 1 && r > 0
	if last {
		a, err := normAxis(int(axes[0]), r)
		if err != nil {
			return fmt.Errorf("%s of %s: %w", n.OpType, x, err)
		}
		last = a == r-1
	}
	if !last || keep != 1 {
		return fmt.Errorf("%s over axes %v (keepdims %d) of %s: only over the last axis, kept: %w", n.OpType, axes, keep, x, ErrUnsupported)
	}
	C := x.shape[r-1]
	if !c.broadcastsSafely(n.Outputs[0], C) {
		return fmt.Errorf("%s of %s over its last axis: only into element-wise operators that meet a tensor of %d values on that axis (a LayerNorm's), as the result is held broadcast to them: %w", n.OpType, x, C, ErrUnsupported)
	}
	if n.OpType == "ReduceMax" || n.OpType == "ReduceMin" {
		return c.laneExtreme(n, x)
	}
	return c.laneReduce(n)
}
