package alidnn

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Reductions over axes other than the last alone. An axis that is not the
// lanes — an outer axis or a row axis — is folded as element-wise work on
// whole 16-lane elements: its slices are picked one by one (see
// selectAxis, a permute layer each) and combined by Add, Max or Min, so
// every lane keeps its own values and the sum, maximum or minimum is
// exact as the ALU's. The last axis, when it is reduced too, is then the
// lane reduction of reduceNode, kept or picked to one lane (see
// reducePicked), or, where the lanes hold an image's channels, a 1×1
// convolution (see chanReduce); a mean is the sum over the folded axes
// scaled before it. Lanes of another axis are refused.

// maxFoldPicks bounds the slices folded per axis: each is a layer, and a
// reduction over a long row axis (an image's pixels) belongs to the
// pooling layers rather than to hundreds of picks.
const maxFoldPicks = 64

// reduceFoldOps is the element-wise operator combining the slices of a
// reduced axis.
var reduceFoldOps = map[string]string{"ReduceSum": "Add", "ReduceMean": "Add", "ReduceMax": "Max", "ReduceMin": "Min"}

// reduceAxes compiles n, a reduction of x over the normalised, sorted
// axes, keepdims keep, where they are not the last axis alone, kept.
func (c *compiler) reduceAxes(n *onnx.Node, x *value, axes []int, keep bool) error {
	r := len(x.shape)
	p := n.Outputs[0] + "/reduce/"
	cur, shape := n.Inputs[0], slices.Clone(x.shape)
	folded, L := 1, laneAxis(x)
	for _, a := range axes {
		if a == L && L != 1 && L != r-1 {
			return fmt.Errorf("%s over axis %d of %s, which its layout holds on the lanes: the engine reduces lanes only of a tensor's last axis or an image's channels: %w", n.OpType, a, x, ErrUnsupported)
		}
		if a == L || shape[a] == 1 {
			continue
		}
		next, err := c.foldAxis(n, cur, a, fmt.Sprintf("%saxis%d/", p, a))
		if err != nil {
			return err
		}
		folded *= shape[a]
		cur, shape[a] = next, 1
	}
	if n.OpType == "ReduceMean" && folded > 1 {
		s := p + "scale"
		c.vals[s] = constFloat(s, nil, []float32{float32(1 / float64(folded))})
		if err := c.runSeq(n, []*onnx.Node{{OpType: "Mul", Inputs: []string{cur, s}, Outputs: []string{p + "mean"}}}, map[string]int{p + "mean": 1}); err != nil {
			return err
		}
		cur = p + "mean"
	}
	lane := L == r-1 && slices.Contains(axes, L)
	if L != r-1 && slices.Contains(axes, L) {
		var err error
		if cur, shape, err = c.reduceChanStep(n, x, cur, shape, keep); err != nil || cur == "" {
			return err
		}
	}
	switch {
	case lane && keep:
		// The last step is ReduceMean's own rule over the last axis,
		// which keeps the mean broadcast to the lanes where only
		// element-wise operators meeting the full width read it.
		return c.node(&onnx.Node{Name: n.Name, OpType: n.OpType, Inputs: []string{cur}, Outputs: n.Outputs[:1],
			Attrs: lastAxisKept()})
	case lane:
		C := shape[r-1]
		m := &onnx.Node{OpType: n.OpType, Inputs: []string{cur}, Outputs: []string{p + "lanes"}, Attrs: lastAxisKept()}
		uses := map[string]int{}
		seq := append([]*onnx.Node{m}, c.pickLane0(p+"lanes", p+"kept", C, uses)...)
		uses[p+"kept"] = 1
		if err := c.runSeq(n, seq, uses); err != nil {
			return err
		}
		cur, shape[r-1] = p+"kept", 1
	}
	if keep {
		return c.aliasAs(n, cur, shape)
	}
	var out []int
	for a, d := range shape {
		if !slices.Contains(axes, a) {
			out = append(out, d)
		}
	}
	return c.aliasAs(n, cur, out)
}

// laneAxis is the axis of x that the lanes hold: its storage's, or, for a
// value not laid out yet as itself (a graph input no operator has read, a
// view of another shape), the last, as a pick or a MatMul lays it out
// (matLayout).
func laneAxis(x *value) int {
	if r := x.root(); x.view == nil && x.cols == nil && r.lay.shape != nil && eqInts(r.lay.shape, x.shape) {
		return r.lay.lane
	}
	return len(x.shape) - 1
}

// lastAxisKept are the attributes of a reduction over the last axis, kept.
func lastAxisKept() []*onnx.Attribute {
	return []*onnx.Attribute{
		{Name: "axes", Type: onnx.AttrInts, Ints: []int64{-1}},
		{Name: "keepdims", Type: onnx.AttrInt, I: 1},
	}
}

// aliasAs makes n's output the value cur viewed as shape, a Reshape.
func (c *compiler) aliasAs(n *onnx.Node, cur string, shape []int) error {
	s := c.shapeConst(n.Outputs[0]+"/reduce/shape", shape)
	return c.node(&onnx.Node{Name: n.Name, OpType: "Reshape", Inputs: []string{cur, s}, Outputs: n.Outputs[:1]})
}

// foldAxis reduces the value cur along axis a, kept, as n's operator
// (reduceFoldOps) over its slices picked from the device, and returns the
// name of the result. p prefixes the names it makes.
func (c *compiler) foldAxis(n *onnx.Node, cur string, a int, p string) (string, error) {
	x := c.vals[cur]
	d := x.shape[a]
	if d > maxFoldPicks {
		return "", fmt.Errorf("%s over axis %d of %s: %d slices to fold, more than %d: %w", n.OpType, a, x, d, maxFoldPicks, ErrUnsupported)
	}
	to := slices.Clone(x.shape)
	to[a] = 1
	node := fmt.Sprintf("%s %q", n.OpType, n.Name)
	// x is read once per slice where the reduction read it once.
	x.uses += d - 1
	c.uses[cur] += d - 1
	picks := make([]string, d)
	for k := range picks {
		v, err := c.selectAxis(node, x, a, []int{k}, to)
		if err != nil {
			return "", err
		}
		picks[k] = fmt.Sprintf("%s%d", p, k)
		v.name, v.uses = picks[k], 1
		c.uses[picks[k]] = 1
		c.vals[picks[k]] = v
	}
	op := reduceFoldOps[n.OpType]
	acc := picks[0]
	var seq []*onnx.Node
	uses := map[string]int{}
	for k := 1; k < d; k++ {
		out := fmt.Sprintf("%sacc%d", p, k)
		seq = append(seq, &onnx.Node{OpType: op, Inputs: []string{acc, picks[k]}, Outputs: []string{out}})
		uses[out] = 1
		acc = out
	}
	return acc, c.runSeq(n, seq, uses)
}
