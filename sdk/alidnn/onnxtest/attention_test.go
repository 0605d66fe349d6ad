package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// MatMul of two computed tensors as attention runs it: scores Q·Kᵀ and
// the context attention·V over a sequence (5) that fills no 16-lane block,
// and stacks that broadcast (B's over A's, A's over B's).

func init() { caseFamilies = append(caseFamilies, attentionCases) }

// repeatStacks repeats the stacked matrices v r times over, as numpy
// broadcasts leading axes [m] to [r, m].
func repeatStacks(v []float32, r int) []float32 {
	out := make([]float32, 0, r*len(v))
	for range r {
		out = append(out, v...)
	}
	return out
}

func attentionCases() []genCase {
	w := func(name string, k, n int, seed float64) (*onnx.Tensor, []float32) {
		v := mapF(data([]int64{int64(k), int64(n)}, seed), func(v float32) float32 { return v / 10 })
		return onnx.NewFloat32(name, []int64{int64(k), int64(n)}, v), v
	}
	all0 := func(int) int { return 0 }
	same := func(i int) int { return i }
	hd := []int64{1, 5, 2, 16}
	head := func(name string, proj string, perm ...int64) []node {
		return []node{
			{op: "MatMul", inputs: []string{name, "w" + name}, outputs: []string{"p" + name}},
			{op: "Reshape", inputs: []string{"p" + name, "split"}, outputs: []string{"h" + name}},
			{op: "Transpose", inputs: []string{"h" + name}, outputs: []string{proj}, attrs: []attr{isAttr("perm", perm...)}},
		}
	}
	xd := []int64{1, 5, 32}
	qx, kx, vx := data(xd, 121), data(xd, 122), data(xd, 123)
	wq, wqv := w("wq", 32, 32, 124)
	wk, wkv := w("wk", 32, 32, 125)
	wv, wvv := w("wv", 32, 32, 126)
	heads := func(x, wt []float32) []float32 {
		return permuteRef(mmRef(x, wt, 1, 5, 32, 32, all0), hd, []int{0, 2, 1, 3})
	}
	q, k, v := heads(qx, wqv), heads(kx, wkv), heads(vx, wvv)

	// Scores [1,2,5,5]: K transposed to [1,2,16,5] with its rows on the
	// lanes, read as Bᵀ padded to 16 rows.
	sd := []int64{1, 2, 5, 5}
	scores := mmRef(q, transposeLast(k, 2, 5, 16), 2, 5, 16, 5, same)
	scoreCase := genCase{name: "matmul_attention_scores_short", opset: 13, int8: true,
		g: graph{
			nodes: append(append(append([]node{expInts("split", hd...)},
				head("q", "qh", 0, 2, 1, 3)...), head("k", "kt", 0, 2, 3, 1)...),
				node{op: "MatMul", inputs: []string{"qh", "kt"}, outputs: []string{"y"}}),
			inits:   []*onnx.Tensor{wq, wk},
			inputs:  []valueInfo{fvi("q", xd), fvi("k", xd)},
			outputs: []valueInfo{fvi("y", sd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("q", xd, qx), onnx.NewFloat32("k", xd, kx)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", sd, scores)},
	}

	// Context [1,2,5,16]: weights [1,2,5,5] (a MatMul of a graph input)
	// by V, whose 5 rows are padded with zeros to a block before the array
	// transposes it.
	ad := []int64{1, 2, 5, 8}
	ax := data(ad, 127)
	wa, wav := w("wa", 8, 5, 128)
	att := mmRef(ax, wav, 2, 5, 8, 5, all0)
	cd := []int64{1, 2, 5, 16}
	contextCase := genCase{name: "matmul_attention_context_short", opset: 13, int8: true,
		g: graph{
			nodes: append(append([]node{expInts("split", hd...),
				{op: "MatMul", inputs: []string{"a", "wa"}, outputs: []string{"att"}}},
				head("v", "vh", 0, 2, 1, 3)...),
				node{op: "MatMul", inputs: []string{"att", "vh"}, outputs: []string{"y"}}),
			inits:   []*onnx.Tensor{wa, wv},
			inputs:  []valueInfo{fvi("a", ad), fvi("v", xd)},
			outputs: []valueInfo{fvi("y", cd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("a", ad, ax), onnx.NewFloat32("v", xd, vx)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", cd, mmRef(att, v, 2, 5, 5, 16, same))},
	}

	// A [2,3,4,16] by B [3,16,16]: B's three matrices repeat over A's
	// leading 2.
	a4d, b3d, y4d := []int64{2, 3, 4, 8}, []int64{3, 16, 8}, []int64{2, 3, 4, 16}
	a4, b3 := data(a4d, 129), data(b3d, 130)
	w1, w1v := w("w1", 8, 16, 131)
	w2, w2v := w("w2", 8, 16, 132)
	am, bm := mmRef(a4, w1v, 6, 4, 8, 16, all0), mmRef(b3, w2v, 3, 16, 8, 16, all0)
	bcastB := genCase{name: "matmul_computed_broadcast_b", opset: 13, int8: true,
		g: graph{
			nodes: []node{
				{op: "MatMul", inputs: []string{"a", "w1"}, outputs: []string{"am"}},
				{op: "MatMul", inputs: []string{"b", "w2"}, outputs: []string{"bm"}},
				{op: "MatMul", inputs: []string{"am", "bm"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{w1, w2},
			inputs:  []valueInfo{fvi("a", a4d), fvi("b", b3d)},
			outputs: []valueInfo{fvi("y", y4d)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("a", a4d, a4), onnx.NewFloat32("b", b3d, b3)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", y4d, mmRef(am, bm, 6, 4, 16, 16, func(i int) int { return i % 3 }))},
	}

	// A [3,4,20] by B [2,3,20,32]: A's matrices repeat over B's leading 2,
	// and B's 20 rows are padded to 32 before the array transposes it.
	a3d, b4d, o4d := []int64{3, 4, 8}, []int64{2, 3, 20, 8}, []int64{2, 3, 4, 32}
	a3, b4 := data(a3d, 133), data(b4d, 134)
	w3, w3v := w("w3", 8, 20, 135)
	w4, w4v := w("w4", 8, 32, 136)
	a3m, b4m := mmRef(a3, w3v, 3, 4, 8, 20, all0), mmRef(b4, w4v, 6, 20, 8, 32, all0)
	bcastA := genCase{name: "matmul_computed_broadcast_a", opset: 13, int8: true,
		g: graph{
			nodes: []node{
				{op: "MatMul", inputs: []string{"a", "w3"}, outputs: []string{"am"}},
				{op: "MatMul", inputs: []string{"b", "w4"}, outputs: []string{"bm"}},
				{op: "MatMul", inputs: []string{"am", "bm"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{w3, w4},
			inputs:  []valueInfo{fvi("a", a3d), fvi("b", b4d)},
			outputs: []valueInfo{fvi("y", o4d)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("a", a3d, a3), onnx.NewFloat32("b", b4d, b4)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", o4d, mmRef(repeatStacks(a3m, 2), b4m, 6, 4, 20, 32, same))},
	}
	return []genCase{scoreCase, contextCase, bcastB, bcastA}
}
