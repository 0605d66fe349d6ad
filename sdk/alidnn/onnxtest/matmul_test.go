package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of MatMul beyond constant weights: two computed operands (stacks
// and single matrices), attention's Q·Kᵀ with a Transpose of the computed
// K, a Transpose of the last two axes alone, and constant weights whose
// leading axes broadcast against the input's.

func init() { caseFamilies = append(caseFamilies, matmulCases) }

// mmRef multiplies stacks a [batch, m, k] and b [bb, k, n], b's matrix
// bsel(i) going with a's matrix i, in float64.
func mmRef(a, b []float32, batch, m, k, n int, bsel func(int) int) []float32 {
	y := make([]float32, batch*m*n)
	for i := range batch {
		j0 := bsel(i)
		for r := range m {
			for c := range n {
				var s float64
				for t := range k {
					s += float64(a[(i*m+r)*k+t]) * float64(b[(j0*k+t)*n+c])
				}
				y[(i*m+r)*n+c] = float32(s)
			}
		}
	}
	return y
}

func relu(v []float32) []float32 { return mapF(v, func(x float32) float32 { return max(x, 0) }) }

// transposeLast swaps the last two axes of a stack of r×c matrices.
func transposeLast(v []float32, batch, r, c int) []float32 {
	t := make([]float32, len(v))
	for i := range batch {
		for y := range r {
			for x := range c {
				t[(i*c+x)*r+y] = v[(i*r+y)*c+x]
			}
		}
	}
	return t
}

func matmulCases() []genCase {
	same := func(i int) int { return i }
	w := func(name string, k, n int, seed float64) (*onnx.Tensor, []float32) {
		v := mapF(data([]int64{int64(k), int64(n)}, seed), func(v float32) float32 { return v / 10 })
		return onnx.NewFloat32(name, []int64{int64(k), int64(n)}, v), v
	}
	all0 := func(int) int { return 0 }
	// Two computed operands, a stack of 2: A from a MatMul (its columns on
	// the lanes), B once from a Relu (its rows on the lanes, so already
	// Bᵀ to the engine) and once from a MatMul (transposed on the device).
	ad, zd, yd := []int64{2, 16, 32}, []int64{2, 32, 24}, []int64{2, 16, 48}
	x, z := data(ad, 71), data(zd, 72)
	wa, wav := w("wa", 32, 32, 78)
	wb, wbv := w("wb", 24, 48, 79)
	a := mmRef(x, wav, 2, 16, 32, 32, all0)
	zr := relu(data([]int64{2, 32, 48}, 72))
	computed := genCase{name: "matmul_computed_operands", opset: 13,
		g: graph{
			nodes: []node{
				{op: "MatMul", inputs: []string{"x", "wa"}, outputs: []string{"a"}},
				{op: "Relu", inputs: []string{"z"}, outputs: []string{"b"}},
				{op: "MatMul", inputs: []string{"a", "b"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{wa},
			inputs:  []valueInfo{fvi("x", ad), fvi("z", []int64{2, 32, 48})},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", ad, x), onnx.NewFloat32("z", []int64{2, 32, 48}, data([]int64{2, 32, 48}, 72))},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, mmRef(a, zr, 2, 16, 32, 48, same))},
	}
	b := mmRef(z, wbv, 2, 32, 24, 48, all0)
	transposed := genCase{name: "matmul_computed_transposed", opset: 13,
		g: graph{
			nodes: []node{
				{op: "MatMul", inputs: []string{"x", "wa"}, outputs: []string{"a"}},
				{op: "MatMul", inputs: []string{"z", "wb"}, outputs: []string{"b"}},
				{op: "MatMul", inputs: []string{"a", "b"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{wa, wb},
			inputs:  []valueInfo{fvi("x", ad), fvi("z", zd)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", ad, x), onnx.NewFloat32("z", zd, z)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, mmRef(a, b, 2, 16, 32, 48, same))},
	}
	// Attention scores: (X·Wq)·(Y·Wk)ᵀ/√32.
	qd, kd, sd := []int64{2, 16, 32}, []int64{2, 48, 32}, []int64{2, 16, 48}
	q, k := data(qd, 73), data(kd, 74)
	wq, wqv := w("wq", 32, 32, 80)
	wk, wkv := w("wk", 32, 32, 81)
	qp, kp := mmRef(q, wqv, 2, 16, 32, 32, all0), mmRef(k, wkv, 2, 48, 32, 32, all0)
	scores := mapF(mmRef(qp, transposeLast(kp, 2, 48, 32), 2, 16, 32, 48, same), func(v float32) float32 { return v * 0.125 })
	attention := genCase{name: "matmul_attention_scores", opset: 13,
		g: graph{
			nodes: []node{
				{op: "MatMul", inputs: []string{"q", "wq"}, outputs: []string{"pq"}},
				{op: "MatMul", inputs: []string{"k", "wk"}, outputs: []string{"pk"}},
				{op: "Transpose", inputs: []string{"pk"}, outputs: []string{"kt"}, attrs: []attr{isAttr("perm", 0, 2, 1)}},
				{op: "MatMul", inputs: []string{"pq", "kt"}, outputs: []string{"s"}},
				{op: "Mul", inputs: []string{"s", "scale"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{wq, wk, scalar("scale", 0.125)},
			inputs:  []valueInfo{fvi("q", qd), fvi("k", kd)},
			outputs: []valueInfo{fvi("y", sd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("q", qd, q), onnx.NewFloat32("k", kd, k)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", sd, scores)},
	}
	// A Transpose of the last two axes of a computed stack.
	td, tt := []int64{3, 16, 32}, []int64{3, 32, 16}
	v := data(td, 75)
	wt, wtv := w("wt", 32, 32, 82)
	transpose := genCase{name: "transpose_last_axes", opset: 13,
		g: graph{
			nodes: []node{
				{op: "MatMul", inputs: []string{"x", "wt"}, outputs: []string{"r"}},
				{op: "Transpose", inputs: []string{"r"}, outputs: []string{"y"}, attrs: []attr{isAttr("perm", 0, 2, 1)}},
			},
			inits:   []*onnx.Tensor{wt},
			inputs:  []valueInfo{fvi("x", td)},
			outputs: []valueInfo{fvi("y", tt)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", td, v)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", tt, transposeLast(mmRef(v, wtv, 3, 16, 32, 32, all0), 3, 16, 32))},
	}
	// Constant weights [3, 32, 24] broadcast over an input [2, 3, 4, 32].
	xd, wd, od := []int64{2, 3, 4, 32}, []int64{3, 32, 24}, []int64{2, 3, 4, 24}
	xb := data(xd, 76)
	wc := mapF(data(wd, 77), func(v float32) float32 { return v / 10 })
	broadcast := genCase{name: "matmul_broadcast_weights", opset: 13,
		g: graph{
			nodes:   []node{{op: "MatMul", inputs: []string{"x", "w"}, outputs: []string{"y"}}},
			inits:   []*onnx.Tensor{onnx.NewFloat32("w", wd, wc)},
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", od)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, xb)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", od, mmRef(xb, wc, 6, 4, 32, 24, func(i int) int { return i % 3 }))},
	}
	return []genCase{computed, transposed, attention, transpose, broadcast}
}
