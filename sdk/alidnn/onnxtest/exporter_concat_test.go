package onnxtest_test

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of Concat of computed tensors along axes other than the channels,
// as exporters write them (YOLO-style heads stack rows, sequence models
// stack matrices): image rows, image columns (each input's rows interleave
// in the output's), a matrix's rows, and the batch.

func init() { caseFamilies = append(caseFamilies, expConcatCases) }

// expConcat concatenates row-major tensors of the given dims along axis.
func expConcat(parts [][]float32, dims [][]int64, axis int) []float32 {
	outer := 1
	for _, d := range dims[0][:axis] {
		outer *= int(d)
	}
	var y []float32
	for o := range outer {
		for k, p := range parts {
			inner := numel(dims[k][axis:])
			y = append(y, p[o*inner:(o+1)*inner]...)
		}
	}
	return y
}

// expConcatCase is Relu of each input, then Concat along axis.
func expConcatCase(name string, axis int, dims ...[]int64) genCase {
	var nodes []node
	var inputs []valueInfo
	var ins []*onnx.Tensor
	var names []string
	var parts [][]float32
	yd := append([]int64(nil), dims[0]...)
	yd[axis] = 0
	for k, d := range dims {
		x := data(d, float64(110+k))
		in, r := fmt.Sprintf("x%d", k), fmt.Sprintf("r%d", k)
		nodes = append(nodes, node{op: "Relu", inputs: []string{in}, outputs: []string{r}})
		inputs = append(inputs, fvi(in, d))
		ins = append(ins, onnx.NewFloat32(in, d, x))
		names = append(names, r)
		parts = append(parts, mapF(x, func(v float32) float32 { return max(v, 0) }))
		yd[axis] += d[axis]
	}
	// A negative axis, as exporters often write the last one.
	nodes = append(nodes, node{op: "Concat", inputs: names, outputs: []string{"y"}, attrs: []attr{iAttr("axis", int64(axis-len(yd)))}})
	return genCase{name: name, opset: 13,
		g:    graph{nodes: nodes, inputs: inputs, outputs: []valueInfo{fvi("y", yd)}},
		ins:  ins,
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, expConcat(parts, dims, axis))},
	}
}

// expConcatConvs is two Convs of one input concatenated along the
// columns. Not run in int8: its values are right to the int8 step there,
// but close neighbours along the last axis swap their argmax, which is
// what int8 runs compare.
func expConcatConvs() genCase {
	x := data(convXDims, 120)
	var nodes []node
	var inits []*onnx.Tensor
	var parts [][]float32
	for k := range 2 {
		w := mapF(data(convWDims, float64(121+2*k)), func(v float32) float32 { return v / 10 })
		b := data([]int64{20}, float64(122+2*k))
		wn, bn, cn := fmt.Sprintf("w%d", k), fmt.Sprintf("b%d", k), fmt.Sprintf("c%d", k)
		nodes = append(nodes, node{op: "Conv", inputs: []string{"x", wn, bn}, outputs: []string{cn}, attrs: []attr{isAttr("pads", 1, 1, 1, 1)}})
		inits = append(inits, onnx.NewFloat32(wn, convWDims, w), onnx.NewFloat32(bn, []int64{20}, b))
		parts = append(parts, conv3x3(x, w, b, 3, 6, 6, 20))
	}
	nodes = append(nodes, node{op: "Concat", inputs: []string{"c0", "c1"}, outputs: []string{"y"}, attrs: []attr{iAttr("axis", 3)}})
	yd := []int64{1, 20, 6, 12}
	return genCase{name: "export_concat_conv_columns", opset: 13,
		g:    graph{nodes: nodes, inits: inits, inputs: []valueInfo{fvi("x", convXDims)}, outputs: []valueInfo{fvi("y", yd)}},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, expConcat(parts, [][]int64{convYDims, convYDims}, 3))},
	}
}

func expConcatCases() []genCase {
	return []genCase{
		expConcatConvs(),
		expConcatCase("export_concat_image_rows", 2, []int64{1, 20, 2, 4}, []int64{1, 20, 3, 4}),
		expConcatCase("export_concat_image_columns", 3, []int64{1, 20, 3, 2}, []int64{1, 20, 3, 5}, []int64{1, 20, 3, 1}),
		expConcatCase("export_concat_matrix_rows", 0, []int64{2, 20}, []int64{3, 20}),
		expConcatCase("export_concat_batch", 0, []int64{1, 20, 2, 3}, []int64{2, 20, 2, 3}),
	}
}
