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
	if r == 1 && laneAxis(x) == 0 {
		return c.reduceVector(n, x, keep != 0)
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

// reduceVector compiles the reduction of a vector x [C] held on the lanes
// as that of the matrix [1, C] over its last axis, kept, reshaped to [1]
// or to a scalar: the lane reductions work on a tile's rows.
func (c *compiler) reduceVector(n *onnx.Node, x *value, keep bool) error {
	out := n.Outputs[0]
	p := out + "/vector/"
	c.vals[p+"row"] = constInt(p+"row", onnx.Int64, []int{2}, []int64{1, int64(x.shape[0])})
	var shape []int64
	if keep {
		shape = []int64{1}
	}
	c.vals[p+"out"] = constInt(p+"out", onnx.Int64, []int{len(shape)}, shape)
	uses := map[string]int{p + "m": 1, p + "r": 1}
	seq := []*onnx.Node{
		{OpType: "Reshape", Inputs: []string{n.Inputs[0], p + "row"}, Outputs: []string{p + "m"}},
		{OpType: n.OpType, Inputs: []string{p + "m"}, Outputs: []string{p + "lanes"}, Attrs: []*onnx.Attribute{
			{Name: "axes", Type: onnx.AttrInts, Ints: []int64{1}}, {Name: "keepdims", Type: onnx.AttrInt, I: 1}}},
	}
	seq = append(seq, c.pickLane0(p+"lanes", p+"r", x.shape[0], uses)...)
	seq = append(seq, &onnx.Node{OpType: "Reshape", Inputs: []string{p + "r", p + "out"}, Outputs: []string{out}})
	return c.runSeq(n, seq, uses)
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
