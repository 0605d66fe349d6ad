package onnxref

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// intsInput returns input k as integers, or the attribute name before
// opset since (when the operator took it as an attribute); nil if absent.
func (e *evaluator) intsInput(n *onnx.Node, k int, name string, since int64) ([]int64, error) {
	if e.opset < since {
		return n.Ints(name)
	}
	t, ok, err := e.in(n, k)
	if err != nil || !ok {
		return nil, err
	}
	out := make([]int64, len(t.V))
	for j, v := range t.V {
		out[j] = int64(v)
	}
	return out, nil
}

func reshape(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	want, err := e.intsInput(n, 1, "shape", 5)
	if err != nil {
		return Tensor{}, err
	}
	dims := make([]int, len(want))
	infer, known := -1, 1
	for k, d := range want {
		switch {
		case d == 0 && k < len(x.Dims):
			dims[k] = x.Dims[k]
		case d == -1 && infer < 0:
			infer = k
			continue
		case d > 0:
			dims[k] = int(d)
		default:
			return Tensor{}, fmt.Errorf("shape %v of %v", want, x.Dims)
		}
		known *= dims[k]
	}
	if infer >= 0 {
		if known == 0 || x.len()%known != 0 {
			return Tensor{}, fmt.Errorf("shape %v of %v", want, x.Dims)
		}
		dims[infer] = x.len() / known
	}
	if size(dims) != x.len() {
		return Tensor{}, fmt.Errorf("shape %v of %v", want, x.Dims)
	}
	return Tensor{Dims: dims, V: x.V}, nil
}

func flatten(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	a, err := n.Int("axis", 1)
	if err != nil {
		return Tensor{}, err
	}
	if a < 0 {
		a += int64(len(x.Dims))
	}
	if a < 0 || a > int64(len(x.Dims)) {
		return Tensor{}, fmt.Errorf("axis %d of %v", a, x.Dims)
	}
	return Tensor{Dims: []int{size(x.Dims[:a]), size(x.Dims[a:])}, V: x.V}, nil
}

func transpose(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	r := len(x.Dims)
	perm, err := n.Ints("perm")
	if err != nil {
		return Tensor{}, err
	}
	if perm == nil {
		for a := r - 1; a >= 0; a-- {
			perm = append(perm, int64(a))
		}
	}
	if len(perm) != r {
		return Tensor{}, fmt.Errorf("perm %v of %v", perm, x.Dims)
	}
	st := rowMajor(x.Dims)
	dims, pst := make([]int, r), make([]int, r)
	for k, a := range perm {
		if a < 0 || int(a) >= r {
			return Tensor{}, fmt.Errorf("perm %v of %v", perm, x.Dims)
		}
		dims[k], pst[k] = x.Dims[a], st[a]
	}
	return gather(x, dims, func(k, p int) int { return p * pst[k] }), nil
}

// rowMajor is the row-major strides of dims.
func rowMajor(dims []int) []int {
	st := make([]int, len(dims))
	m := 1
	for a := len(dims) - 1; a >= 0; a-- {
		st[a] = m
		m *= dims[a]
	}
	return st
}

// gather is the tensor of dims whose value at position pos is x's at
// offset Σ at(k, pos[k]): a transpose, a slice, a nearest resize.
func gather(x Tensor, dims []int, at func(k, p int) int) Tensor {
	y := Tensor{Dims: dims, V: make([]float64, size(dims))}
	pos := make([]int, len(dims))
	for i := range y.V {
		off := 0
		for k, p := range pos {
			off += at(k, p)
		}
		y.V[i] = x.V[off]
		for k := len(dims) - 1; k >= 0; k-- {
			pos[k]++
			if pos[k] < dims[k] {
				break
			}
			pos[k] = 0
		}
	}
	return y
}

