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
		padAveragePool(),
	}
}

// padAveragePool is a zero Pad (top 1, right 1) before a
// 2×2 stride-2 AveragePool, whose averages count the Pad's zeros.
func padAveragePool() genCase {
	x := data(xDims, 20)
	pads := []int64{0, 0, 1, 0, 0, 0, 0, 1} // top 1, right 1
	C, H, W := 20, 3, 4
	ph, pw := H+1, W+1
	p := make([]float32, C*ph*pw)
	for c := range C {
		for i := range H {
			for j := range W {
				p[(c*ph+i+1)*pw+j] = x[(c*H+i)*W+j]
			}
		}
	}
	oh, ow := (ph-2)/2+1, (pw-2)/2+1
	y := make([]float32, C*oh*ow)
	for c := range C {
		for i := range oh {
			for j := range ow {
				var s float32
				for a := range 2 {
					for b := range 2 {
						s += p[(c*ph+2*i+a)*pw+2*j+b]
					}
				}
				y[(c*oh+i)*ow+j] = s / 4
			}
		}
	}
	yDims := []int64{1, int64(C), int64(oh), int64(ow)}
	return genCase{name: "pad_averagepool", opset: 2,
		g: graph{
			nodes: []node{
				{op: "Pad", inputs: []string{"x"}, outputs: []string{"p"}, attrs: []attr{isAttr("pads", pads...)}},
				{op: "AveragePool", inputs: []string{"p"}, outputs: []string{"y"}, attrs: []attr{isAttr("kernel_shape", 2, 2), isAttr("strides", 2, 2)}},
			},
			inputs:  []valueInfo{fvi("x", xDims)},
			outputs: []valueInfo{fvi("y", yDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yDims, y)},
	}
}
