package alidnn

// Zero-size tensors. A tensor with no elements has no values to compute:
// the compiler folds it. A graph input bound to a shape with a 0 becomes an
// empty constant (the runtime checks the tensor given for it and uploads
// nothing); a Slice or a Split part of no elements is an empty constant;
// what reads them folds (a ReduceSum over an empty axis is zeros, a
// ReduceMax or ReduceMin −∞ or +∞, see foldReduce). A graph output with no
// elements comes back as an empty tensor of its type.

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// emptyValue is a constant of type typ and shape, which has a 0.
func emptyValue(typ onnx.DataType, shape []int) *value {
	v := &value{shape: slices.Clone(shape), typ: typ, constant: constant{isConst: true}}
	if typ.IsFloat() {
		v.f = []float32{}
	} else {
		v.i = []int64{}
	}
	return v
}

// emptyInput makes the graph input in, of the empty shape, an empty
// constant and binds it so that the runtime checks what a run gives for it.
func (c *compiler) emptyInput(in onnx.ValueInfo, shape []int) error {
	if in.ElemType.Bits() == 0 {
		return fmt.Errorf("input %q: element type %v: %w", in.Name, in.ElemType, ErrUnsupported)
	}
	v := emptyValue(in.ElemType, shape)
	v.name = in.Name
	c.vals[in.Name] = v
	c.emptyInputs = append(c.emptyInputs, v)
	return nil
}

// checkConstShape is checkShape for a constant binding, which may be
// empty.
func checkConstShape(s []int) (int, error) {
	if !slices.Contains(s, 0) {
		return checkShape(s)
	}
	if len(s) > 8 {
		return 0, fmt.Errorf("rank %d", len(s))
	}
	for _, d := range s {
		if d < 0 || d > 1<<30 {
			return 0, fmt.Errorf("dimension %d in %v", d, s)
		}
	}
	return 0, nil
}

// foldSplit is Split of a constant (an empty input's, say): each part a
// constant.
func (c *compiler) foldSplit(n *onnx.Node, x *value) error {
	r := len(x.shape)
	axis, err := n.Int("axis", 0)
	if err != nil {
		return err
	}
	a, err := normAxis(int(axis), r)
	if err != nil || r == 0 {
		return fmt.Errorf("Split of %s along axis %d", x, axis)
	}
	sizes, err := c.splitSizes(n, x.shape[a])
	if err != nil {
		return err
	}
	outer, inner := size(x.shape[:a]), size(x.shape[a+1:])
	at := 0
	for k, m := range sizes {
		if k >= len(n.Outputs) || n.Outputs[k] == "" {
			at += m
			continue
		}
		shape := slices.Clone(x.shape)
		shape[a] = m
		v := &value{shape: shape, typ: x.typ, constant: constant{isConst: true}}
		for o := range outer {
			lo, hi := (o*x.shape[a]+at)*inner, (o*x.shape[a]+at+m)*inner
			if x.f != nil {
				v.f = append(v.f, x.f[lo:hi]...)
			} else {
				v.i = append(v.i, x.i[lo:hi]...)
			}
		}
		if v.f == nil && v.i == nil {
			v = emptyValue(x.typ, shape)
		}
		at += m
		c.set(n, k, v)
	}
	return nil
}

// foldEmpty folds an element-wise operator without a folder of its own
// (Relu) on an empty constant: its output is as empty. It reports false
// for other nodes.
func (c *compiler) foldEmpty(n *onnx.Node) (bool, error) {
	x, _ := c.in(n, 0)
	if x == nil || !x.isConst || x.len() != 0 || !elementwise[n.OpType] || len(n.Inputs) != 1 || len(n.Outputs) != 1 {
		return false, nil
	}
	c.set(n, 0, emptyValue(x.typ, x.shape))
	return true, nil
}
