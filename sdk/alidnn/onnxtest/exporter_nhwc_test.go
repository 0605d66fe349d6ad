package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of TensorFlow converters' NHWC graphs: the input [1,H,W,C] goes
// through Transpose(0,3,1,2) into the NCHW Conv, and the Conv's output
// through Transpose(0,2,3,1) to the graph output, or to a Flatten feeding
// the classifier's MatMul (which then reads the features in HWC order), and
// back to NCHW for another operator.

func init() { caseFamilies = append(caseFamilies, expNHWCCases) }

// expToNCHW transposes [h][w][c] to [c][h][w]; expToNHWC the other way.
func expToNCHW(x []float32, h, w, c int) []float32 {
	y := make([]float32, len(x))
	for i := range h {
		for j := range w {
			for k := range c {
				y[(k*h+i)*w+j] = x[(i*w+j)*c+k]
			}
		}
	}
	return y
}

func expToNHWC(x []float32, c, h, w int) []float32 {
	y := make([]float32, len(x))
	for k := range c {
		for i := range h {
			for j := range w {
				y[(i*w+j)*c+k] = x[(k*h+i)*w+j]
			}
		}
	}
	return y
}

func expNHWCCases() []genCase {
	xd := []int64{1, 6, 6, 3}
	yd := []int64{1, 6, 6, 20}
	x := data(xd, 90)
	w := mapF(data(convWDims, 91), func(v float32) float32 { return v / 10 })
	b := data([]int64{20}, 92)
	conv := expToNHWC(conv3x3(expToNCHW(x, 6, 6, 3), w, b, 3, 6, 6, 20), 20, 6, 6)
	// front is the NHWC Conv, its output named out.
	front := func(out string) []node {
		return []node{
			{op: "Transpose", inputs: []string{"x"}, outputs: []string{"xt"}, attrs: []attr{isAttr("perm", 0, 3, 1, 2)}},
			{op: "Conv", inputs: []string{"xt", "w", "b"}, outputs: []string{"c"}, attrs: []attr{isAttr("pads", 1, 1, 1, 1)}},
			{op: "Transpose", inputs: []string{"c"}, outputs: []string{out}, attrs: []attr{isAttr("perm", 0, 2, 3, 1)}},
		}
	}
	inits := []*onnx.Tensor{onnx.NewFloat32("w", convWDims, w), onnx.NewFloat32("b", []int64{20}, b)}
	ins := []*onnx.Tensor{onnx.NewFloat32("x", xd, x)}

	feature := genCase{name: "export_nhwc_conv", opset: 13, int8: true,
		g: graph{
			nodes:   front("y"),
			inits:   inits,
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  ins,
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, conv)},
	}
	k := len(conv)
	fc := mapF(data([]int64{int64(k), expClasses}, 93), func(v float32) float32 { return v / 50 })
	bias := data([]int64{expClasses}, 94)
	y := make([]float32, expClasses)
	for j := range y {
		s := bias[j]
		for i := range k {
			s += conv[i] * fc[i*expClasses+j]
		}
		y[j] = s
	}
	cd := []int64{1, expClasses}
	classifier := genCase{name: "export_nhwc_flatten_matmul", opset: 13, int8: true,
		g: graph{
			nodes: append(front("ct"),
				expInts("shp", 1, -1),
				node{op: "Reshape", inputs: []string{"ct", "shp"}, outputs: []string{"f"}},
				node{op: "MatMul", inputs: []string{"f", "fc"}, outputs: []string{"m"}},
				node{op: "Add", inputs: []string{"m", "bias"}, outputs: []string{"y"}}),
			inits:   append(append([]*onnx.Tensor(nil), inits...), onnx.NewFloat32("fc", []int64{int64(k), expClasses}, fc), onnx.NewFloat32("bias", []int64{expClasses}, bias)),
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", cd)},
		},
		ins:  ins,
		outs: []*onnx.Tensor{onnx.NewFloat32("y", cd, y)},
	}
	// A converter's round trip between NCHW operators: the Transposes back
	// to NCHW and again to NHWC cancel out, through an Identity.
	roundTrip := genCase{name: "export_nhwc_round_trip", opset: 13, int8: true,
		g: graph{
			nodes: append(front("ct"),
				node{op: "Identity", inputs: []string{"ct"}, outputs: []string{"ci"}},
				node{op: "Transpose", inputs: []string{"ci"}, outputs: []string{"cn"}, attrs: []attr{isAttr("perm", 0, 3, 1, 2)}},
				node{op: "Add", inputs: []string{"cn", "half"}, outputs: []string{"a"}},
				node{op: "Transpose", inputs: []string{"a"}, outputs: []string{"y"}, attrs: []attr{isAttr("perm", 0, 2, 3, 1)}}),
			inits:   append(append([]*onnx.Tensor(nil), inits...), scalar("half", 0.5)),
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  ins,
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, mapF(conv, func(v float32) float32 { return v + 0.5 }))},
	}
	// tf2onnx's flatten keeps the batch from the input's Shape: the input
	// is still packed transposed, the Shape reading only its dimensions.
	dynamic := classifier
	dynamic.name = "export_nhwc_shape_flatten"
	dynamic.g.nodes = append(front("ct"),
		node{op: "Shape", inputs: []string{"x"}, outputs: []string{"s"}},
		expInts("b", 0), expInts("e", 1),
		node{op: "Slice", inputs: []string{"s", "b", "e"}, outputs: []string{"n"}},
		expInts("rest", -1),
		node{op: "Concat", inputs: []string{"n", "rest"}, outputs: []string{"shp"}, attrs: []attr{iAttr("axis", 0)}},
		node{op: "Reshape", inputs: []string{"ct", "shp"}, outputs: []string{"f"}},
		node{op: "MatMul", inputs: []string{"f", "fc"}, outputs: []string{"m"}},
		node{op: "Add", inputs: []string{"m", "bias"}, outputs: []string{"y"}})
	return []genCase{feature, classifier, roundTrip, dynamic, expNHWCOneChannel()}
}

// expNHWCOneChannel is a Conv to 4 channels of a one-channel NHWC image
// the shape of a text-line crop, [1,76,32,1]: its Transpose to NCHW moves
// only the unit axis, so it reshapes the input, which is packed with the
// one channel on the lanes.
func expNHWCOneChannel() genCase {
	xd, wd, yd := []int64{1, 76, 32, 1}, []int64{4, 1, 3, 3}, []int64{1, 76, 32, 4}
	x := data(xd, 95)
	w := mapF(data(wd, 96), func(v float32) float32 { return v / 10 })
	b := data([]int64{4}, 97)
	y := expToNHWC(conv3x3(x, w, b, 1, 76, 32, 4), 4, 76, 32)
	return genCase{name: "export_nhwc_one_channel", opset: 13, int8: true,
		g: graph{
			nodes: []node{
				{op: "Transpose", inputs: []string{"x"}, outputs: []string{"xt"}, attrs: []attr{isAttr("perm", 0, 3, 1, 2)}},
				{op: "Conv", inputs: []string{"xt", "w", "b"}, outputs: []string{"c"}, attrs: []attr{isAttr("pads", 1, 1, 1, 1)}},
				{op: "Transpose", inputs: []string{"c"}, outputs: []string{"y"}, attrs: []attr{isAttr("perm", 0, 2, 3, 1)}},
			},
			inits:   []*onnx.Tensor{onnx.NewFloat32("w", wd, w), onnx.NewFloat32("b", []int64{4}, b)},
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, y)},
	}
}
