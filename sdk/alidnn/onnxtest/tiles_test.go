package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of tilings the GEMM emitter chooses for shapes ordinary layers do
// not reach: a convolution whose one output row needs more input than the
// input SRAM holds (AlexNet's 11×11 stride-4 conv1 on a 224-pixel row),
// run in column strips, with and without the stem packing in front; and a
// fully connected layer after a Flatten on a batch of 4, whose images share
// each load of weights.

func init() { caseFamilies = append(caseFamilies, tileCases) }

func tileFC(name string, n, c, h, w, m int) genCase {
	xd := []int64{int64(n), int64(c), int64(h), int64(w)}
	k := c * h * w
	x := data(xd, 51)
	wt := mapF(data([]int64{int64(m), int64(k)}, 52), func(v float32) float32 { return v / 30 })
	b := data([]int64{int64(m)}, 53)
	y := make([]float32, n*m)
	for i := range n {
		for o := range m {
			s := float64(b[o])
			for j := range k {
				s += float64(x[i*k+j]) * float64(wt[o*k+j])
			}
			y[i*m+o] = max(float32(s), 0)
		}
	}
	yd := []int64{int64(n), int64(m)}
	return genCase{name: name, opset: 13,
		g: graph{
			nodes: []node{
				{op: "Flatten", inputs: []string{"x"}, outputs: []string{"f"}},
				{op: "Gemm", inputs: []string{"f", "w", "b"}, outputs: []string{"g"}, attrs: []attr{iAttr("transB", 1)}},
				{op: "Relu", inputs: []string{"g"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{onnx.NewFloat32("w", []int64{int64(m), int64(k)}, wt), onnx.NewFloat32("b", []int64{int64(m)}, b)},
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, y)},
	}
}

func tileCases() []genCase {
	return []genCase{
		groupConvCase("conv_row_strips", gcGeom{c: 16, h: 15, w: 240, m: 20, kh: 11, kw: 11, groups: 1, sh: 4, sw: 4, dh: 1, dw: 1}, false),
		groupConvCase("conv_row_strips_stem", gcGeom{c: 3, h: 15, w: 235, m: 24, kh: 11, kw: 11, groups: 1, sh: 4, sw: 4, dh: 1, dw: 1, pads: [4]int{2, 2, 2, 2}}, false),
		tileFC("gemm_flatten_batch4", 4, 8, 3, 3, 24),
	}
}
