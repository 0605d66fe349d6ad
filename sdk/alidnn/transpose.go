package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// transposePerm returns Transpose's permutation for a rank-r input: the
// perm attribute, checked, or the axes reversed.
func transposePerm(n *onnx.Node, r int) ([]int, error) {
	p, err := n.Ints("perm")
	if err != nil {
		return nil, err
	}
	if p == nil {
		perm := make([]int, r)
		for k := range perm {
			perm[k] = r - 1 - k
		}
		return perm, nil
	}
	if len(p) != r {
		return nil, fmt.Errorf("perm %v has %d axes for a rank-%d input", p, len(p), r)
	}
	perm := make([]int, r)
	seen := make([]bool, r)
	for k, a := range p {
		if a < 0 || int(a) >= r || seen[a] {
			return nil, fmt.Errorf("perm %v is not a permutation of 0..%d", p, r-1)
		}
		seen[a] = true
		perm[k] = int(a)
	}
	return perm, nil
}

// foldTranspose transposes a constant (weights an exporter stored in
// another order, TensorFlow's NHWC constants).
func (c *compiler) foldTranspose(n *onnx.Node) (*value, error) {
	x, err := c.need(n, 0)
	if err != nil {
		return nil, err
	}
	perm, err := transposePerm(n, len(x.shape))
	if err != nil {
		return nil, err
	}
	r := len(x.shape)
	shape := make([]int, r)
	for k, a := range perm {
		shape[k] = x.shape[a]
	}
	// in[k] is the input's row-major stride of output axis k.
	strides := make([]int, r)
	s := 1
	for a := r - 1; a >= 0; a-- {
		for k, p := range perm {
			if p == a {
				strides[k] = s
			}
		}
		s *= x.shape[a]
	}
	src := make([]int, s)
	idx := make([]int, r)
	for k := range src {
		off := 0
		for a := range r {
			off += idx[a] * strides[a]
		}
		src[k] = off
		for a := r - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < shape[a] {
				break
			}
			idx[a] = 0
		}
	}
	v := &value{shape: shape, typ: x.typ}
	if x.f != nil {
		v.f = make([]float32, len(src))
		for k, o := range src {
			v.f[k] = x.f[o]
		}
	} else {
		xi := x.ints()
		v.i = make([]int64, len(src))
		for k, o := range src {
			v.i[k] = xi[o]
		}
	}
	return v, nil
}

// transposeNode compiles a Transpose of a computed tensor that moves only
// axes of size 1 (the data keeps its order) as a reshape; others are
// refused.
func (c *compiler) transposeNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	perm, err := transposePerm(n, len(x.shape))
	if err != nil {
		return err
	}
	shape := make([]int, len(perm))
	last := -1
	for k, a := range perm {
		shape[k] = x.shape[a]
		if x.shape[a] == 1 {
			continue
		}
		if a < last {
			return fmt.Errorf("Transpose %v of the computed tensor %s reorders its data: %w", perm, x, ErrUnsupported)
		}
		last = a
	}
	c.set(n, 0, &value{shape: shape, typ: x.typ, alias: x.root(), q: x.root().q})
	return nil
}
