package onnxref

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

var unary = map[string]func(float64) float64{
	"Relu":    func(x float64) float64 { return math.Max(x, 0) },
	"Sigmoid": func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
	"Sqrt":    math.Sqrt,
	"Neg":     func(x float64) float64 { return -x },
	"Exp":     math.Exp,
	"Tanh":    math.Tanh,
}

var binary = map[string]func(a, b float64) float64{
	"Add": func(a, b float64) float64 { return a + b },
	"Sub": func(a, b float64) float64 { return a - b },
	"Mul": func(a, b float64) float64 { return a * b },
	"Div": func(a, b float64) float64 { return a / b },
	"Pow": math.Pow,
}

func mapT(x Tensor, f func(float64) float64) Tensor {
	y := Tensor{Dims: x.Dims, V: make([]float64, len(x.V))}
	for k, v := range x.V {
		y.V[k] = f(v)
	}
	return y
}

// broadcastDims is numpy's broadcast of two shapes.
func broadcastDims(a, b []int) ([]int, error) {
	r := max(len(a), len(b))
	out := make([]int, r)
	for k := range r {
		da, db := 1, 1
		if i := k - (r - len(a)); i >= 0 {
			da = a[i]
		}
		if i := k - (r - len(b)); i >= 0 {
			db = b[i]
		}
		switch {
		case da == db || db == 1:
			out[k] = da
		case da == 1:
			out[k] = db
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast", a, b)
		}
	}
	return out, nil
}

// bcastIndex maps every row-major index of out to that of src broadcast
// to it.
func bcastIndex(out, src []int) []int {
	r := len(out)
	stride := make([]int, r)
	m := 1
	for k := len(src) - 1; k >= 0; k-- {
		if src[k] != 1 {
			stride[r-len(src)+k] = m
		}
		m *= src[k]
	}
	idx := make([]int, size(out))
	pos := make([]int, r)
	for i := range idx {
		off := 0
		for a, p := range pos {
			off += p * stride[a]
		}
		idx[i] = off
		for a := r - 1; a >= 0; a-- {
			pos[a]++
			if pos[a] < out[a] {
				break
			}
			pos[a] = 0
		}
	}
	return idx
}

func broadcast(a, b Tensor, f func(a, b float64) float64) (Tensor, error) {
	dims, err := broadcastDims(a.Dims, b.Dims)
	if err != nil {
		return Tensor{}, err
	}
	ia, ib := bcastIndex(dims, a.Dims), bcastIndex(dims, b.Dims)
	y := Tensor{Dims: dims, V: make([]float64, size(dims))}
	for k := range y.V {
		y.V[k] = f(a.V[ia[k]], b.V[ib[k]])
	}
	return y, nil
}

func clip(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	if e.opset < 11 {
		l, err := n.Float("min", float32(math.Inf(-1)))
		if err != nil {
			return Tensor{}, err
		}
		h, err := n.Float("max", float32(math.Inf(1)))
		if err != nil {
			return Tensor{}, err
		}
		lo, hi = float64(l), float64(h)
	} else {
		for k, p := range []*float64{&lo, &hi} {
			t, ok, err := e.in(n, k+1)
			if err != nil {
				return Tensor{}, err
			}
			if ok {
				if len(t.V) != 1 {
					return Tensor{}, fmt.Errorf("Clip bound %d has %d values", k+1, len(t.V))
				}
				*p = t.V[0]
			}
		}
	}
	return mapT(x, func(v float64) float64 { return math.Min(math.Max(v, lo), hi) }), nil
}

func hardSigmoid(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	alpha, err := n.Float("alpha", 0.2)
	if err != nil {
		return Tensor{}, err
	}
	beta, err := n.Float("beta", 0.5)
	if err != nil {
		return Tensor{}, err
	}
	return mapT(x, func(v float64) float64 { return math.Min(math.Max(float64(alpha)*v+float64(beta), 0), 1) }), nil
}

// matMul is numpy's matmul of stacks of matrices, leading axes broadcast.
func matMul(e *evaluator, n *onnx.Node) (Tensor, error) {
	a, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	b, err := e.need(n, 1)
	if err != nil {
		return Tensor{}, err
	}
	ra, rb := len(a.Dims), len(b.Dims)
	if ra < 2 || rb < 2 {
		return Tensor{}, fmt.Errorf("MatMul of ranks %d and %d (only matrices and stacks of them)", ra, rb)
	}
	M, K, N := a.Dims[ra-2], a.Dims[ra-1], b.Dims[rb-1]
	if b.Dims[rb-2] != K {
		return Tensor{}, fmt.Errorf("MatMul of %v and %v", a.Dims, b.Dims)
	}
	lead, err := broadcastDims(a.Dims[:ra-2], b.Dims[:rb-2])
	if err != nil {
		return Tensor{}, err
	}
	ia, ib := bcastIndex(lead, a.Dims[:ra-2]), bcastIndex(lead, b.Dims[:rb-2])
	dims := append(append([]int(nil), lead...), M, N)
	y := Tensor{Dims: dims, V: make([]float64, size(dims))}
	for s := range ia {
		am, bm, ym := a.V[ia[s]*M*K:], b.V[ib[s]*K*N:], y.V[s*M*N:]
		for i := range M {
			row := ym[i*N : (i+1)*N]
			for k := range K {
				v, br := am[i*K+k], bm[k*N:(k+1)*N]
				for j, bv := range br {
					row[j] += v * bv
				}
			}
		}
	}
	return y, nil
}

