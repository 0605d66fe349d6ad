package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Softmax on the engine over the last axis, feeding a MatMul: 20 classes
// (one partial block) of logits up to about ±150, beyond which e^x
// overflows fp32 unless the row's maximum is subtracted first; 77 at twice
// that scale (five blocks, the last partial: butterflies within the
// blocks, then across the blocks' maxima; a wrong maximum overflows); 5
// (fewer than a block, three butterfly steps); and 20 masked with −Inf.

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
	// Masked with −Inf, as a boolean attention mask is filled: the first
	// image's last 4 classes, the second's first and sixth.
	md := []int64{2, 1, 20}
	mask := make([]float32, 40)
	for _, k := range []int{16, 17, 18, 19, 20, 25} {
		mask[k] = float32(math.Inf(-1))
	}
	w1 := mapF(data([]int64{8, 20}, 154), func(v float32) float32 { return v / 5 })
	w2 := mapF(data([]int64{20, 8}, 155), func(v float32) float32 { return v / 10 })
	l := mmRef(x, w1, 6, 1, 8, 20, func(int) int { return 0 })
	for r := range 6 {
		for j := range 20 {
			l[r*20+j] += mask[r/3*20+j]
		}
	}
	masked := genCase{name: "softmax_engine_masked", opset: 13,
		g: graph{
			nodes: []node{
				{op: "MatMul", inputs: []string{"x", "w1"}, outputs: []string{"l"}},
				{op: "Add", inputs: []string{"l", "mask"}, outputs: []string{"lm"}},
				{op: "Softmax", inputs: []string{"lm"}, outputs: []string{"p"}, attrs: []attr{iAttr("axis", -1)}},
				{op: "MatMul", inputs: []string{"p", "w2"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{onnx.NewFloat32("w1", []int64{8, 20}, w1), onnx.NewFloat32("w2", []int64{20, 8}, w2)},
			inputs:  []valueInfo{fvi("x", xd), fvi("mask", md)},
			outputs: []valueInfo{fvi("y", xd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x), onnx.NewFloat32("mask", md, mask)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", xd, mmRef(softmaxRef(l, 20), w2, 6, 1, 20, 8, func(int) int { return 0 }))},
	}
	return []genCase{sm("softmax_engine_large", 20, 2), sm("softmax_engine_wide", 77, 4), sm("softmax_engine_short", 5, 0.3), masked}
}
