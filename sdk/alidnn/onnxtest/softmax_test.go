package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Softmax on the engine over the last axis, feeding a MatMul: 20 classes
// (one partial block) of logits up to about ±150, beyond which e^x
// overflows fp32 unless the row's maximum is subtracted first; and 5
// (fewer than a block, three rotation steps).

func init() { caseFamilies = append(caseFamilies, softmaxCases) }

// softmaxRef is Softmax over rows of C values in float64.
func softmaxRef(x []float32, C int) []float32 {
	y := make([]float32, len(x))
	for r := 0; r < len(x); r += C {
		m := math.Inf(-1)
		for _, v := range x[r : r+C] {
			m = math.Max(m, float64(v))
		}
		var s float64
		for _, v := range x[r : r+C] {
			s += math.Exp(float64(v) - m)
		}
		for k, v := range x[r : r+C] {
			y[r+k] = float32(math.Exp(float64(v)-m) / s)
		}
	}
	return y
}

func softmaxCases() []genCase {
	xd := []int64{2, 3, 8}
	x := data(xd, 151)
	sm := func(name string, C int, scale float32) genCase {
		w1 := mapF(data([]int64{8, int64(C)}, 152), func(v float32) float32 { return v * scale })
		w2 := mapF(data([]int64{int64(C), 8}, 153), func(v float32) float32 { return v / 10 })
		yd := []int64{2, 3, 8}
		p := softmaxRef(mmRef(x, w1, 6, 1, 8, C, func(int) int { return 0 }), C)
		return genCase{name: name, opset: 13, int8: true,
			g: graph{
				nodes: []node{
					{op: "MatMul", inputs: []string{"x", "w1"}, outputs: []string{"l"}},
					{op: "Softmax", inputs: []string{"l"}, outputs: []string{"p"}, attrs: []attr{iAttr("axis", -1)}},
					{op: "MatMul", inputs: []string{"p", "w2"}, outputs: []string{"y"}},
				},
				inits:   []*onnx.Tensor{onnx.NewFloat32("w1", []int64{8, int64(C)}, w1), onnx.NewFloat32("w2", []int64{int64(C), 8}, w2)},
				inputs:  []valueInfo{fvi("x", xd)},
				outputs: []valueInfo{fvi("y", yd)},
			},
			ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
			outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, mmRef(p, w2, 6, 1, C, 8, func(int) int { return 0 }))},
		}
	}
	return []genCase{sm("softmax_engine_large", 20, 2), sm("softmax_engine_short", 5, 0.3)}
}
