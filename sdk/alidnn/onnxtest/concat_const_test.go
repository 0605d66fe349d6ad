package onnxtest_test

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of Concat of constants with computed tensors, as detectors write
// them (a face detector's anchors beside its computed boxes, a constant
// token before the features): along the channels, block-aligned and not,
// the constant first or last, and along an image's rows (also int8).

func init() { caseFamilies = append(caseFamilies, concatConstCases) }

// part is how concatConstCase makes an input.
type part int

const (
	computed part = iota // Relu of a graph input
	konst                // a constant
	zeros                // a constant of zeros
)

// concatConstCase concatenates along axis parts of the given dims, made as
// kinds says.
func concatConstCase(name string, axis int, kinds []part, dims ...[]int64) genCase {
	c := genCase{name: name, opset: 13, int8: true}
	var names []string
	var parts [][]float32
	yd := append([]int64(nil), dims[0]...)
	yd[axis] = 0
	for k, d := range dims {
		x := data(d, float64(140+k))
		in, r := fmt.Sprintf("x%d", k), fmt.Sprintf("r%d", k)
		yd[axis] += d[axis]
		if kinds[k] == zeros {
			x = make([]float32, len(x))
		}
		if kinds[k] != computed {
			c.g.inits = append(c.g.inits, onnx.NewFloat32(in, d, x))
			names, parts = append(names, in), append(parts, x)
			continue
		}
		c.g.nodes = append(c.g.nodes, node{op: "Relu", inputs: []string{in}, outputs: []string{r}})
		c.g.inputs = append(c.g.inputs, fvi(in, d))
		c.ins = append(c.ins, onnx.NewFloat32(in, d, x))
		names, parts = append(names, r), append(parts, mapF(x, func(v float32) float32 { return max(v, 0) }))
	}
	c.g.nodes = append(c.g.nodes, node{op: "Concat", inputs: names, outputs: []string{"y"}, attrs: []attr{iAttr("axis", int64(axis))}})
	c.g.outputs = []valueInfo{fvi("y", yd)}
	c.outs = []*onnx.Tensor{onnx.NewFloat32("y", yd, expConcat(parts, dims, axis))}
	return c
}

func concatConstCases() []genCase {
	return []genCase{
		concatConstCase("concat_const_channels_first", 1, []part{konst, computed}, []int64{1, 16, 3, 4}, []int64{1, 20, 3, 4}),
		concatConstCase("concat_const_channels_shifted", 1, []part{computed, konst, computed}, []int64{1, 20, 3, 4}, []int64{1, 8, 3, 4}, []int64{1, 12, 3, 4}),
		concatConstCase("concat_const_zeros_shifted", 1, []part{zeros, computed}, []int64{1, 8, 3, 4}, []int64{1, 20, 3, 4}),
		concatConstCase("concat_const_channels_last", 1, []part{computed, konst}, []int64{1, 16, 3, 4}, []int64{1, 6, 3, 4}),
		concatConstCase("concat_const_rows", 2, []part{computed, konst}, []int64{1, 20, 3, 4}, []int64{1, 20, 2, 4}),
	}
}
