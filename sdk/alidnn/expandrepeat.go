package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// maxExpandCopies bounds the copies Expand concatenates along one axis:
// each is a move of the whole tensor.
const maxExpandCopies = 64

// expandRepeat compiles Expand of x to shape where axes other than the
// last grow from 1 or are added in front: the last axis, when it grows
// too and the lanes hold it, spread along them first (see spreadLanes),
// as a row of an image repeated as the others; then each growing
// axis after x's first longer than 1 a Concat of copies along it, and the
// added and leading unit axes together copies along axis 0 — T copies of
// x stacked are, row-major, x broadcast over T leading indices — which
// the output views. Concat moves whole elements to their places (see
// concatNode), so nothing moves between lanes and the copies are exact.
func (c *compiler) expandRepeat(n *onnx.Node, x *value, shape []int) error {
	rx, k := len(x.shape), len(shape)-len(x.shape)
	if rx == 0 {
		return fmt.Errorf("Expand of the scalar %s to %v: %w", x, shape, ErrUnsupported)
	}
	cur, last := x, rx-1 // last: the axes up to it repeat by copies
	if x.shape[rx-1] == 1 && shape[k+rx-1] > 1 {
		hiddenLayout(x)
		switch {
		case lastOnLanes(x):
			if x.typ != onnx.Float {
				return fmt.Errorf("Expand of the %v tensor %s along its last axis: only FLOAT tensors are spread along the lanes: %w", x.typ, x, ErrUnsupported)
			}
			v, err := c.spreadLanes(n, x, shape[k+rx-1])
			if err != nil {
				return err
			}
			cur = v
		case laneAxis(x) == rx-1:
			return fmt.Errorf("Expand of %s to %v along its last axis, which its layout does not hold as it is: %w", x, shape, ErrUnsupported)
		default: // a row of an image: copies too
			last = rx
		}
	}
	lead := 0 // x's leading unit axes
	for lead < rx-1 && x.shape[lead] == 1 {
		lead++
	}
	copies := map[int]int{} // axis of x → copies along it
	for a := lead + 1; a < last; a++ {
		if x.shape[a] == 1 && shape[k+a] > 1 {
			copies[a] = shape[k+a]
		}
	}
	T := 1
	for _, d := range shape[:k+lead] {
		T *= d
	}
	if T > 1 && rx == 1 {
		return fmt.Errorf("Expand of the vector %s to %v: copies of a vector would stack along its lanes: %w", x, shape, ErrUnsupported)
	}
	if T > 1 {
		copies[0] = T
	}
	p := n.Outputs[0] + "/expand/"
	name := cur.name
	var seq []*onnx.Node
	uses := map[string]int{}
	for a := last - 1; a >= 0; a-- {
		m := copies[a]
		if m == 0 {
			continue
		}
		if m > maxExpandCopies {
			return fmt.Errorf("Expand of %s to %v: %d copies along axis %d, more than %d: %w", x, shape, m, a, maxExpandCopies, ErrUnsupported)
		}
		out := fmt.Sprintf("%saxis%d", p, a)
		ins := make([]string, m)
		for i := range ins {
			ins[i] = name
		}
		seq = append(seq, &onnx.Node{OpType: "Concat", Inputs: ins, Outputs: []string{out},
			Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: int64(a)}}})
		uses[name] += m - 1
		uses[out] = 1
		name = out
	}
	if err := c.runSeq(n, seq, uses); err != nil {
		return err
	}
	v := c.vals[name]
	want := 1
	for _, d := range shape {
		want *= d
	}
	if v.len() != want {
		return fmt.Errorf("Expand of %s to %v: the copies hold %v: %w", x, shape, v.shape, ErrUnsupported)
	}
	c.set(n, 0, &value{shape: shape, typ: x.typ, derived: derived{alias: v.root()}})
	return nil
}
