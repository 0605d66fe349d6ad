package alidnn

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Folding of the shape arithmetic exporters write around a Reshape:
// PyTorch's x.view(x.size(0), -1) is Shape → Gather → Unsqueeze → Concat,
// TensorFlow converters' Flatten is Shape → Slice → ReduceProd → Concat,
// and a transformer's position ids Shape → Gather → Range → Unsqueeze →
// Expand. Once the input shapes are fixed (or bound, see WithShape) these
// are constants.

// foldShape is Shape, whose optional start and end (opset 15) slice the
// dimensions.
func (c *compiler) foldShape(n *onnx.Node) (*value, error) {
	x, err := c.need(n, 0)
	if err != nil {
		return nil, err
	}
	r := int64(len(x.shape))
	start, err := n.Int("start", 0)
	if err != nil {
		return nil, err
	}
	end, err := n.Int("end", r)
	if err != nil {
		return nil, err
	}
	clampAxis := func(a int64) int64 {
		if a < 0 {
			a += r
		}
		return min(max(a, 0), r)
	}
	start, end = clampAxis(start), clampAxis(end)
	var dims []int64
	for _, d := range x.shape[start:max(start, end)] {
		dims = append(dims, int64(d))
	}
	return constInt("", onnx.Int64, []int{len(dims)}, dims), nil
}

// constIndex is a constant's values read in row-major order at the
// positions idx.
func constIndex(x *value, shape []int, idx []int) *value {
	if x.f != nil {
		f := make([]float32, len(idx))
		for k, i := range idx {
			f[k] = x.f[i]
		}
		return &value{shape: shape, typ: x.typ, constant: constant{f: f}}
	}
	xi := x.ints()
	v := make([]int64, len(idx))
	for k, i := range idx {
		v[k] = xi[i]
	}
	return &value{shape: shape, typ: x.typ, constant: constant{i: v}}
}

// rowMajorStrides are the row-major strides of shape.
func rowMajorStrides(shape []int) []int {
	s := make([]int, len(shape))
	m := 1
	for a := len(shape) - 1; a >= 0; a-- {
		s[a] = m
		m *= shape[a]
	}
	return s
}

// foldGather is Gather on constants along any axis.
func (c *compiler) foldGather(n *onnx.Node) (*value, error) {
	x, err := c.need(n, 0)
	if err != nil {
		return nil, err
	}
	iv, err := c.need(n, 1)
	if err != nil {
		return nil, err
	}
	axis, err := n.Int("axis", 0)
	if err != nil {
		return nil, err
	}
	a, err := normAxis(int(axis), len(x.shape))
	if err != nil {
		return nil, err
	}
	if len(x.shape) == 0 {
		return nil, fmt.Errorf("Gather from a scalar")
	}
	shape := append(append(append([]int(nil), x.shape[:a]...), iv.shape...), x.shape[a+1:]...)
	outer, inner := 1, 1
	for _, d := range x.shape[:a] {
		outer *= d
	}
	for _, d := range x.shape[a+1:] {
		inner *= d
	}
	dim := x.shape[a]
	var idx []int
	for o := range outer {
		for _, i := range iv.ints() {
			if i < 0 {
				i += int64(dim)
			}
			if i < 0 || i >= int64(dim) {
				return nil, fmt.Errorf("index %d out of range for axis %d of size %d", i, a, dim)
			}
			for k := range inner {
				idx = append(idx, (o*dim+int(i))*inner+k)
			}
		}
	}
	return constIndex(x, shape, idx), nil
}

// sliceInput returns Slice's input k as integers: attribute what before
// opset 10, an input since.
func (c *compiler) sliceInput(n *onnx.Node, k int, what string) ([]int64, error) {
	if c.opset() < 10 {
		return n.Ints(what)
	}
	v, err := c.in(n, k)
	if err != nil || v == nil {
		return nil, err
	}
	if !v.isConst {
		return nil, fmt.Errorf("Slice %s (%q) must be a constant: %w", what, v.name, ErrUnsupported)
	}
	return v.ints(), nil
}

// foldSlice is Slice on constants.
func (c *compiler) foldSlice(n *onnx.Node) (*value, error) {
	x, err := c.need(n, 0)
	if err != nil {
		return nil, err
	}
	lo, step, shape, err := c.sliceBounds(n, x.shape)
	if err != nil {
		return nil, err
	}
	r := len(x.shape)
	total := 1
	for _, d := range shape {
		total *= d
	}
	xs := rowMajorStrides(x.shape)
	idx := make([]int, 0, total)
	pos := make([]int, r)
	for range total {
		off := 0
		for a, p := range pos {
			off += (lo[a] + p*step[a]) * xs[a]
		}
		idx = append(idx, off)
		for a := r - 1; a >= 0; a-- {
			pos[a]++
			if pos[a] < shape[a] {
				break
			}
			pos[a] = 0
		}
	}
	return constIndex(x, shape, idx), nil
}