// gemm is alpha·A'·B' + beta·C, A' and B' optionally transposed.
func gemm(e *evaluator, n *onnx.Node) (Tensor, error) {
	a, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	b, err := e.need(n, 1)
	if err != nil {
		return Tensor{}, err
	}
	if len(a.Dims) != 2 || len(b.Dims) != 2 {
		return Tensor{}, fmt.Errorf("Gemm of %v and %v (matrices only)", a.Dims, b.Dims)
	}
	var f [2]float32
	var tr [2]int64
	for k, name := range []string{"alpha", "beta"} {
		if f[k], err = n.Float(name, 1); err != nil {
			return Tensor{}, err
		}
	}
	for k, name := range []string{"transA", "transB"} {
		if tr[k], err = n.Int(name, 0); err != nil {
			return Tensor{}, err
		}
	}
	at := func(t Tensor, trans int64, i, j int) float64 {
		if trans != 0 {
			return t.V[j*t.Dims[1]+i]
		}
		return t.V[i*t.Dims[1]+j]
	}
	M, K := a.Dims[0], a.Dims[1]
	if tr[0] != 0 {
		M, K = K, M
	}
	N, KB := b.Dims[1], b.Dims[0]
	if tr[1] != 0 {
		N, KB = KB, N
	}
	if KB != K {
		return Tensor{}, fmt.Errorf("Gemm of %v and %v (transA %d, transB %d)", a.Dims, b.Dims, tr[0], tr[1])
	}
	y := Tensor{Dims: []int{M, N}, V: make([]float64, M*N)}
	for i := range M {
		for j := range N {
			var acc float64
			for k := range K {
				acc += at(a, tr[0], i, k) * at(b, tr[1], k, j)
			}
			y.V[i*N+j] = float64(f[0]) * acc
		}
	}
	c, ok, err := e.in(n, 2)
	if err != nil || !ok {
		return y, err
	}
	return broadcast(y, c, func(p, q float64) float64 { return p + float64(f[1])*q })
}

// softmax is along axis (opset 13), or over the axes from axis on
// flattened together (before).
func softmax(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	def := int64(1)
	if e.opset >= 13 {
		def = -1
	}
	ax, err := n.Int("axis", def)
	if err != nil {
		return Tensor{}, err
	}
	a, err := normAxis(ax, len(x.Dims))
	if err != nil {
		return Tensor{}, err
	}
	inner := size(x.Dims[a+1:])
	width := x.Dims[a]
	if e.opset < 13 {
		width, inner = size(x.Dims[a:]), 1
	}
	y := Tensor{Dims: x.Dims, V: make([]float64, len(x.V))}
	for o := 0; o < len(x.V); o += width * inner {
		for i := range inner {
			m := math.Inf(-1)
			for j := range width {
				m = math.Max(m, x.V[o+j*inner+i])
			}
			var sum float64
			for j := range width {
				sum += math.Exp(x.V[o+j*inner+i] - m)
			}
			for j := range width {
				y.V[o+j*inner+i] = math.Exp(x.V[o+j*inner+i]-m) / sum
			}
		}
	}
	return y, nil
}

// reduceMean averages over its axes attribute (all axes without one),
// keeping them as 1s unless keepdims is 0.
func reduceMean(e *evaluator, n *onnx.Node) (Tensor, error) {
	x, err := e.need(n, 0)
	if err != nil {
		return Tensor{}, err
	}
	axes, err := n.Ints("axes")
	if err != nil {
		return Tensor{}, err
	}
	if len(n.Inputs) > 1 && n.Inputs[1] != "" { // opset 18: axes as an input
		a, err := e.need(n, 1)
		if err != nil {
			return Tensor{}, err
		}
		axes = axes[:0]
		for _, v := range a.V {
			axes = append(axes, int64(v))
		}
	}
	if noop, err := n.Int("noop_with_empty_axes", 0); err != nil || noop != 0 && len(axes) == 0 {
		return Tensor{}, fmt.Errorf("noop_with_empty_axes is not implemented (%v)", err)
	}
	keep, err := n.Int("keepdims", 1)
	if err != nil {
		return Tensor{}, err
	}
	r := len(x.Dims)
	red := make([]bool, r)
	for _, a := range axes {
		k, err := normAxis(a, r)
		if err != nil {
			return Tensor{}, err
		}
		red[k] = true
	}
	kept := make([]int, r)
	var dims []int
	cnt := 1
	for a, d := range x.Dims {
		kept[a] = d
		if red[a] || len(axes) == 0 {
			kept[a], cnt = 1, cnt*d
			if keep != 0 {
				dims = append(dims, 1)
			}
			continue
		}
		dims = append(dims, d)
	}
	idx := bcastIndex(x.Dims, kept)
	y := Tensor{Dims: dims, V: make([]float64, size(kept))}
	for k, v := range x.V {
		y.V[idx[k]] += v
	}
	for k := range y.V {
		y.V[k] /= float64(cnt)
	}
	return y, nil
}

func normAxis(a int64, r int) (int, error) {
	if a < 0 {
		a += int64(r)
	}
	if a < 0 || a >= int64(r) {
		return 0, fmt.Errorf("axis %d out of range for rank %d", a, r)
	}
	return int(a), nil
}
