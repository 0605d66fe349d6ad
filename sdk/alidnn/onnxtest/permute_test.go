package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Transposes of computed tensors that reorder their data, run on the
// engine: attention's head split [N,S,H,D] → [N,H,S,D], its keys'
// [N,S,H,D] → [N,H,D,S], the merge back [N,H,S,D] → [N,S,H·D], a vision
// transformer's token flatten [N,C,H·W] → [N,H·W,C], and rank-5
// permutations of outer and row axes.

func init() { caseFamilies = append(caseFamilies, permuteCases) }

// permuteRef transposes v of shape dims by perm.
func permuteRef(v []float32, dims []int64, perm []int) []float32 {
	r := len(dims)
	st := make([]int, r)
	m := 1
	for a := r - 1; a >= 0; a-- {
		st[a] = m
		m *= int(dims[a])
	}
	out := make([]int, r)
	for k, a := range perm {
		out[k] = int(dims[a])
	}
	y := make([]float32, len(v))
	idx := make([]int, r)
	for j := range y {
		i := 0
		for k, a := range perm {
			i += idx[k] * st[a]
		}
		y[j] = v[i]
		for a := r - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < out[a] {
				break
			}
			idx[a] = 0
		}
	}
	return y
}

func ints64(v []int) []int64 {
	out := make([]int64, len(v))
	for k, x := range v {
		out[k] = int64(x)
	}
	return out
}

func permuted(dims []int64, perm []int) []int64 {
	out := make([]int64, len(perm))
	for k, a := range perm {
		out[k] = dims[a]
	}
	return out
}

