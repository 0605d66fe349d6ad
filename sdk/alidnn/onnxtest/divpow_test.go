package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of Div by computed tensors and Pow by constants, which run on the
// ALU's div, exp and log: a quotient of two tensors of both signs, by a
// gate per channel, by a divisor computed after the dividend, a constant
// (scalar and per channel) by a tensor; Pow by 2, 3, −1, −2, 0.5, −0.5 and
// 1.5, and by 2 after a Conv (also int8).

func init() { caseFamilies = append(caseFamilies, divPowCases) }

// awayFromZero is data of both signs at least 0.5 from zero.
func awayFromZero(dims []int64, seed float64) []float32 { return mapF(data(dims, seed), expDivisor) }

// graphCase is nodes on graph inputs x and z of xDims (z only if the nodes
// read it) with constants inits; f(x, z) is y's reference per element, at
// ch the element's channel.
func graphCase(name string, nodes []node, inits []*onnx.Tensor, x, z []float32, f func(x, z float64, ch int) float64) genCase {
	c := genCase{name: name, opset: 13,
		g:   graph{nodes: nodes, inits: inits, inputs: []valueInfo{fvi("x", xDims)}, outputs: []valueInfo{fvi("y", xDims)}},
		ins: []*onnx.Tensor{onnx.NewFloat32("x", xDims, x)},
	}
	if z != nil {
		c.g.inputs = append(c.g.inputs, fvi("z", xDims))
		c.ins = append(c.ins, onnx.NewFloat32("z", xDims, z))
	}
	plane := numel(xDims[2:])
	y := make([]float32, len(x))
	for k := range y {
		zk := 0.0
		if z != nil {
			zk = float64(z[k])
		}
		y[k] = float32(f(float64(x[k]), zk, k/plane%int(xDims[1])))
	}
	c.outs = []*onnx.Tensor{onnx.NewFloat32("y", xDims, y)}
	return c
}

// powCase is Pow(x, p) of x made by in from the deterministic data.
func powCase(name string, p float32, in func(float32) float32) genCase {
	x := mapF(data(xDims, 150), in)
	return graphCase(name, []node{{op: "Pow", inputs: []string{"x", "p"}, outputs: []string{"y"}}}, []*onnx.Tensor{scalar("p", p)}, x, nil,
		func(x, _ float64, _ int) float64 { return math.Pow(x, float64(p)) })
}

