package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of LRN (cross-channel local response normalisation), Sigmoid and
// Tanh, which the engine computes with its exp and log: alone, after a
// Conv (LRN after Conv → Relu as AlexNet has it), and in int8.

func init() { caseFamilies = append(caseFamilies, lrnCases) }

// lrnRef is onnx's LRN on x of dims [N, C, spatial…] in float64: the window
// of channel c runs from c − floor((size−1)/2) to c + ceil((size−1)/2),
// clipped to the channels.
func lrnRef(x []float32, dims []int64, size int, alpha, beta, bias float64) []float32 {
	C := int(dims[1])
	S := numel(dims[2:])
	y := make([]float32, len(x))
	for k := range x {
		n, c, s := k/(C*S), k/S%C, k%S
		sum := 0.0
		for i := max(0, c-(size-1)/2); i <= min(C-1, c+size/2); i++ {
			v := float64(x[(n*C+i)*S+s])
			sum += v * v
		}
		y[k] = float32(float64(x[k]) / math.Pow(bias+alpha/float64(size)*sum, beta))
	}
	return y
}

// lrnAttrs are LRN's attributes; alpha, beta and bias are left to their
// defaults when def is set.
func lrnAttrs(size int64, def bool, alpha, beta, bias float32) []attr {
	a := []attr{iAttr("size", size)}
	if !def {
		a = append(a, fAttr("alpha", alpha), fAttr("beta", beta), fAttr("bias", bias))
	}
	return a
}

