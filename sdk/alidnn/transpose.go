package alidnn

import (
	"fmt"
	"slices"

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
// axes of size 1 (the data keeps its order) as a reshape, a channel
// shuffle as a permutation, and others as transposeData can.
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
	for k, a := range perm {
		shape[k] = x.shape[a]
	}
	if x.view != nil {
		return c.transposeView(n, x, perm, shape)
	}
	last := -1
	for _, a := range perm {
		if x.shape[a] == 1 {
			continue
		}
		if a < last {
			if ok, err := c.channelShuffle(n, x, perm); ok || err != nil {
				return err
			}
			if r := len(perm); r >= 2 && x.alias == nil && slices.Equal(perm[:r-2], seq(r-2)) && perm[r-2] == r-1 && perm[r-1] == r-2 &&
				x.shape[r-1]%lanes == 0 && x.shape[r-2]%lanes == 0 {
				t, err := c.transposeLast(x)
				if err != nil {
					return err
				}
				c.set(n, 0, t)
				return nil
			}
			return c.transposeData(n, x, perm, shape)
		}
		last = a
	}
	c.set(n, 0, aliasOf(x.root(), shape, x.typ))
	return nil
}

// channelShuffle compiles a Transpose that only reorders factors of a
// 4-D tensor's channel axis, as ShuffleNet's Reshape → Transpose → Reshape
// does, as a channel permutation: a 1×1 convolution by a permutation matrix,
// each output block reading only the input blocks it draws from. It
// reports whether the Transpose was of that form.
func (c *compiler) channelShuffle(n *onnx.Node, x *value, perm []int) (bool, error) {
	r := x.root()
	k := len(x.shape) - 3 // channel factor axes 1..k
	if len(r.shape) != 4 || k < 2 || r.lay.shape != nil && r.lay.lane != 1 ||
		x.shape[0] != r.shape[0] || x.shape[k+1] != r.shape[2] || x.shape[k+2] != r.shape[3] ||
		perm[0] != 0 || perm[k+1] != k+1 || perm[k+2] != k+2 {
		return false, nil
	}
	C := r.shape[1]
	f := x.shape[1 : k+1]
	prod := 1
	for _, d := range f {
		prod *= d
	}
	if prod != C {
		return false, nil
	}
	// Output channel q, written in the permuted factors, is input channel
	// src[q]; the weights put a one at (q, src[q]).
	strides := make([]int, k)
	s := 1
	for a := k - 1; a >= 0; a-- {
		strides[a] = s
		s *= f[a]
	}
	w := make([]float32, C*C)
	idx := make([]int, k)
	shape := make([]int, len(perm))
	for a, p := range perm {
		shape[a] = x.shape[p]
	}
	for q := range C {
		src := 0
		for a := range k {
			src += idx[a] * strides[perm[a+1]-1]
		}
		w[q*C+src] = 1
		for a := k - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < shape[a+1] {
				break
			}
			idx[a] = 0
		}
	}
	N, H, W := r.shape[0], r.shape[2], r.shape[3]
	spec := &convSpec{kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, ih: H, iw: W, oh: H, ow: W, ic: C, oc: C}
	pn := &onnx.Node{OpType: "Conv", Name: n.Name + "/shuffle", Outputs: []string{n.Outputs[0] + "/shuffle"}}
	c.uses[pn.Outputs[0]] = 1
	out := []int{N, C, H, W}
	if err := c.gemmNode(gemmParams{n: pn, op: "Conv", x: r, w: constFloat("", []int{C, C, 1, 1}, w), bias: -1, spec: spec, outShape: out, outLay: convLayout(out)}); err != nil {
		return true, err
	}
	p := c.vals[pn.Outputs[0]]
	p.layer.macs = 0
	c.set(n, 0, aliasOf(p, shape, x.typ))
	return true, nil
}

// seq returns 0, 1, …, n−1.
func seq(n int) []int {
	s := make([]int, n)
	for k := range s {
		s[k] = k
	}
	return s
}