// sliceBounds is where Slice of a tensor of shape xs starts along each
// axis, its step there and its output's shape, with ONNX's clamping of
// out-of-range starts and ends (exporters write INT64_MAX for "to the
// end").
func (c *compiler) sliceBounds(n *onnx.Node, xs []int) (lo, step, shape []int, err error) {
	var in [4][]int64
	for k, what := range []string{"starts", "ends", "axes", "steps"} {
		if in[k], err = c.sliceInput(n, k+1, what); err != nil {
			return nil, nil, nil, err
		}
	}
	starts, ends, axes, steps := in[0], in[1], in[2], in[3]
	r := len(xs)
	if r == 0 {
		return nil, nil, nil, fmt.Errorf("Slice of a scalar")
	}
	if len(ends) != len(starts) || axes != nil && len(axes) != len(starts) || steps != nil && len(steps) != len(starts) {
		return nil, nil, nil, fmt.Errorf("Slice with %d starts, %d ends, %d axes and %d steps", len(starts), len(ends), len(axes), len(steps))
	}
	lo, step, shape = make([]int, r), make([]int, r), append([]int(nil), xs...)
	for a := range r {
		step[a] = 1
	}
	for k := range starts {
		a := k
		if axes != nil {
			if a, err = normAxis(int(axes[k]), r); err != nil {
				return nil, nil, nil, err
			}
		}
		if a >= r {
			return nil, nil, nil, fmt.Errorf("Slice of %v on %d axes", xs, len(starts))
		}
		st := int64(1)
		if steps != nil {
			st = steps[k]
		}
		if st == 0 {
			return nil, nil, nil, fmt.Errorf("Slice step 0 on axis %d", a)
		}
		dim := int64(xs[a])
		b, e := starts[k], ends[k]
		if b < 0 {
			b += dim
		}
		if e < 0 {
			e += dim
		}
		if st > 0 {
			b, e = min(max(b, 0), dim), min(max(e, 0), dim)
		} else {
			b, e = min(max(b, 0), dim-1), min(max(e, -1), dim-1)
		}
		cnt := int64(0)
		if st > 0 && e > b {
			cnt = (e - b + st - 1) / st
		} else if st < 0 && e < b {
			cnt = (b - e - st - 1) / -st
		}
		lo[a], step[a], shape[a] = int(b), int(st), int(cnt)
	}
	return lo, step, shape, nil
}

// foldReduce is ReduceProd, ReduceSum, ReduceMax or ReduceMin on
// constants: axes an attribute, or an input (since opset 13 for ReduceSum,
// 18 for the others); no axes reduce all of them unless
// noop_with_empty_axes. Sums and products accumulate in float64 (exact for
// integers up to 2⁵³), rounded once. Over an empty set a sum is 0, a
// product 1, a maximum −∞ (the type's least integer) and a minimum +∞ (its
// greatest), as onnx's reference gives them.
func (c *compiler) foldReduce(n *onnx.Node) (*value, error) {
	x, err := c.need(n, 0)
	if err != nil {
		return nil, err
	}
	red, shape, err := c.reducedAxes(n, x)
	if err != nil || red == nil {
		if err == nil {
			v := *x
			return &v, nil
		}
		return nil, err
	}
	outShape := make([]int, len(x.shape)) // the output indexed like x, reduced axes of size 1
	for a, d := range x.shape {
		outShape[a] = d
		if red[a] {
			outShape[a] = 1
		}
	}
	to := broadcastIndex(x.shape, outShape) // x's element k goes to output to[k]
	acc := make([]float64, size(outShape))
	start, combine := reduction(n.OpType, x.typ)
	for k := range acc {
		acc[k] = start
	}
	vals := x.f64s()
	for k, o := range to {
		acc[o] = combine(acc[o], vals[k])
	}
	v := &value{shape: shape, typ: x.typ}
	if x.f != nil {
		v.f = make([]float32, len(acc))
		for k, a := range acc {
			v.f[k] = float32(a)
		}
		return v, nil
	}
	v.i = make([]int64, len(acc))
	for k, a := range acc {
		v.i[k] = castFloat(a, x.typ)
	}
	return v, nil
}