func permuteCases() []genCase {
	w := func(name string, k, n int, seed float64) (*onnx.Tensor, []float32) {
		v := mapF(data([]int64{int64(k), int64(n)}, seed), func(v float32) float32 { return v / 10 })
		return onnx.NewFloat32(name, []int64{int64(k), int64(n)}, v), v
	}
	all0 := func(int) int { return 0 }
	same := func(i int) int { return i }
	// heads projects x [N,S,32] by a MatMul, splits the 32 columns into
	// two heads of 16 and transposes them by perm into a Relu.
	heads := func(name string, n, s int, perm []int, seed float64) genCase {
		xd := []int64{int64(n), int64(s), 32}
		hd := []int64{int64(n), int64(s), 2, 16}
		yd := permuted(hd, perm)
		x := data(xd, seed)
		wq, wv := w("w", 32, 32, seed+1)
		p := mmRef(x, wv, n, s, 32, 32, all0)
		return genCase{name: name, opset: 13,
			g: graph{
				nodes: []node{
					{op: "MatMul", inputs: []string{"x", "w"}, outputs: []string{"p"}},
					expInts("split", hd...),
					{op: "Reshape", inputs: []string{"p", "split"}, outputs: []string{"h"}},
					{op: "Transpose", inputs: []string{"h"}, outputs: []string{"t"}, attrs: []attr{isAttr("perm", ints64(perm)...)}},
					{op: "Relu", inputs: []string{"t"}, outputs: []string{"y"}},
				},
				inits:   []*onnx.Tensor{wq},
				inputs:  []valueInfo{fvi("x", xd)},
				outputs: []valueInfo{fvi("y", yd)},
			},
			ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
			outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, relu(permuteRef(p, hd, perm)))},
		}
	}
	split := heads("transpose_head_split", 1, 5, []int{0, 2, 1, 3}, 101)
	keys := heads("transpose_head_keys", 2, 16, []int{0, 2, 3, 1}, 103)

	// The merge: each head's [S,16] by a shared [16,16], the heads
	// transposed back next to each other, flattened to [1,S,32] and
	// projected.
	md, cd, od := []int64{1, 2, 5, 16}, []int64{1, 5, 32}, []int64{1, 5, 8}
	mx := data(md, 105)
	wh, whv := w("wh", 16, 16, 106)
	wo, wov := w("wo", 32, 8, 107)
	ctx := permuteRef(mmRef(mx, whv, 2, 5, 16, 16, all0), md, []int{0, 2, 1, 3})
	merge := genCase{name: "transpose_head_merge", opset: 13, int8: true,
		g: graph{
			nodes: []node{
				{op: "MatMul", inputs: []string{"x", "wh"}, outputs: []string{"a"}},
				{op: "Transpose", inputs: []string{"a"}, outputs: []string{"t"}, attrs: []attr{isAttr("perm", 0, 2, 1, 3)}},
				expInts("merged", cd...),
				{op: "Reshape", inputs: []string{"t", "merged"}, outputs: []string{"c"}},
				{op: "MatMul", inputs: []string{"c", "wo"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{wh, wo},
			inputs:  []valueInfo{fvi("x", md)},
			outputs: []valueInfo{fvi("y", od)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", md, mx)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", od, mmRef(ctx, wov, 1, 5, 32, 8, same))},
	}

	// A patch embedding's 1×1 Conv to 20 channels, its pixels flattened
	// to tokens and transposed to [1,16,20] for a MatMul.
	px := []int64{1, 3, 4, 4}
	pv := data(px, 108)
	pw := mapF(data([]int64{20, 3, 1, 1}, 109), func(v float32) float32 { return v / 10 })
	emb := make([]float32, 20*16)
	for o := range 20 {
		for p := range 16 {
			var s float64
			for c := range 3 {
				s += float64(pw[o*3+c]) * float64(pv[c*16+p])
			}
			emb[o*16+p] = float32(s)
		}
	}
	wt, wtv := w("wt", 20, 8, 110)
	td := []int64{1, 16, 8}
	tokens := genCase{name: "transpose_tokens", opset: 13,
		g: graph{
			nodes: []node{
				{op: "Conv", inputs: []string{"x", "pw"}, outputs: []string{"e"}},
				expInts("flat", 1, 20, 16),
				{op: "Reshape", inputs: []string{"e", "flat"}, outputs: []string{"f"}},
				{op: "Transpose", inputs: []string{"f"}, outputs: []string{"t"}, attrs: []attr{isAttr("perm", 0, 2, 1)}},
				{op: "MatMul", inputs: []string{"t", "wt"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{onnx.NewFloat32("pw", []int64{20, 3, 1, 1}, pw), wt},
			inputs:  []valueInfo{fvi("x", px)},
			outputs: []valueInfo{fvi("y", td)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", px, pv)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", td, mmRef(permuteRef(emb, []int64{1, 20, 16}, []int{0, 2, 1}), wtv, 1, 16, 20, 8, same))},
	}

	// Rank 5: the 20 channels on the lanes (two blocks, one partial) stay
	// whole while the other axes trade places, the channels moving last.
	r5 := []int64{2, 20, 3, 4, 5}
	v5 := data(r5, 111)
	rank5 := func(name string, perm []int) genCase {
		yd := permuted(r5, perm)
		return genCase{name: name, opset: 13,
			g: graph{
				nodes: []node{
					{op: "Relu", inputs: []string{"x"}, outputs: []string{"r"}},
					{op: "Transpose", inputs: []string{"r"}, outputs: []string{"t"}, attrs: []attr{isAttr("perm", ints64(perm)...)}},
					{op: "Neg", inputs: []string{"t"}, outputs: []string{"y"}},
				},
				inputs:  []valueInfo{fvi("x", r5)},
				outputs: []valueInfo{fvi("y", yd)},
			},
			ins:  []*onnx.Tensor{onnx.NewFloat32("x", r5, v5)},
			outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, mapF(permuteRef(relu(v5), r5, perm), func(v float32) float32 { return -v }))},
		}
	}
	return []genCase{split, keys, merge, tokens,
		rank5("transpose_rank5_rows", []int{0, 1, 4, 2, 3}),
		rank5("transpose_rank5_lanes_last", []int{3, 0, 2, 4, 1})}
}
