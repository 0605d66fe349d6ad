package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of the shape arithmetic exporters write in front of a classifier's
// Reshape, folded at compile time once the input shape is fixed: PyTorch's
// x.view(x.size(0), -1) (Shape → Gather → Unsqueeze → Concat), a
// TensorFlow-style Flatten (Shape → Slice → ReduceProd, with Squeeze and
// Casts on the way) and a product of gathered dimensions (Mul), each
// flattening a Conv's output into a MatMul or Gemm.

func init() { caseFamilies = append(caseFamilies, expShapeCases) }

const expClasses = 10

// expShapeCase is Conv → c, the shape nodes computing "shp", then
// Reshape(c, shp) → f and f·W + bias → y (Gemm with W transposed when
// gemm).
func expShapeCase(name string, opset int64, shapeNodes []node, gemm bool, seed float64) genCase {
	x := data(convXDims, seed)
	w := mapF(data(convWDims, seed+1), func(v float32) float32 { return v / 10 })
	b := data([]int64{20}, seed+2)
	conv := conv3x3(x, w, b, 3, 6, 6, 20)
	k := len(conv)
	fc := mapF(data([]int64{int64(k), expClasses}, seed+3), func(v float32) float32 { return v / 50 })
	bias := data([]int64{expClasses}, seed+4)
	y := make([]float32, expClasses)
	for j := range y {
		s := bias[j]
		for i := range k {
			s += conv[i] * fc[i*expClasses+j]
		}
		y[j] = s
	}
	nodes := append([]node{{op: "Conv", inputs: []string{"x", "w", "b"}, outputs: []string{"c"}, attrs: []attr{isAttr("pads", 1, 1, 1, 1)}}}, shapeNodes...)
	nodes = append(nodes, node{op: "Reshape", inputs: []string{"c", "shp"}, outputs: []string{"f"}})
	fcT := onnx.NewFloat32("fc", []int64{int64(k), expClasses}, fc)
	if gemm {
		t := make([]float32, len(fc))
		for i := range k {
			for j := range expClasses {
				t[j*k+i] = fc[i*expClasses+j]
			}
		}
		fcT = onnx.NewFloat32("fc", []int64{expClasses, int64(k)}, t)
		nodes = append(nodes, node{op: "Gemm", inputs: []string{"f", "fc", "bias"}, outputs: []string{"y"}, attrs: []attr{iAttr("transB", 1)}})
	} else {
		nodes = append(nodes, node{op: "MatMul", inputs: []string{"f", "fc"}, outputs: []string{"m"}},
			node{op: "Add", inputs: []string{"m", "bias"}, outputs: []string{"y"}})
	}
	yd := []int64{1, expClasses}
	return genCase{name: name, opset: opset, int8: true,
		g: graph{
			nodes: nodes,
			inits: []*onnx.Tensor{onnx.NewFloat32("w", convWDims, w), onnx.NewFloat32("b", []int64{20}, b),
				fcT, onnx.NewFloat32("bias", []int64{expClasses}, bias)},
			inputs:  []valueInfo{fvi("x", convXDims)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, y)},
	}
}

// expInts is a Constant node of a 1-D int64 tensor.
func expInts(out string, v ...int64) node {
	return node{op: "Constant", outputs: []string{out}, attrs: []attr{isAttr("value_ints", v...)}}
}

// expGather is Gather of element k of the 1-D "from", a scalar, as
// PyTorch writes x.size(k).
func expGather(from, out string, k int64) []node {
	return []node{
		{op: "Constant", outputs: []string{out + "_i"}, attrs: []attr{iAttr("value_int", k)}},
		{op: "Gather", inputs: []string{from, out + "_i"}, outputs: []string{out}},
	}
}

func expShapeCases() []genCase {
	view := []node{
		{op: "Shape", inputs: []string{"c"}, outputs: []string{"s"}},
		{op: "Constant", outputs: []string{"i0"}, attrs: []attr{iAttr("value_int", 0)}},
		{op: "Gather", inputs: []string{"s", "i0"}, outputs: []string{"n0"}, attrs: []attr{iAttr("axis", 0)}},
		expInts("ax", 0),
		{op: "Unsqueeze", inputs: []string{"n0", "ax"}, outputs: []string{"n1"}},
		expInts("m1", -1),
		{op: "Concat", inputs: []string{"n1", "m1"}, outputs: []string{"shp"}, attrs: []attr{iAttr("axis", 0)}},
	}
	flatten := []node{
		{op: "Shape", inputs: []string{"c"}, outputs: []string{"s"}},
		expInts("one", 1), expInts("end", math.MaxInt64), expInts("zero", 0),
		{op: "Slice", inputs: []string{"s", "one", "end", "zero"}, outputs: []string{"tail"}},
		{op: "ReduceProd", inputs: []string{"tail"}, outputs: []string{"p"}, attrs: []attr{iAttr("keepdims", 1)}},
		{op: "Cast", inputs: []string{"p"}, outputs: []string{"p32"}, attrs: []attr{iAttr("to", int64(onnx.Int32))}},
		{op: "Cast", inputs: []string{"p32"}, outputs: []string{"p64"}, attrs: []attr{iAttr("to", int64(onnx.Int64))}},
		{op: "Slice", inputs: []string{"s", "zero", "one"}, outputs: []string{"head"}},
		{op: "Squeeze", inputs: []string{"head", "zero"}, outputs: []string{"h0"}},
		{op: "Unsqueeze", inputs: []string{"h0", "zero"}, outputs: []string{"h1"}},
		{op: "Concat", inputs: []string{"h1", "p64"}, outputs: []string{"shp"}, attrs: []attr{iAttr("axis", 0)}},
	}
	product := []node{
		{op: "Shape", inputs: []string{"c"}, outputs: []string{"n"}, attrs: []attr{iAttr("end", 1)}},
		{op: "Shape", inputs: []string{"c"}, outputs: []string{"s"}, attrs: []attr{iAttr("start", -3)}},
	}
	product = append(product, expGather("s", "ch", 0)...)
	product = append(product, expGather("s", "h", 1)...)
	product = append(product, expGather("s", "w", 2)...)
	product = append(product,
		node{op: "Mul", inputs: []string{"ch", "h"}, outputs: []string{"chh"}},
		node{op: "Mul", inputs: []string{"chh", "w"}, outputs: []string{"chw"}},
		expInts("zero", 0),
		node{op: "Unsqueeze", inputs: []string{"chw", "zero"}, outputs: []string{"chw1"}},
		node{op: "Concat", inputs: []string{"n", "chw1"}, outputs: []string{"shp"}, attrs: []attr{iAttr("axis", 0)}},
	)
	return []genCase{
		expShapeCase("export_flatten_shape_gather", 13, view, false, 70),
		expShapeCase("export_flatten_shape_slice_reduceprod", 13, flatten, true, 75),
		expShapeCase("export_flatten_shape_mul", 15, product, false, 80),
	}
}