// slice is Slice with ONNX's clamping of starts and ends, steps of either
// sign.
func slice(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	var in [4][]int64
	for k, name := range []string{"starts", "ends", "axes", "steps"} {
		if in[k], err = e.intsInput(n, k+1, name, 10); err != nil {
			return Tensor{}, err
		}
	}
	starts, ends, axes, steps := in[0], in[1], in[2], in[3]
	r := len(x.Dims)
	lo, step, dims := make([]int, r), make([]int, r), append([]int(nil), x.Dims...)
	for a := range step {
		step[a] = 1
	}
	if len(ends) != len(starts) || axes != nil && len(axes) != len(starts) || steps != nil && len(steps) != len(starts) {
		return Tensor{}, fmt.Errorf("%d starts, %d ends, %d axes, %d steps", len(starts), len(ends), len(axes), len(steps))
	}
	for k := range starts {
		a := k
		if axes != nil {
			if a, err = normAxis(axes[k], r); err != nil {
				return Tensor{}, err
			}
		}
		st := int64(1)
		if steps != nil {
			st = steps[k]
		}
		if st == 0 {
			return Tensor{}, fmt.Errorf("step 0")
		}
		d := int64(x.Dims[a])
		b, en := starts[k], ends[k]
		if b < 0 {
			b += d
		}
		if en < 0 {
			en += d
		}
		var cnt int64
		if st > 0 {
			b, en = min(max(b, 0), d), min(max(en, 0), d)
			cnt = max(0, (en-b+st-1)/st)
		} else {
			b, en = min(max(b, 0), d-1), min(max(en, -1), d-1)
			cnt = max(0, (b-en-st-1)/-st)
		}
		lo[a], step[a], dims[a] = int(b), int(st), int(cnt)
	}
	st := rowMajor(x.Dims)
	return gather(x, dims, func(a, p int) int { return (lo[a] + p*step[a]) * st[a] }), nil
}

func squeeze(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	axes, err := e.intsInput(n, 1, "axes", 13)
	if err != nil {
		return Tensor{}, err
	}
	drop := map[int]bool{}
	for _, a := range axes {
		k, err := normAxis(a, len(x.Dims))
		if err != nil {
			return Tensor{}, err
		}
		if x.Dims[k] != 1 {
			return Tensor{}, fmt.Errorf("squeezing axis %d of %v", k, x.Dims)
		}
		drop[k] = true
	}
	var dims []int
	for k, d := range x.Dims {
		if !drop[k] && (len(axes) > 0 || d != 1) {
			dims = append(dims, d)
		}
	}
	return Tensor{Dims: dims, V: x.V}, nil
}

func unsqueeze(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	axes, err := e.intsInput(n, 1, "axes", 13)
	if err != nil {
		return Tensor{}, err
	}
	r := len(x.Dims) + len(axes)
	ins := map[int]bool{}
	for _, a := range axes {
		k, err := normAxis(a, r)
		if err != nil {
			return Tensor{}, err
		}
		ins[k] = true
	}
	dims, j := make([]int, 0, r), 0
	for k := range r {
		if ins[k] {
			dims = append(dims, 1)
		} else {
			dims = append(dims, x.Dims[j])
			j++
		}
	}
	return Tensor{Dims: dims, V: x.V}, nil
}

func concat(e *evaluator, n *onnx.Node) (Tensor, error) {
	ax, err := n.Int("axis", 0)
	if err != nil {
		return Tensor{}, err
	}
	var ins []Tensor
	for k := range n.Inputs {
		t, err := e.need(n, k)
		if err != nil {
			return Tensor{}, err
		}
		ins = append(ins, t)
	}
	if len(ins) == 0 {
		return Tensor{}, fmt.Errorf("Concat of nothing")
	}
	r := len(ins[0].Dims)
	a, err := normAxis(ax, r)
	if err != nil {
		return Tensor{}, err
	}
	dims := append([]int(nil), ins[0].Dims...)
	dims[a] = 0
	for _, t := range ins {
		if len(t.Dims) != r {
			return Tensor{}, fmt.Errorf("Concat of ranks %d and %d", r, len(t.Dims))
		}
		for k, d := range t.Dims {
			if k != a && d != dims[k] {
				return Tensor{}, fmt.Errorf("Concat of %v and %v along %d", ins[0].Dims, t.Dims, a)
			}
		}
		dims[a] += t.Dims[a]
	}
	outer := size(dims[:a])
	y := Tensor{Dims: dims, V: make([]float64, 0, size(dims))}
	for o := range outer {
		for _, t := range ins {
			chunk := size(t.Dims[a:])
			y.V = append(y.V, t.V[o*chunk:(o+1)*chunk]...)
		}
	}
	return y, nil
}

