package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// reduceNode compiles ReduceMean, ReduceSum, ReduceMax and ReduceMin: as
// the identity when their axes are empty and noop_with_empty_axes is set
// (opset 18's form, and ReduceSum's since 13), ReduceMean over the last axis
// as a lane reduction (see reduceMeanNode); the others are refused naming
// the axes, as the engine holds a lane reduction broadcast, not reduced.
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
	if n.OpType == "ReduceMean" {
		return c.reduceMeanNode(n, x, axes)
	}
	return fmt.Errorf("%s over axes %v of %s: only ReduceMean over the last axis: %w", n.OpType, axes, x, ErrUnsupported)
}
