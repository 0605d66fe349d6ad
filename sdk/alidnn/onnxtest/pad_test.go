package onnxtest_test

import (
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Pad cases: a zero Pad of the spatial axes in front of a Conv (as PyTorch
// and TensorFlow exporters write asymmetric padding), folded into the
// Conv's padding; pads as an input (opset 13) and as an attribute (opset 2).

func padCases(t *testing.T) []genCase {
	x := data(convXDims, 12)
	w := mapF(data(convWDims, 13), func(v float32) float32 { return v / 10 })
	b := data([]int64{20}, 14)
	// Pad top 1, left 2, bottom 2, right 0; the Conv adds top 1, right 1.
	total := [4]int{2, 2, 2, 1}
	y := conv3x3Pad(x, w, b, 3, 6, 6, 20, total)
	yDims := []int64{1, 20, 6 + 2 + 2 - 2, 6 + 2 + 1 - 2}
	pads := []int64{0, 0, 1, 2, 0, 0, 2, 0}
	mk := func(name string, opset int64, padNode node, inits []*onnx.Tensor) genCase {
		return genCase{name: name, opset: opset,
			g: graph{
				nodes: []node{padNode,
					{op: "Conv", inputs: []string{"p", "w", "b"}, outputs: []string{"y"}, attrs: []attr{isAttr("pads", 1, 0, 0, 1), isAttr("kernel_shape", 3, 3)}},
				},
				inits:   append([]*onnx.Tensor{onnx.NewFloat32("w", convWDims, w), onnx.NewFloat32("b", []int64{20}, b)}, inits...),
				inputs:  []valueInfo{fvi("x", convXDims)},
				outputs: []valueInfo{fvi("y", yDims)},
			},
			ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
			outs: []*onnx.Tensor{onnx.NewFloat32("y", yDims, y)},
		}
	}
	pt, err := onnx.NewInt("pads", onnx.Int64, []int64{8}, pads)
	if err != nil {
		t.Fatal(err)
	}
	return []genCase{
		mk("pad_conv_inputs", 13, node{op: "Pad", inputs: []string{"x", "pads", "zero"}, outputs: []string{"p"}}, []*onnx.Tensor{pt, scalar("zero", 0)}),
		mk("pad_conv_attributes", 2, node{op: "Pad", inputs: []string{"x"}, outputs: []string{"p"}, attrs: []attr{isAttr("pads", pads...), fAttr("value", 0)}}, nil),
	}
}
