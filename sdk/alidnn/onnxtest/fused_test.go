package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of an activation fused into a convolution's epilogue, as exporters
// write MobileNet-style blocks (Conv → Clip(0, 6), Conv → HardSwish), and
// of Max/Min with a constant there.

var (
	convXDims = []int64{1, 3, 6, 6}
	convWDims = []int64{20, 3, 3, 3}
	convYDims = []int64{1, 20, 6, 6}
)

// conv3x3 is a 3×3 convolution with stride 1 and padding 1 of x [1,c,h,w]
// by w [m,c,3,3] plus b.
func conv3x3(x, w, b []float32, c, h, wd, m int) []float32 {
	return conv3x3Pad(x, w, b, c, h, wd, m, [4]int{1, 1, 1, 1})
}

// conv3x3Pad is a 3×3 convolution with stride 1 and pads top, left,
// bottom, right.
func conv3x3Pad(x, w, b []float32, c, h, wd, m int, p [4]int) []float32 {
	oh, ow := h+p[0]+p[2]-2, wd+p[1]+p[3]-2
	y := make([]float32, m*oh*ow)
	for o := range m {
		for i := range oh {
			for j := range ow {
				s := b[o]
				for ci := range c {
					for ki := range 3 {
						for kj := range 3 {
							ii, jj := i+ki-p[0], j+kj-p[1]
							if ii < 0 || ii >= h || jj < 0 || jj >= wd {
								continue
							}
							s += x[(ci*h+ii)*wd+jj] * w[((o*c+ci)*3+ki)*3+kj]
						}
					}
				}
				y[(o*oh+i)*ow+j] = s
			}
		}
	}
	return y
}

// convAct is Conv then one activation node op with attrs and constant
// extra inputs, f its reference.
func convAct(name string, opset int64, op string, attrs []attr, extra []string, inits []*onnx.Tensor, f func(float32) float32) genCase {
	x := data(convXDims, 5)
	w := mapF(data(convWDims, 6), func(v float32) float32 { return v / 10 })
	b := data([]int64{20}, 7)
	y := mapF(conv3x3(x, w, b, 3, 6, 6, 20), f)
	return genCase{name: name, opset: opset,
		g: graph{
			nodes: []node{
				{op: "Conv", inputs: []string{"x", "w", "b"}, outputs: []string{"c"}, attrs: []attr{isAttr("pads", 1, 1, 1, 1), isAttr("kernel_shape", 3, 3)}},
				{op: op, inputs: append([]string{"c"}, extra...), outputs: []string{"y"}, attrs: attrs},
			},
			inits:   append([]*onnx.Tensor{onnx.NewFloat32("w", convWDims, w), onnx.NewFloat32("b", []int64{20}, b)}, inits...),
			inputs:  []valueInfo{fvi("x", convXDims)},
			outputs: []valueInfo{fvi("y", convYDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", convYDims, y)},
	}
}

// fusedCases also run in int8 but Clip(0, 6) and Max(x, −1.25): several
// outputs of a row saturate at the bound, a tie that quantisation breaks
// either way (their int8 errors are of the other cases' size).
func fusedCases() []genCase {
	cs := []genCase{
		convAct("conv_clip_relu6", 13, "Clip", nil, []string{"lo", "hi"}, []*onnx.Tensor{scalar("lo", 0), scalar("hi", 6)}, clamp(0, 6)),
		convAct("conv_leakyrelu", 13, "LeakyRelu", []attr{fAttr("alpha", 0.1234567)}, nil, nil, leaky(0.1234567)),
		convAct("conv_hardsigmoid", 13, "HardSigmoid", nil, nil, nil, hardSigmoid(0.2, 0.5)),
		convAct("conv_max_scalar", 13, "Max", nil, []string{"m"}, []*onnx.Tensor{scalar("m", -1.25)}, func(x float32) float32 { return max(x, -1.25) }),
		convAct("conv_min_scalar", 13, "Min", nil, []string{"m"}, []*onnx.Tensor{scalar("m", 2.5)}, func(x float32) float32 { return min(x, 2.5) }),
		convAct("conv_hardswish", 14, "HardSwish", nil, nil, nil, func(x float32) float32 { return x * hardSigmoid(1.0/6, 0.5)(x) }),
	}
	for k := range cs {
		cs[k].int8 = cs[k].name != "conv_clip_relu6" && cs[k].name != "conv_max_scalar"
	}
	return cs
}
