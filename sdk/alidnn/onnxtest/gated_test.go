package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of gated activations after a Conv as exporters decompose them —
// SiLU and Swish as x · Sigmoid(βx), HardSwish as torch.onnx writes it
// below opset 14 and as paddle2onnx does — which the compiler folds into
// the convolution's epilogue; GELU with Erf; and a gate with a per-channel
// constant, which it compiles operator by operator. All but these two also
// run in int8: GELU flattens a row's negative outputs to about 0, and the
// quadratic (x + 3)·x·k turns the convolution's int8 rounding into near
// ties, which argmax breaks either way (their int8 errors are the others'
// size).

func init() { caseFamilies = append(caseFamilies, gatedCases) }

// convGated is Conv (convAct's) into c, then nodes from c to y with the
// constant inputs inits; f(v, ch) is the reference of y at a value v of
// channel ch of c.
func convGated(name string, opset int64, nodes []node, inits []*onnx.Tensor, f func(v float64, ch int) float64) genCase {
	c := convAct(name, opset, "Identity", nil, nil, nil, func(v float32) float32 { return v })
	c.g.nodes = append(c.g.nodes[:1], nodes...)
	c.g.inits = append(c.g.inits, inits...)
	y, _ := c.outs[0].Float32s()
	plane := len(y) / int(convYDims[1])
	for k, v := range y {
		y[k] = float32(f(float64(v), k/plane))
	}
	c.outs = []*onnx.Tensor{onnx.NewFloat32("y", convYDims, y)}
	c.int8 = true
	return c
}

func sigmoid64(v float64) float64 { return 1 / (1 + math.Exp(-v)) }

func hardSigmoid64(alpha, beta float64) func(float64) float64 {
	return func(v float64) float64 { return min(max(alpha*v+beta, 0), 1) }
}

func gatedCases() []genCase {
	gateK := mapF(data([]int64{20}, 8), func(v float32) float32 { return v / 5 })
	cs := []genCase{
		convGated("conv_silu", 13, []node{
			{op: "Sigmoid", inputs: []string{"c"}, outputs: []string{"s"}},
			{op: "Mul", inputs: []string{"c", "s"}, outputs: []string{"y"}},
		}, nil, func(v float64, _ int) float64 { return v * sigmoid64(v) }),
		convGated("conv_swish_beta", 13, []node{
			{op: "Mul", inputs: []string{"c", "beta"}, outputs: []string{"t"}},
			{op: "Sigmoid", inputs: []string{"t"}, outputs: []string{"s"}},
			{op: "Mul", inputs: []string{"s", "c"}, outputs: []string{"y"}},
		}, []*onnx.Tensor{scalar("beta", 1.5)}, func(v float64, _ int) float64 { return v * sigmoid64(1.5*v) }),
		convGated("conv_hardswish_torch13", 13, []node{
			{op: "HardSigmoid", inputs: []string{"c"}, outputs: []string{"h"}, attrs: []attr{fAttr("alpha", 1.0/6), fAttr("beta", 0.5)}},
			{op: "Mul", inputs: []string{"c", "h"}, outputs: []string{"y"}},
		}, nil, func(v float64, _ int) float64 { return v * hardSigmoid64(float64(float32(1.0/6)), 0.5)(v) }),
		convGated("conv_hardswish_paddle", 11, []node{
			{op: "Add", inputs: []string{"c", "three"}, outputs: []string{"a"}},
			{op: "Clip", inputs: []string{"a", "zero", "six"}, outputs: []string{"k"}},
			{op: "Mul", inputs: []string{"c", "k"}, outputs: []string{"m"}},
			{op: "Div", inputs: []string{"m", "six"}, outputs: []string{"y"}},
		}, []*onnx.Tensor{scalar("three", 3), scalar("zero", 0), scalar("six", 6)},
			func(v float64, _ int) float64 { return v * min(max(v+3, 0), 6) / 6 }),
		// GELU as torch.onnx writes nn.GELU(): x·½(1 + erf(x/√2)).
		convGated("conv_gelu", 13, []node{
			{op: "Div", inputs: []string{"c", "sqrt2"}, outputs: []string{"d"}},
			{op: "Erf", inputs: []string{"d"}, outputs: []string{"e"}},
			{op: "Add", inputs: []string{"e", "one"}, outputs: []string{"a"}},
			{op: "Mul", inputs: []string{"c", "a"}, outputs: []string{"m"}},
			{op: "Mul", inputs: []string{"m", "half"}, outputs: []string{"y"}},
		}, []*onnx.Tensor{scalar("sqrt2", float32(math.Sqrt2)), scalar("one", 1), scalar("half", 0.5)},
			func(v float64, _ int) float64 { return v * 0.5 * (1 + math.Erf(v/float64(float32(math.Sqrt2)))) }),
		convGated("conv_gate_per_channel", 13, []node{
			{op: "Add", inputs: []string{"c", "three"}, outputs: []string{"a"}},
			{op: "Mul", inputs: []string{"a", "k"}, outputs: []string{"g"}},
			{op: "Mul", inputs: []string{"c", "g"}, outputs: []string{"y"}},
		}, []*onnx.Tensor{scalar("three", 3), onnx.NewFloat32("k", []int64{20, 1, 1}, gateK)},
			func(v float64, ch int) float64 { return v * (v + 3) * float64(gateK[ch]) }),
	}
	for k := len(cs) - 2; k < len(cs); k++ {
		cs[k].int8 = false
	}
	return cs
}