// reducedAxes returns which axes of x Reduce* n reduces and the output's
// shape; nil axes for a reduction that is the identity.
func (c *compiler) reducedAxes(n *onnx.Node, x *value) ([]bool, []int, error) {
	axes, err := n.Ints("axes")
	if err != nil {
		return nil, nil, err
	}
	if av, err := c.in(n, 1); err != nil {
		return nil, nil, err
	} else if av != nil {
		axes = av.ints()
	}
	keep, err := n.Int("keepdims", 1)
	if err != nil {
		return nil, nil, err
	}
	noop, err := n.Int("noop_with_empty_axes", 0)
	if err != nil {
		return nil, nil, err
	}
	r := len(x.shape)
	red := make([]bool, r)
	for _, a := range axes {
		k, err := normAxis(int(a), r)
		if err != nil {
			return nil, nil, err
		}
		if k >= r {
			return nil, nil, fmt.Errorf("%s of a scalar along axis %d", n.OpType, a)
		}
		red[k] = true
	}
	if len(axes) == 0 {
		if noop != 0 {
			return nil, nil, nil
		}
		for a := range red {
			red[a] = true
		}
	}
	var shape []int
	for a, d := range x.shape {
		if !red[a] {
			shape = append(shape, d)
		} else if keep != 0 {
			shape = append(shape, 1)
		}
	}
	return red, shape, nil
}

// reduction is the start value and the step of Reduce op on type t.
func reduction(op string, t onnx.DataType) (float64, func(a, b float64) float64) {
	switch op {
	case "ReduceProd":
		return 1, func(a, b float64) float64 { return a * b }
	case "ReduceMax":
		lo := math.Inf(-1)
		if !t.IsFloat() {
			lo = float64(math.MinInt64)
			if t.Bits() <= 32 {
				lo, _ = intRange(t)
			}
		}
		return lo, math.Max
	case "ReduceMin":
		hi := math.Inf(1)
		if !t.IsFloat() {
			hi = float64(math.MaxInt64)
			if t.Bits() <= 32 {
				_, hi = intRange(t)
			}
		}
		return hi, math.Min
	}
	return 0, func(a, b float64) float64 { return a + b }
}

// foldSize is the number of elements of its input, whose shape is known
// even when its values are not.
func (c *compiler) foldSize(n *onnx.Node) (*value, error) {
	x, err := c.need(n, 0)
	if err != nil {
		return nil, err
	}
	return constInt("", onnx.Int64, nil, []int64{int64(x.len())}), nil
}

// foldRange is Range(start, limit, delta) on scalars: torch's arange, as
// in the position ids of a sequence whose length is a bound dimension.
func (c *compiler) foldRange(n *onnx.Node) (*value, error) {
	var in [3]*value
	for k := range in {
		v, err := c.need(n, k)
		if err != nil {
			return nil, err
		}
		if v.len() != 1 {
			return nil, fmt.Errorf("Range input %d (%q) of shape %v: want a scalar", k, v.name, v.shape)
		}
		in[k] = v
	}
	if in[1].typ != in[0].typ || in[2].typ != in[0].typ {
		return nil, fmt.Errorf("Range of types %v, %v and %v: want one type", in[0].typ, in[1].typ, in[2].typ)
	}
	start, limit, delta := in[0].floats()[0], in[1].floats()[0], in[2].floats()[0]
	if delta == 0 {
		return nil, fmt.Errorf("Range with delta 0")
	}
	cnt := math.Ceil(float64(limit-start) / float64(delta))
	if !(cnt <= maxFolded) {
		return nil, fmt.Errorf("Range(%g, %g, %g) of %g values is too large to fold", start, limit, delta, cnt)
	}
	size := int(max(cnt, 0))
	if in[0].isFloat() {
		r := make([]float32, size)
		for k := range r {
			r[k] = start + float32(k)*delta
		}
		return &value{shape: []int{size}, typ: in[0].typ, constant: constant{f: r}}, nil
	}
	s, d := in[0].ints()[0], in[2].ints()[0]
	r := make([]int64, size)
	for k := range r {
		r[k] = s + int64(k)*d
	}
	return constInt("", in[0].typ, []int{size}, r), nil
}

// foldExpand broadcasts its input to the shape input (numpy's broadcast of
// the two: a 1 in the shape keeps the input's dimension).
func (c *compiler) foldExpand(n *onnx.Node) (*value, error) {
	x, err := c.need(n, 0)
	if err != nil {
		return nil, err
	}
	sv, err := c.need(n, 1)
	if err != nil {
		return nil, err
	}
	if len(sv.shape) != 1 {
		return nil, fmt.Errorf("Expand to shape %q of shape %v: want a vector", sv.name, sv.shape)
	}
	to := toInts(sv.ints())
	for k, d := range to {
		if d < 0 {
			return nil, fmt.Errorf("Expand to %v: dimension %d is negative", to, k)
		}
	}
	shape, err := foldedShape(x.shape, to)
	if err != nil {
		return nil, err
	}
	v := constIndex(x, shape, broadcastIndex(shape, x.shape))
	v.isConst = true
	return v, nil
}