func shape(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	y := Tensor{Dims: []int{len(x.Dims)}, V: make([]float64, len(x.Dims))}
	for k, d := range x.Dims {
		y.V[k] = float64(d)
	}
	return y, nil
}

// cast converts to an integer type by truncation and keeps values for
// floating-point types.
func cast(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	to, err := n.Int("to", 0)
	if err != nil {
		return Tensor{}, err
	}
	switch onnx.DataType(to) {
	case onnx.Float, onnx.Double:
		return x, nil
	case onnx.Int32, onnx.Int64:
		return mapT(x, math.Trunc), nil
	}
	return Tensor{}, fmt.Errorf("Cast to %v is not implemented", onnx.DataType(to))
}

func constant(e *evaluator, n *onnx.Node) (Tensor, error) {
	if t, err := n.Tensor("value"); err != nil || t != nil {
		if err != nil {
			return Tensor{}, err
		}
		return FromONNX(t)
	}
	if f, err := n.Floats("value_floats"); err != nil || f != nil {
		y := Tensor{Dims: []int{len(f)}, V: make([]float64, len(f))}
		for k, v := range f {
			y.V[k] = float64(v)
		}
		return y, err
	}
	if i, err := n.Ints("value_ints"); err != nil || i != nil {
		y := Tensor{Dims: []int{len(i)}, V: make([]float64, len(i))}
		for k, v := range i {
			y.V[k] = float64(v)
		}
		return y, err
	}
	if a := n.Attr("value_float"); a != nil {
		return Tensor{V: []float64{float64(a.F)}}, nil
	}
	if a := n.Attr("value_int"); a != nil {
		return Tensor{V: []float64{float64(a.I)}}, nil
	}
	return Tensor{}, fmt.Errorf("Constant without a value attribute it implements")
}

// resize is nearest-neighbour Resize with asymmetric coordinates and floor
// rounding (x_in = ⌊x_out / scale⌋), by scales or sizes.
func resize(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	for _, a := range [][2]string{{"mode", "nearest"}, {"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "floor"}} {
		v, err := n.String(a[0], a[1])
		if a[0] == "nearest_mode" && e.opset < 11 {
			continue
		}
		if err != nil || v != a[1] {
			return Tensor{}, fmt.Errorf("%s %q is not implemented (only %q)", a[0], v, a[1])
		}
	}
	k := 2
	if e.opset < 11 {
		k = 1
	}
	r := len(x.Dims)
	scales := make([]float64, r)
	dims := make([]int, r)
	if s, ok, err := e.in(n, k); err != nil {
		return Tensor{}, err
	} else if ok && len(s.V) == r {
		for a := range r {
			scales[a], dims[a] = s.V[a], int(math.Floor(float64(x.Dims[a])*s.V[a]))
		}
	} else if sz, ok, err := e.in(n, k+1); err != nil {
		return Tensor{}, err
	} else if ok && len(sz.V) == r {
		for a := range r {
			dims[a] = int(sz.V[a])
			scales[a] = float64(dims[a]) / float64(x.Dims[a])
		}
	} else {
		return Tensor{}, fmt.Errorf("Resize of %v without %d scales or sizes", x.Dims, r)
	}
	st := rowMajor(x.Dims)
	return gather(x, dims, func(a, p int) int { return min(int(math.Floor(float64(p)/scales[a])), x.Dims[a]-1) * st[a] }), nil
}