func divPowCases() []genCase {
	x, z := data(xDims, 151), awayFromZero(xDims, 152)
	perChannel := awayFromZero([]int64{20, 1, 1}, 153)
	// mean is the mean of |z| over channel ch's image, zMean of z.
	mean := func(ch int) float64 {
		plane := numel(xDims[2:])
		var s float64
		for _, v := range z[ch*plane : (ch+1)*plane] {
			s += math.Abs(float64(v))
		}
		return s / float64(plane)
	}
	zMean := func(ch int) float64 {
		plane := numel(xDims[2:])
		var s float64
		for _, v := range z[ch*plane : (ch+1)*plane] {
			s += float64(v)
		}
		return s / float64(plane)
	}
	abs := func(v float32) float32 { return float32(math.Abs(float64(v))) }
	sq := func(v float32) float32 { return v * v }
	cs := []genCase{
		graphCase("div_tensors", []node{
			{op: "Relu", inputs: []string{"x"}, outputs: []string{"a"}},
			{op: "Mul", inputs: []string{"z", "two"}, outputs: []string{"b"}},
			{op: "Div", inputs: []string{"a", "b"}, outputs: []string{"y"}},
		}, []*onnx.Tensor{scalar("two", 2)}, x, z, func(x, z float64, _ int) float64 { return max(x, 0) / (2 * z) }),
		graphCase("div_by_gate", []node{
			{op: "Abs", inputs: []string{"z"}, outputs: []string{"za"}},
			{op: "GlobalAveragePool", inputs: []string{"za"}, outputs: []string{"g"}},
			{op: "Relu", inputs: []string{"x"}, outputs: []string{"a"}},
			{op: "Div", inputs: []string{"a", "g"}, outputs: []string{"y"}},
		}, nil, x, z, func(x, _ float64, ch int) float64 { return max(x, 0) / mean(ch) }),
		// The divisor is computed from the dividend, after its layer.
		graphCase("div_by_later_tensor", []node{
			{op: "Relu", inputs: []string{"x"}, outputs: []string{"a"}},
			{op: "Mul", inputs: []string{"a", "a"}, outputs: []string{"a2"}},
			{op: "Add", inputs: []string{"a2", "one"}, outputs: []string{"b"}},
			{op: "Div", inputs: []string{"a", "b"}, outputs: []string{"y"}},
		}, []*onnx.Tensor{scalar("one", 1)}, x, nil, func(x, _ float64, _ int) float64 { a := max(x, 0); return a / (a*a + 1) }),
		graphCase("div_scalar_by_tensor", []node{
			{op: "Neg", inputs: []string{"z"}, outputs: []string{"b"}},
			{op: "Div", inputs: []string{"k", "b"}, outputs: []string{"y"}},
		}, []*onnx.Tensor{scalar("k", 3)}, x, z, func(_, z float64, _ int) float64 { return 3 / -z }),
		graphCase("div_per_channel_by_tensor", []node{
			{op: "Neg", inputs: []string{"z"}, outputs: []string{"b"}},
			{op: "Div", inputs: []string{"k", "b"}, outputs: []string{"y"}},
		}, []*onnx.Tensor{onnx.NewFloat32("k", []int64{20, 1, 1}, perChannel)}, x, z,
			func(_, z float64, ch int) float64 { return float64(perChannel[ch]) / -z }),
		// x minus its channel's mean, and the mean minus x.
		graphCase("sub_broadcast_mean", []node{
			{op: "GlobalAveragePool", inputs: []string{"z"}, outputs: []string{"g"}},
			{op: "Relu", inputs: []string{"x"}, outputs: []string{"a"}},
			{op: "Sub", inputs: []string{"a", "g"}, outputs: []string{"y"}},
		}, nil, x, z, func(x, _ float64, ch int) float64 { return max(x, 0) - zMean(ch) }),
		graphCase("sub_from_broadcast_mean", []node{
			{op: "GlobalAveragePool", inputs: []string{"z"}, outputs: []string{"g"}},
			{op: "Relu", inputs: []string{"x"}, outputs: []string{"a"}},
			{op: "Sub", inputs: []string{"g", "a"}, outputs: []string{"y"}},
		}, nil, x, z, func(x, _ float64, ch int) float64 { return zMean(ch) - max(x, 0) }),
		powCase("pow_square", 2, func(v float32) float32 { return v }),
		powCase("pow_cube", 3, func(v float32) float32 { return v }),
		powCase("pow_inverse", -1, expDivisor),
		powCase("pow_inverse_square", -2, expDivisor),
		powCase("pow_sqrt", 0.5, abs),
		powCase("pow_rsqrt", -0.5, func(v float32) float32 { return abs(v) + 0.25 }),
		powCase("pow_three_halves", 1.5, abs),
	}
	conv := convAct("conv_pow_square", 13, "Pow", nil, []string{"p"}, []*onnx.Tensor{scalar("p", 2)}, sq)
	conv.int8 = true
	return append(cs, conv, attentionMaskCase())
}

// attentionMaskCase adds to attention scores [1,2,4,20] (a MatMul of the
// input x by constant weights) a mask computed as BERT's exporters write
// it from a [1,20] input of ones and zeros: Unsqueeze to [1,1,1,20], then
// (1 − m)·(−10000), broadcast over the heads and the query rows.
func attentionMaskCase() genCase {
	xd, wd, md, yd := []int64{1, 2, 4, 8}, []int64{8, 20}, []int64{1, 20}, []int64{1, 2, 4, 20}
	x := data(xd, 170)
	w := mapF(data(wd, 171), func(v float32) float32 { return v / 10 })
	m := make([]float32, 20)
	for k := range m {
		m[k] = float32(k % 3 % 2) // 0, 1, 0, 0, 1, 0, …
	}
	y := make([]float32, numel(yd))
	for r := range 8 { // head × query row
		for j := range 20 {
			var s float64
			for i := range 8 {
				s += float64(x[r*8+i]) * float64(w[i*20+j])
			}
			y[r*20+j] = float32(s + (1-float64(m[j]))*-10000)
		}
	}
	axes, err := onnx.NewInt("axes", onnx.Int64, []int64{2}, []int64{1, 2})
	return genCase{name: "attention_mask_add", opset: 13, err: err,
		g: graph{
			nodes: []node{
				{op: "MatMul", inputs: []string{"x", "w"}, outputs: []string{"s"}},
				{op: "Unsqueeze", inputs: []string{"m", "axes"}, outputs: []string{"m4"}},
				{op: "Sub", inputs: []string{"one", "m4"}, outputs: []string{"inv"}},
				{op: "Mul", inputs: []string{"inv", "big"}, outputs: []string{"bias"}},
				{op: "Add", inputs: []string{"s", "bias"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{onnx.NewFloat32("w", wd, w), scalar("one", 1), scalar("big", -10000), axes},
			inputs:  []valueInfo{fvi("x", xd), fvi("m", md)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x), onnx.NewFloat32("m", md, m)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, y)},
	}
}
