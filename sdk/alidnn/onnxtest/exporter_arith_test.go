package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of element-wise arithmetic as exporters write it: Mul, Div, Sub,
// Max and Min with a constant broadcast per channel ([C,1,1], as PyTorch
// writes a parameter), a scalar (rank 0) or a full tensor; the constant
// first (k − x); between two computed tensors; and after a Conv (also
// int8).

func init() { caseFamilies = append(caseFamilies, expArithCases) }

// expOps are the reference operators.
var expOps = map[string]func(a, b float32) float32{
	"Mul": func(a, b float32) float32 { return a * b },
	"Div": func(a, b float32) float32 { return a / b },
	"Sub": func(a, b float32) float32 { return a - b },
	"Max": func(a, b float32) float32 { return max(a, b) },
	"Min": func(a, b float32) float32 { return min(a, b) },
}

// expBroadcast maps every row-major index of dims to the index of b, of
// bDims, broadcast to it.
func expBroadcast(dims, bDims []int64) []int {
	idx := make([]int, numel(dims))
	for k := range idx {
		i, stride, bstride := 0, 1, 1
		off := len(dims) - len(bDims)
		for a := len(dims) - 1; a >= 0; a-- {
			c := (k / stride) % int(dims[a])
			if a >= off && bDims[a-off] != 1 {
				i += c * bstride
			}
			if a >= off {
				bstride *= int(bDims[a-off])
			}
			stride *= int(dims[a])
		}
		idx[k] = i
	}
	return idx
}

// expDivisor keeps data away from zero, with both signs.
func expDivisor(v float32) float32 {
	if v < 0 {
		return v - 0.5
	}
	return v + 0.5
}

// expConstCase is op(x, k) with the constant k of kDims (op(k, x) when
// first), x a graph input.
func expConstCase(name, op string, kDims []int64, first bool) genCase {
	x := data(xDims, 130)
	k := mapF(data(kDims, 131), expDivisor)
	bi := expBroadcast(xDims, kDims)
	f := expOps[op]
	y := make([]float32, len(x))
	in := []string{"x", "k"}
	for i := range y {
		if first {
			y[i] = f(k[bi[i]], x[i])
		} else {
			y[i] = f(x[i], k[bi[i]])
		}
	}
	if first {
		in = []string{"k", "x"}
	}
	return genCase{name: name, opset: 13,
		g: graph{
			nodes:   []node{{op: op, inputs: in, outputs: []string{"y"}}},
			inits:   []*onnx.Tensor{onnx.NewFloat32("k", kDims, k)},
			inputs:  []valueInfo{fvi("x", xDims)},
			outputs: []valueInfo{fvi("y", xDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", xDims, y)},
	}
}

// expTensorsCase is op(a, b) of the computed a = x + 0.5 and b = z · 2.
func expTensorsCase(name, op string) genCase {
	x, z := data(xDims, 132), data(xDims, 133)
	f := expOps[op]
	y := make([]float32, len(x))
	for i := range y {
		y[i] = f(x[i]+0.5, z[i]*2)
	}
	return genCase{name: name, opset: 13,
		g: graph{
			nodes: []node{
				{op: "Add", inputs: []string{"x", "half"}, outputs: []string{"a"}},
				{op: "Mul", inputs: []string{"z", "two"}, outputs: []string{"b"}},
				{op: op, inputs: []string{"a", "b"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{scalar("half", 0.5), scalar("two", 2)},
			inputs:  []valueInfo{fvi("x", xDims), fvi("z", xDims)},
			outputs: []valueInfo{fvi("y", xDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xDims, x), onnx.NewFloat32("z", xDims, z)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", xDims, y)},
	}
}

func expArithCases() []genCase {
	channel := []int64{20, 1, 1}
	var rank0 []int64
	cs := []genCase{
		expConstCase("export_mul_per_channel", "Mul", channel, false),
		expConstCase("export_mul_scalar", "Mul", rank0, false),
		expConstCase("export_mul_full", "Mul", xDims, false),
		expConstCase("export_div_per_channel", "Div", channel, false),
		expConstCase("export_div_scalar", "Div", rank0, false),
		expConstCase("export_div_full", "Div", xDims, false),
		expConstCase("export_sub_per_channel", "Sub", channel, false),
		expConstCase("export_sub_scalar", "Sub", rank0, false),
		expConstCase("export_sub_full", "Sub", xDims, false),
		expConstCase("export_sub_from_per_channel", "Sub", channel, true),
		expConstCase("export_sub_from_scalar", "Sub", rank0, true),
		expConstCase("export_sub_from_full", "Sub", xDims, true),
		expConstCase("export_max_per_channel", "Max", channel, false),
		expConstCase("export_min_per_channel_first", "Min", channel, true),
		expTensorsCase("export_mul_tensors", "Mul"),
		expTensorsCase("export_sub_tensors", "Sub"),
		expTensorsCase("export_max_tensors", "Max"),
		expTensorsCase("export_min_tensors", "Min"),
	}
	conv := []genCase{
		convAct("export_conv_mul_scalar", 13, "Mul", nil, []string{"m"}, []*onnx.Tensor{scalar("m", 0.75)}, func(v float32) float32 { return v * 0.75 }),
		convAct("export_conv_div_scalar", 13, "Div", nil, []string{"m"}, []*onnx.Tensor{scalar("m", 4)}, func(v float32) float32 { return v / 4 }),
		convAct("export_conv_sub_scalar", 13, "Sub", nil, []string{"m"}, []*onnx.Tensor{scalar("m", 1.5)}, func(v float32) float32 { return v - 1.5 }),
	}
	for k := range conv {
		conv[k].int8 = true
	}
	return append(cs, conv...)
}
