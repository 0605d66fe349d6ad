package alidnn

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// reduceNode compiles ReduceMean, ReduceSum, ReduceMax and ReduceMin: as
// the identity when their axes are empty and noop_with_empty_axes is set,
// over other axes or not kept as reduceAxes folds them, and over the last
// axis, kept, where the lanes hold it, as a lane reduction — ReduceMean
// and ReduceSum MatMuls by constants of 1/C or of ones (see laneReduce),
// ReduceMax and ReduceMin permutation MatMuls (see laneExtreme). Its
// result holds C lanes where the graph declares one: as it is, for
// element-wise operators whose results meet a tensor of the full width
// (see broadcastsSafely), and reduced to one lane for any other reader.
func (c *compiler) reduceNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	if hostInt(x) {
		return c.reduceStagedInt(n, x)
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
	norm, err := reduceAxesOf(axes, r)
	if err != nil {
		return fmt.Errorf("%s of %s: %w", n.OpType, x, err)
	}
	if r == 0 || !slices.Equal(norm, []int{r - 1}) || keep != 1 || laneAxis(x) != r-1 {
		if r == 0 {
			return fmt.Errorf("%s of the scalar %s: %w", n.OpType, x, ErrUnsupported)
		}
		return c.reduceAxes(n, x, norm, keep != 0)
	}
	C := x.shape[r-1]
	if !c.broadcastsSafely(n.Outputs[0], C) {
		return c.reducePicked(n, C)
	}
	if n.OpType == "ReduceMax" || n.OpType == "ReduceMin" {
		return c.laneExtreme(n, x)
	}
	return c.laneReduce(n)
}

// reducePicked compiles a reduction over the last axis that something
// other than full-width element-wise operators reads (a graph output, a
// Reshape, a MatMul) as the broadcast reduction and pickLane0: the reduced
// tensor the graph declares.
func (c *compiler) reducePicked(n *onnx.Node, C int) error {
	lanes := n.Outputs[0] + "/reduce/lanes"
	m := &onnx.Node{Name: n.Name, OpType: n.OpType, Inputs: n.Inputs, Attrs: n.Attrs, Outputs: []string{lanes}}
	uses := map[string]int{}
	return c.runSeq(n, append([]*onnx.Node{m}, c.pickLane0(lanes, n.Outputs[0], C, uses)...), uses)
}

// reduceAxesOf normalises a reduction's axes over rank r: sorted, without
// repeats, all of them when none are given.
func reduceAxesOf(axes []int64, r int) ([]int, error) {
	var out []int
	for _, a := range axes {
		k, err := normAxis(int(a), r)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(axes) == 0 {
		for k := range r {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}
