package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of constants as exporters write them: PyTorch's exporter emits
// weights as Constant nodes rather than initializers, and shapes and fills
// as ConstantOfShape. All are folded at compile time.

func init() { caseFamilies = append(caseFamilies, expConstCases) }

func expConstCases() []genCase {
	x := data(convXDims, 60)
	w := mapF(data(convWDims, 61), func(v float32) float32 { return v / 10 })
	b := data([]int64{20}, 62)
	conv := conv3x3(x, w, b, 3, 6, 6, 20)
	convNode := node{op: "Conv", inputs: []string{"x", "w", "b"}, outputs: []string{"c"}, attrs: []attr{isAttr("pads", 1, 1, 1, 1)}}
	wNode := node{op: "Constant", outputs: []string{"w"}, attrs: []attr{{name: "value", t: onnx.NewFloat32("w", convWDims, w)}}}

	// Weights in a value tensor, the bias in value_floats, a scalar in
	// value_float.
	weights := genCase{name: "export_constant_weights", opset: 13, int8: true,
		g: graph{
			nodes: []node{
				wNode,
				{op: "Constant", outputs: []string{"b"}, attrs: []attr{{name: "value_floats", fs: b}}},
				convNode,
				{op: "Constant", outputs: []string{"s"}, attrs: []attr{fAttr("value_float", 0.75)}},
				{op: "Add", inputs: []string{"c", "s"}, outputs: []string{"y"}},
			},
			inputs:  []valueInfo{fvi("x", convXDims)},
			outputs: []valueInfo{fvi("y", convYDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", convYDims, mapF(conv, func(v float32) float32 { return v + 0.75 }))},
	}

	// ConstantOfShape with a value (a per-channel fill of 0.25 added) and
	// without (zeros of the full shape, given as value_ints: a Relu
	// written as Max).
	y := mapF(conv, func(v float32) float32 { return max(v+0.25, 0) })
	fill := genCase{name: "export_constant_of_shape", opset: 13,
		g: graph{
			nodes: []node{
				wNode,
				convNode,
				{op: "Constant", outputs: []string{"cs"}, attrs: []attr{isAttr("value_ints", 1, 20, 1, 1)}},
				{op: "ConstantOfShape", inputs: []string{"cs"}, outputs: []string{"q"}, attrs: []attr{{name: "value", t: onnx.NewFloat32("v", []int64{1}, []float32{0.25})}}},
				{op: "Add", inputs: []string{"c", "q"}, outputs: []string{"a"}},
				{op: "Constant", outputs: []string{"zs"}, attrs: []attr{isAttr("value_ints", convYDims...)}},
				{op: "ConstantOfShape", inputs: []string{"zs"}, outputs: []string{"z"}},
				{op: "Max", inputs: []string{"a", "z"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{onnx.NewFloat32("b", []int64{20}, b)},
			inputs:  []valueInfo{fvi("x", convXDims)},
			outputs: []valueInfo{fvi("y", convYDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", convYDims, y)},
	}
	return []genCase{weights, fill}
}
