package alidnn

import (
	"fmt"
	"slices"
)

// Split and Gather along a leading axis of a computed tensor — timm's
// qkv.unbind(0) after permuting the fused projection to [3, B, heads, N,
// D], written as Split(axis 0) → Squeeze — pick whole 16-lane elements:
// the picked values keep their lanes. They run as a permute layer (see
// permute.go) whose DMA loads gather the picked elements, exact. A pick
// along the lane axis, which would move values between lanes, is refused.

// selectAxis compiles the values of x at indices idx along axis into a new
// fp32 tensor of shape: x's shape with that axis len(idx) long, or
// without it (one index dropped). node names the operator in errors.
func (c *compiler) selectAxis(node string, x *value, axis int, idx []int, shape []int) (*value, error) {
	r := x.root()
	if x.host != nil || x.cols != nil || x.view != nil {
		return nil, fmt.Errorf("%s of %s, which is not stored on the device as it is: %w", node, x, ErrUnsupported)
	}
	if err := c.settle(r, false); err != nil {
		return nil, err
	}
	if _, err := c.deviceInput(r, matLayout(r.shape)); err != nil {
		return nil, err
	}
	if err := c.materialize(r); err != nil {
		return nil, err
	}
	if r.el() != f32 {
		return nil, fmt.Errorf("%s of the %v tensor %s: only fp32 tensors are picked from on the engine: %w", node, r.el(), x, ErrUnsupported)
	}
	for _, lay := range []layout{matLayout(shape), convLayout(shape)} {
		if src, ok := selectMap(r.lay, x.shape, axis, idx, lay); ok {
			return c.permuteLayer(r, shape, lay, src), nil
		}
	}
	return nil, fmt.Errorf("%s of %s along axis %d %w (only picks along an axis other than the lanes run on the engine): %w",
		node, x, axis, errBetweenLanes, ErrUnsupported)
}

// selectMap returns, for every element of a tensor laid out as out, the
// element of the input laid out as in that holds its lanes, the output's
// row-major values being those of the input of shape xs at indices idx
// along axis. It reports false unless every output element is one whole
// input element, lane for lane (so padding lanes stay padding).
func selectMap(in layout, xs []int, axis int, idx []int, out layout) ([]int, bool) {
	inOff, outOff := in.offsets(), out.offsets()
	st := rowMajorStrides(xs)
	ks := slices.Clone(xs)
	ks[axis] = len(idx)
	src := make([]int, out.elems())
	for e := range src {
		src[e] = -1
	}
	nOut, nIn := make([]int, len(src)), make([]int, in.elems())
	for _, s := range inOff {
		nIn[s/lanes]++
	}
	at := make([]int, len(ks))
	for _, o := range outOff {
		i := 0
		for a, k := range at {
			if a == axis {
				k = idx[k]
			}
			i += k * st[a]
		}
		s := inOff[i]
		e := o / lanes
		if o%lanes != s%lanes || src[e] >= 0 && src[e] != s/lanes {
			return nil, false
		}
		src[e] = s / lanes
		nOut[e]++
		for a := len(at) - 1; a >= 0; a-- {
			at[a]++
			if at[a] < ks[a] {
				break
			}
			at[a] = 0
		}
	}
	for e, s := range src {
		if s < 0 || nOut[e] != nIn[s] {
			return nil, false
		}
	}
	return src, true
}

// reshapePermuted gives a permute layer's output that only this reshape
// reads the reshape's shape, when that shape's layout holds every value
// where the layer stores it — the Squeeze of the unit axis a Split along
// a leading axis leaves: the layer then writes an ordinary tensor of the
// new shape, which consumers that refuse aliases of another shape read.
// It returns nil otherwise.
func reshapePermuted(x *value, shape []int, outputs map[string]bool) *value {
	l := x.layer
	if x.alias != nil || l == nil || l.out != x || l.kind != lPermute || x.uses != 1 || outputs[x.name] {
		return nil
	}
	off := x.lay.offsets()
	for _, lay := range []layout{matLayout(shape), convLayout(shape)} {
		if lay.elems() == x.lay.elems() && slices.Equal(lay.offsets(), off) {
			v := &value{shape: shape, typ: x.typ, device: device{lay: lay, layer: l, elem: x.elem, zeroPad: x.zeroPad}}
			l.out = v
			return v
		}
	}
	return nil
}
