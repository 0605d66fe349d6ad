package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of variadic Max and Min and of an activation after a Flatten.

func variadicCases() []genCase {
	x, b := data(xDims, 15), data(xDims, 16)
	y := make([]float32, len(x))
	for k := range y {
		y[k] = max(x[k], 0.25, b[k])
	}
	three := genCase{name: "max_three_inputs", opset: 13,
		g: graph{
			nodes:   []node{{op: "Max", inputs: []string{"x", "c", "b"}, outputs: []string{"y"}}},
			inits:   []*onnx.Tensor{scalar("c", 0.25)},
			inputs:  []valueInfo{fvi("x", xDims), fvi("b", xDims)},
			outputs: []valueInfo{fvi("y", xDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xDims, x), onnx.NewFloat32("b", xDims, b)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", xDims, y)},
	}
	// Min of three constants folds; the result is added to x.
	c1, c2, c3 := data(xDims, 17), data(xDims, 18), data(xDims, 19)
	z := make([]float32, len(x))
	for k := range z {
		z[k] = x[k] + min(c1[k], c2[k], c3[k])
	}
	folded := genCase{name: "min_constants_folded", opset: 13,
		g: graph{
			nodes: []node{
				{op: "Min", inputs: []string{"c1", "c2", "c3"}, outputs: []string{"m"}},
				{op: "Add", inputs: []string{"x", "m"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{onnx.NewFloat32("c1", xDims, c1), onnx.NewFloat32("c2", xDims, c2), onnx.NewFloat32("c3", xDims, c3)},
			inputs:  []valueInfo{fvi("x", xDims)},
			outputs: []valueInfo{fvi("y", xDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", xDims, z)},
	}
	flat := []int64{1, 240}
	f := genCase{name: "flatten_hardswish", opset: 14,
		g: graph{
			nodes: []node{
				{op: "Relu", inputs: []string{"x"}, outputs: []string{"r"}},
				{op: "Flatten", inputs: []string{"r"}, outputs: []string{"f"}},
				{op: "HardSwish", inputs: []string{"f"}, outputs: []string{"y"}},
			},
			inputs:  []valueInfo{fvi("x", xDims)},
			outputs: []valueInfo{fvi("y", flat)},
		},
		ins: []*onnx.Tensor{onnx.NewFloat32("x", xDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", flat, mapF(x, func(v float32) float32 {
			v = max(v, 0)
			return v * hardSigmoid(1.0/6, 0.5)(v)
		}))},
	}
	return []genCase{three, folded, f}
}