// lrnCase is LRN alone on an input of dims (seeded data scaled by scale).
func lrnCase(name string, dims []int64, size int64, def bool, alpha, beta, bias float32) genCase {
	x := data(dims, float64(len(name)))
	if def {
		alpha, beta, bias = 1e-4, 0.75, 1
	}
	return genCase{name: name, opset: 13,
		g: graph{
			nodes:   []node{{op: "LRN", inputs: []string{"x"}, outputs: []string{"y"}, attrs: lrnAttrs(size, def, alpha, beta, bias)}},
			inputs:  []valueInfo{fvi("x", dims)},
			outputs: []valueInfo{fvi("y", dims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", dims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", dims, lrnRef(x, dims, int(size), float64(alpha), float64(beta), float64(bias)))},
	}
}

func sigmoidRef(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }
func tanhRef(x float32) float32    { return float32(math.Tanh(float64(x))) }

// scaled is a unary case on x times s, for the ends of an activation's
// range.
func scaled(c genCase, s float32, f func(float32) float32) genCase {
	x, _ := c.ins[0].Float32s()
	x = mapF(x, func(v float32) float32 { return v * s })
	c.ins = []*onnx.Tensor{onnx.NewFloat32("x", xDims, x)}
	c.outs = []*onnx.Tensor{onnx.NewFloat32("y", xDims, mapF(x, f))}
	return c
}

func lrnCases() []genCase {
	// Conv → Relu → LRN(size 5, β 0.75, bias 1) as AlexNet; α larger than
	// its 1e-4 so the normalisation shows at these magnitudes.
	x := data(convXDims, 30)
	w := mapF(data(convWDims, 31), func(v float32) float32 { return v / 10 })
	b := data([]int64{20}, 32)
	r := mapF(conv3x3(x, w, b, 3, 6, 6, 20), func(v float32) float32 { return max(v, 0) })
	alexnet := genCase{name: "conv_relu_lrn", opset: 13,
		g: graph{
			nodes: []node{
				{op: "Conv", inputs: []string{"x", "w", "b"}, outputs: []string{"c"}, attrs: []attr{isAttr("pads", 1, 1, 1, 1), isAttr("kernel_shape", 3, 3)}},
				{op: "Relu", inputs: []string{"c"}, outputs: []string{"r"}},
				{op: "LRN", inputs: []string{"r"}, outputs: []string{"y"}, attrs: lrnAttrs(5, false, 0.01, 0.75, 1)},
			},
			inits:   []*onnx.Tensor{onnx.NewFloat32("w", convWDims, w), onnx.NewFloat32("b", []int64{20}, b)},
			inputs:  []valueInfo{fvi("x", convXDims)},
			outputs: []valueInfo{fvi("y", convYDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", convYDims, lrnRef(r, convYDims, 5, 0.01, 0.75, 1))},
		int8: true,
	}
	// LRN between two Convs: in int8 its output is quantised for the
	// second one.
	w2Dims := []int64{20, 20, 3, 3}
	w2 := mapF(data(w2Dims, 33), func(v float32) float32 { return v / 20 })
	b2 := data([]int64{20}, 34)
	n := lrnRef(r, convYDims, 3, 0.05, 0.75, 1)
	between := genCase{name: "conv_relu_lrn_conv", opset: 13,
		g: graph{
			nodes: []node{
				{op: "Conv", inputs: []string{"x", "w", "b"}, outputs: []string{"c"}, attrs: []attr{isAttr("pads", 1, 1, 1, 1)}},
				{op: "Relu", inputs: []string{"c"}, outputs: []string{"r"}},
				{op: "LRN", inputs: []string{"r"}, outputs: []string{"n"}, attrs: lrnAttrs(3, false, 0.05, 0.75, 1)},
				{op: "Conv", inputs: []string{"n", "w2", "b2"}, outputs: []string{"y"}, attrs: []attr{isAttr("pads", 1, 1, 1, 1)}},
			},
			inits: []*onnx.Tensor{onnx.NewFloat32("w", convWDims, w), onnx.NewFloat32("b", []int64{20}, b),
				onnx.NewFloat32("w2", w2Dims, w2), onnx.NewFloat32("b2", []int64{20}, b2)},
			inputs:  []valueInfo{fvi("x", convXDims)},
			outputs: []valueInfo{fvi("y", convYDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", convYDims, conv3x3(n, w2, b2, 20, 6, 6, 20))},
		int8: true,
	}
	convSigmoid := convAct("conv_sigmoid", 13, "Sigmoid", nil, nil, nil, sigmoidRef)
	convSigmoid.int8 = true
	convTanh := convAct("conv_tanh", 13, "Tanh", nil, nil, nil, tanhRef)
	convTanh.int8 = true
	sig := unary("sigmoid", 13, "Sigmoid", nil, nil, nil, sigmoidRef)
	th := unary("tanh", 13, "Tanh", nil, nil, nil, tanhRef)
	return []genCase{
		lrnCase("lrn_size3_default", xDims, 3, true, 0, 0, 0),
		lrnCase("lrn_size5_alpha_beta_bias", xDims, 5, false, 0.4, 0.6, 1.5),
		lrnCase("lrn_size4_even_window", xDims, 4, false, 0.3, 1, 2),
		lrnCase("lrn_40_channels_size5", []int64{1, 40, 2, 3}, 5, false, 0.2, 0.75, 1),
		// A window of 35 reaches two blocks to each side.
		lrnCase("lrn_40_channels_size35", []int64{2, 40, 1, 3}, 35, false, 0.5, 0.75, 1),
		// Rank 3: channels, then one spatial axis.
		lrnCase("lrn_rank3", []int64{1, 20, 7}, 5, false, 0.4, 0.75, 1),
		alexnet,
		between,
		sig,
		// ±150: e^150 overflows fp32, e^−150 underflows.
		scaled(unary("sigmoid_saturated", 13, "Sigmoid", nil, nil, nil, sigmoidRef), 30, sigmoidRef),
		convSigmoid,
		th,
		// |x| ≤ 0.005: the tolerance is mostly relative there.
		scaled(unary("tanh_near_zero", 13, "Tanh", nil, nil, nil, tanhRef), 1e-3, tanhRef),
		scaled(unary("tanh_saturated", 13, "Tanh", nil, nil, nil, tanhRef), 30, tanhRef),
		convTanh,
	}
}
