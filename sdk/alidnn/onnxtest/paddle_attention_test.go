package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Attention as paddle2onnx writes PaddleOCR's SVTR mixer (PP-OCRv4's
// recogniser, opset 9): heads of 15 values, which straddle 16-lane blocks.
// The fused qkv projection [1, S, 3·H] is reshaped to [1, S, 3, heads,
// 15], permuted (2, 0, 3, 1, 4) and cut by Slice → Squeeze along axis 0, q
// scaled by 15^−½ before q·kᵀ (k permuted (0, 1, 3, 2)), Softmax along
// axis 3, the context permuted back to [1, S, heads, 15] and reshaped to
// [1, S, H] into the output projection. Random weights; the reference is
// a float64 forward pass.

func init() { caseFamilies = append(caseFamilies, paddleAttentionCases) }

const (
	paddleS     = 10
	paddleHeads = 2
	paddleD     = 15
	paddleH     = paddleHeads * paddleD
)

func paddleAttentionCases() []genCase {
	w := func(name string, dims []int64, seed float64) (*onnx.Tensor, []float32) {
		v := mapF(data(dims, seed), func(v float32) float32 { return v / 10 })
		return onnx.NewFloat32(name, dims, v), v
	}
	xd := []int64{1, paddleS, paddleH}
	x := data(xd, 141)
	wqkv, wqkvV := w("wqkv", []int64{paddleH, 3 * paddleH}, 142)
	bqkv, bqkvV := w("bqkv", []int64{3 * paddleH}, 143)
	wo, woV := w("wo", []int64{paddleH, paddleH}, 144)
	bo, boV := w("bo", []int64{paddleH}, 145)

	x64 := make([]float64, len(x))
	for k, v := range x {
		x64[k] = float64(v)
	}
	qkv := linear(x64, wqkvV, bqkvV, paddleH, 3*paddleH)
	part := func(p int) []float64 {
		out := make([]float64, paddleS*paddleH)
		for s := range paddleS {
			copy(out[s*paddleH:(s+1)*paddleH], qkv[s*3*paddleH+p*paddleH:])
		}
		return out
	}
	ctx := attention64(part(0), part(1), part(2), 1, paddleS, paddleHeads, paddleD, func(int, int, int) float64 { return 0 })
	y := linear(ctx, woV, boV, paddleH, paddleH)
	y32 := make([]float32, len(y))
	for k, v := range y {
		y32[k] = float32(v)
	}
	slice := func(k int64, out string) []node {
		return []node{
			{op: "Slice", inputs: []string{"qkv_p"}, outputs: []string{out + "5"}, attrs: []attr{isAttr("axes", 0), isAttr("starts", k), isAttr("ends", k+1)}},
			{op: "Squeeze", inputs: []string{out + "5"}, outputs: []string{out}, attrs: []attr{isAttr("axes", 0)}},
		}
	}
	nodes := append([]node{expInts("qkv_to", 0, -1, 3, paddleHeads, paddleD), expInts("ctx_to", 0, -1, paddleH)},
		linearNodes("x", "wqkv", "bqkv", "qkv")...)
	nodes = append(nodes,
		node{op: "Reshape", inputs: []string{"qkv", "qkv_to"}, outputs: []string{"qkv5"}},
		node{op: "Transpose", inputs: []string{"qkv5"}, outputs: []string{"qkv_p"}, attrs: []attr{isAttr("perm", 2, 0, 3, 1, 4)}})
	nodes = append(nodes, slice(0, "q")...)
	nodes = append(nodes, slice(1, "k")...)
	nodes = append(nodes, slice(2, "v")...)
	nodes = append(nodes,
		node{op: "Mul", inputs: []string{"q", "scale"}, outputs: []string{"qs"}},
		node{op: "Transpose", inputs: []string{"k"}, outputs: []string{"kt"}, attrs: []attr{isAttr("perm", 0, 1, 3, 2)}},
		node{op: "MatMul", inputs: []string{"qs", "kt"}, outputs: []string{"scores"}},
		node{op: "Softmax", inputs: []string{"scores"}, outputs: []string{"probs"}, attrs: []attr{iAttr("axis", 3)}},
		node{op: "MatMul", inputs: []string{"probs", "v"}, outputs: []string{"ctx"}},
		node{op: "Transpose", inputs: []string{"ctx"}, outputs: []string{"ctx_t"}, attrs: []attr{isAttr("perm", 0, 2, 1, 3)}},
		node{op: "Reshape", inputs: []string{"ctx_t", "ctx_to"}, outputs: []string{"ctx_m"}})
	nodes = append(nodes, linearNodes("ctx_m", "wo", "bo", "y")...)
	// Not int8: its 30 random outputs a row have near ties, which the
	// int8 run's argmax comparison cannot tell from errors (the quantised
	// engine is within 3% of the largest output).
	return []genCase{{name: "attention_heads15_paddle", opset: 9,
		g: graph{
			nodes:   nodes,
			inits:   []*onnx.Tensor{wqkv, bqkv, wo, bo, scalar("scale", float32(1/math.Sqrt(paddleD)))},
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", xd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", xd, y32)},
	}}
}
