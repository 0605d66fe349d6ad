package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Layer normalisation over the last axis of a computed [1,5,20] (one
// partial block): LayerNormalization (opset 17) into a MatMul, the
// decomposition exporters write before it (ReduceMean, Sub, Pow 2,
// ReduceMean, Add ε, Sqrt, Div, Mul, Add), and RMSNorm's (Pow 2,
// ReduceMean, Add ε, Sqrt, Div, Mul); and LayerNormalization without a
// bias of a graph input.

func init() { caseFamilies = append(caseFamilies, layerNormCases) }

// normRef normalises each row of C values of x in float64: minus the
// row's mean unless rms, divided by the root of the mean square plus eps,
// times gamma plus beta (nil: none).
func normRef(x []float32, C int, gamma, beta []float32, eps float64, rms bool) []float32 {
	y := make([]float32, len(x))
	for r := 0; r < len(x); r += C {
		var mean float64
		if !rms {
			for _, v := range x[r : r+C] {
				mean += float64(v)
			}
			mean /= float64(C)
		}
		var sq float64
		for _, v := range x[r : r+C] {
			d := float64(v) - mean
			sq += d * d
		}
		s := math.Sqrt(sq/float64(C) + eps)
		for k, v := range x[r : r+C] {
			o := (float64(v) - mean) / s * float64(gamma[k])
			if beta != nil {
				o += float64(beta[k])
			}
			y[r+k] = float32(o)
		}
	}
	return y
}

func layerNormCases() []genCase {
	xd := []int64{1, 5, 8}
	x := data(xd, 141)
	proj := func(C int, seed float64) (*onnx.Tensor, []float32) {
		w := mapF(data([]int64{8, int64(C)}, seed), func(v float32) float32 { return v / 10 })
		return onnx.NewFloat32("w", []int64{8, int64(C)}, w), mmRef(x, w, 1, 5, 8, C, func(int) int { return 0 })
	}
	affine := func(C int, seed float64) (g, b []float32, inits []*onnx.Tensor) {
		g = mapF(data([]int64{int64(C)}, seed), func(v float32) float32 { return 1 + v/10 })
		b = mapF(data([]int64{int64(C)}, seed+1), func(v float32) float32 { return v / 10 })
		return g, b, []*onnx.Tensor{onnx.NewFloat32("g", []int64{int64(C)}, g), onnx.NewFloat32("b", []int64{int64(C)}, b)}
	}

	// On 20 channels into a MatMul, which reads the padding lanes too.
	yd := []int64{1, 5, 8}
	w, p := proj(20, 142)
	g, b, inits := affine(20, 143)
	wo := mapF(data([]int64{20, 8}, 146), func(v float32) float32 { return v / 10 })
	opset17 := genCase{name: "layernorm", opset: 17, int8: true,
		g: graph{
			nodes: []node{
				{op: "MatMul", inputs: []string{"x", "w"}, outputs: []string{"p"}},
				{op: "LayerNormalization", inputs: []string{"p", "g", "b"}, outputs: []string{"n"}, attrs: []attr{fAttr("epsilon", 1e-5)}},
				{op: "MatMul", inputs: []string{"n", "wo"}, outputs: []string{"y"}},
			},
			inits:   append(inits, w, onnx.NewFloat32("wo", []int64{20, 8}, wo)),
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, mmRef(normRef(p, 20, g, b, float64(float32(1e-5)), false), wo, 1, 5, 20, 8, func(int) int { return 0 }))},
	}

	zd := []int64{1, 5, 20}
	w20, p20 := proj(20, 144)
	g20, b20, inits20 := affine(20, 145)
	mean := func(in, out string) node {
		return node{op: "ReduceMean", inputs: []string{in}, outputs: []string{out}, attrs: []attr{isAttr("axes", -1)}}
	}
	decomposed := genCase{name: "layernorm_decomposed", opset: 13, int8: true,
		g: graph{
			nodes: []node{
				{op: "MatMul", inputs: []string{"x", "w"}, outputs: []string{"p"}},
				mean("p", "m"),
				{op: "Sub", inputs: []string{"p", "m"}, outputs: []string{"d"}},
				{op: "Pow", inputs: []string{"d", "two"}, outputs: []string{"d2"}},
				mean("d2", "v"),
				{op: "Add", inputs: []string{"v", "eps"}, outputs: []string{"ve"}},
				{op: "Sqrt", inputs: []string{"ve"}, outputs: []string{"s"}},
				{op: "Div", inputs: []string{"d", "s"}, outputs: []string{"n"}},
				{op: "Mul", inputs: []string{"n", "g"}, outputs: []string{"sc"}},
				{op: "Add", inputs: []string{"sc", "b"}, outputs: []string{"y"}},
			},
			inits:   append(inits20, w20, scalar("two", 2), scalar("eps", 1e-5)),
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", zd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", zd, normRef(p20, 20, g20, b20, float64(float32(1e-5)), false))},
	}
	rms := genCase{name: "rmsnorm_decomposed", opset: 13, int8: true,
		g: graph{
			nodes: []node{
				{op: "MatMul", inputs: []string{"x", "w"}, outputs: []string{"p"}},
				{op: "Pow", inputs: []string{"p", "two"}, outputs: []string{"p2"}},
				mean("p2", "v"),
				{op: "Add", inputs: []string{"v", "eps"}, outputs: []string{"ve"}},
				{op: "Sqrt", inputs: []string{"ve"}, outputs: []string{"s"}},
				{op: "Div", inputs: []string{"p", "s"}, outputs: []string{"n"}},
				{op: "Mul", inputs: []string{"n", "g"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{inits20[0], w20, scalar("two", 2), scalar("eps", 1e-6)},
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", zd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", zd, normRef(p20, 20, g20, nil, float64(float32(1e-6)), true))},
	}
	// Of a graph input (a transformer's embeddings), without a bias.
	ed := []int64{1, 5, 20}
	e := data(ed, 147)
	input := genCase{name: "layernorm_input", opset: 17, int8: true,
		g: graph{
			nodes: []node{
				{op: "LayerNormalization", inputs: []string{"e", "g"}, outputs: []string{"n"}},
				{op: "MatMul", inputs: []string{"n", "wo"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{inits20[0], onnx.NewFloat32("wo", []int64{20, 8}, wo)},
			inputs:  []valueInfo{fvi("e", ed)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("e", ed, e)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, mmRef(normRef(e, 20, g20, nil, float64(float32(1e-5)), false), wo, 1, 5, 20, 8, func(int) int { return 0 }))},
	}
	return []genCase{opset17, decomposed, rms, input}
}
