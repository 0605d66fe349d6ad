package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Transpose cases: weights stored HWIO (as TensorFlow converters write
// them) transposed to OIHW for a Conv, folded at compile time; and a
// computed [1,20,1,1] moved to [1,1,1,20], which keeps the data's order.

func transposeCases() []genCase {
	x := data(convXDims, 8)
	w := mapF(data(convWDims, 9), func(v float32) float32 { return v / 10 })
	b := data([]int64{20}, 10)
	// hwio[((i*3+j)*3+c)*20+o] = w[o][c][i][j]
	hwio := make([]float32, len(w))
	for o := range 20 {
		for c := range 3 {
			for i := range 3 {
				for j := range 3 {
					hwio[((i*3+j)*3+c)*20+o] = w[((o*3+c)*3+i)*3+j]
				}
			}
		}
	}
	conv := genCase{name: "transpose_constant_weights", opset: 13,
		g: graph{
			nodes: []node{
				{op: "Transpose", inputs: []string{"w_hwio"}, outputs: []string{"w"}, attrs: []attr{isAttr("perm", 3, 2, 0, 1)}},
				{op: "Conv", inputs: []string{"x", "w", "b"}, outputs: []string{"y"}, attrs: []attr{isAttr("pads", 1, 1, 1, 1)}},
			},
			inits:   []*onnx.Tensor{onnx.NewFloat32("w_hwio", []int64{3, 3, 3, 20}, hwio), onnx.NewFloat32("b", []int64{20}, b)},
			inputs:  []valueInfo{fvi("x", convXDims)},
			outputs: []valueInfo{fvi("y", convYDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", convYDims, conv3x3(x, w, b, 3, 6, 6, 20))},
	}
	in := []int64{1, 20, 1, 1}
	out := []int64{1, 1, 1, 20}
	v := data(in, 11)
	unit := genCase{name: "transpose_unit_axes", opset: 13,
		g: graph{
			nodes: []node{
				{op: "Relu", inputs: []string{"x"}, outputs: []string{"r"}},
				{op: "Transpose", inputs: []string{"r"}, outputs: []string{"y"}, attrs: []attr{isAttr("perm", 0, 2, 3, 1)}},
			},
			inputs:  []valueInfo{fvi("x", in)},
			outputs: []valueInfo{fvi("y", out)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", in, v)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", out, mapF(v, func(x float32) float32 { return max(x, 0) }))},
	}
	return []genCase{conv, unit}
}
