package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// reshapeTo computes the output shape of a Flatten, Reshape, Squeeze or
// Unsqueeze of a tensor of shape in.
func (c *compiler) reshapeTo(n *onnx.Node, in []int) ([]int, error) {
	switch n.OpType {
	case "Flatten":
		return flattenShape(n, in)
	case "Reshape":
		return c.reshapeShape(n, in)
	case "Squeeze", "Unsqueeze":
		axes, err := n.Ints("axes")
		if err != nil {
			return nil, err
		}
		if axes == nil && len(n.Inputs) > 1 {
			av, err := c.needConst(n, 1, "axes")
			if err != nil {
				return nil, err
			}
			axes = av.ints()
		}
		if n.OpType == "Squeeze" {
			return squeezeShape(in, axes)
		}
		return unsqueezeShape(in, axes)
	}
	return nil, fmt.Errorf("not a reshape: %s", n.OpType)
}

// flattenShape is the 2-D shape Flatten makes of shape in.
func flattenShape(n *onnx.Node, in []int) ([]int, error) {
	axis, err := n.Int("axis", 1)
	if err != nil {
		return nil, err
	}
	a := int(axis)
	if a < 0 {
		a += len(in)
	}
	if a < 0 || a > len(in) {
		return nil, fmt.Errorf("axis %d out of range for rank %d", axis, len(in))
	}
	p, q := 1, 1
	for k, d := range in {
		if k < a {
			p *= d
		} else {
			q *= d
		}
	}
	return []int{p, q}, nil
}

// reshapeShape is the shape a Reshape makes of shape in: its constant
// shape input, with 0s copied from in (unless allowzero) and a −1 inferred.
func (c *compiler) reshapeShape(n *onnx.Node, in []int) ([]int, error) {
	sv, err := c.needConst(n, 1, "shape")
	if err != nil {
		return nil, err
	}
	allowZero, err := n.Int("allowzero", 0)
	if err != nil {
		return nil, err
	}
	want := sv.ints()
	out := make([]int, len(want))
	infer := -1
	known := 1
	for k, d := range want {
		switch {
		case d == 0 && allowZero == 0:
			if k >= len(in) {
				return nil, fmt.Errorf("shape[%d] = 0 copies a dimension the input (rank %d) does not have", k, len(in))
			}
			out[k] = in[k]
		case d == -1:
			if infer >= 0 {
				return nil, fmt.Errorf("shape has two -1 dimensions")
			}
			infer = k
			continue
		case d < 0:
			return nil, fmt.Errorf("shape[%d] = %d", k, d)
		case k == 0 && d == 1 && c.opts.batch > 1 && len(in) > 0 && in[0] == c.opts.batch:
			out[k] = c.opts.batch // the exporter's batch of 1
		default:
			out[k] = int(d)
		}
		known *= out[k]
	}
	total := 1
	for _, d := range in {
		total *= d
	}
	if infer >= 0 {
		if known == 0 || total%known != 0 {
			return nil, fmt.Errorf("cannot infer the -1 dimension of %v from %d values", want, total)
		}
		out[infer] = total / known
	}
	return out, nil
}

// squeezeShape drops axes (every axis of size 1 when there are none) from
// shape in.
func squeezeShape(in []int, axes []int64) ([]int, error) {
	drop := map[int]bool{}
	for _, a := range axes {
		k, err := normAxis(int(a), len(in))
		if err != nil {
			return nil, err
		}
		drop[k] = true
	}
	var out []int
	for k, d := range in {
		if (len(axes) == 0 && d == 1) || drop[k] {
			if d != 1 {
				return nil, fmt.Errorf("squeezing axis %d of size %d", k, d)
			}
			continue
		}
		out = append(out, d)
	}
	return out, nil
}

// unsqueezeShape inserts axes of size 1 into shape in; axes index the
// output.
func unsqueezeShape(in []int, axes []int64) ([]int, error) {
	r := len(in) + len(axes)
	ins := map[int]bool{}
	for _, a := range axes {
		k, err := normAxis(int(a), r)
		if err != nil {
			return nil, err
		}
		ins[k] = true
	}
	out := make([]int, 0, r)
	j := 0
	for k := 0; k < r; k++ {
		if ins[k] {
			out = append(out, 1)
		} else if j < len(in) {
			out = append(out, in[j])
			j++
		}
	}
	return out, nil
}
