package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Quantised operators beyond the QDQ fragments: QLinearMatMul of a uint8
// activation with a zero point by int8 weights with one matrix per stack
// (the weights' sums, which the zero point multiplies, differ between
// stacks), DequantizeLinear of a device tensor with one zero point per
// channel, uint8 along axis 1 and int8 along axis −3, and QuantizeLinear
// with one per channel.

func init() { caseFamilies = append(caseFamilies, qlinearCases) }

func qlinearCases() []genCase {
	return []genCase{
		qlinearMatMulBatched(),
		dequantizePerChannel("dequantizelinear_per_channel_zero_points", onnx.Uint8, 1),
		dequantizePerChannel("dequantizelinear_per_channel_zero_points_int8", onnx.Int8, -3),
		quantizePerChannel(),
	}
}

// quantizePerChannel is QuantizeLinear of x [1,20,3,4] to uint8 with a
// scale and a zero point per channel (axis 1, zero points spread over
// 0…255, so that every channel saturates at some value and at a different
// one): ONNX's arithmetic, x/s in float32 rounded half to even (exact ties
// among the data) plus the zero point, saturated.
func quantizePerChannel() genCase {
	x := data(xDims, 11)
	c := int(xDims[1])
	inner := numel(xDims) / c
	s, z := make([]float32, c), make([]int64, c)
	for ch := range c {
		s[ch] = 0.0625 * float32(1+ch%2)
		z[ch] = int64(ch * 255 / (c - 1))
	}
	x[3], x[4] = 0.09375, 0.15625 // 1.5 and 2.5 steps of channel 0: ties, both rounded to 2
	y := make([]int64, len(x))
	for i, v := range x {
		ch := i / inner
		y[i] = min(max(int64(math.RoundToEven(float64(v/s[ch])))+z[ch], 0), 255)
	}
	return genCase{name: "quantizelinear_per_channel_zero_points", opset: 13,
		g: graph{
			nodes:   []node{{op: "QuantizeLinear", inputs: []string{"x", "s", "z"}, outputs: []string{"y"}, attrs: []attr{iAttr("axis", 1)}}},
			inits:   []*onnx.Tensor{onnx.NewFloat32("s", []int64{int64(c)}, s), intTensor("z", onnx.Uint8, []int64{int64(c)}, z)},
			inputs:  []valueInfo{fvi("x", xDims)},
			outputs: []valueInfo{{name: "y", typ: onnx.Uint8, dims: xDims}},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xDims, x)},
		outs: []*onnx.Tensor{intTensor("y", onnx.Uint8, xDims, y)},
	}
}

// qlinearMatMulBatched is A uint8 [3,5,20] (zero point 113) by B int8
// [3,20,24] (zero point 2) to uint8 (zero point 120), the output scale
// spreading the results over about ±100 steps; the reference is ONNX's,
// the exact integer product rescaled in float64, rounded half to even and
// saturated.
func qlinearMatMulBatched() genCase {
	const (
		stacks, m, k, n = 3, 5, 20, 24
		za, zb, zy      = 113, 2, 120
		sa, sb          = float32(0.02), float32(0.01)
	)
	a, b := make([]int64, stacks*m*k), make([]int64, stacks*k*n)
	for i := range a {
		a[i] = int64(128 + 127*math.Sin(float64(i)*0.61))
	}
	for i := range b {
		b[i] = int64(math.Round(60 * math.Sin(float64(i)*1.7+0.3)))
	}
	acc := make([]float64, stacks*m*n)
	var top float64
	for s := range stacks {
		for i := range m {
			for j := range n {
				var v int64
				for p := range k {
					v += (a[(s*m+i)*k+p] - za) * (b[(s*k+p)*n+j] - zb)
				}
				acc[(s*m+i)*n+j] = float64(v) * float64(sa) * float64(sb)
				top = max(top, math.Abs(acc[(s*m+i)*n+j]))
			}
		}
	}
	sy := float32(top / 100)
	y := make([]int64, len(acc))
	for i, v := range acc {
		y[i] = int64(min(max(math.RoundToEven(v/float64(sy))+zy, 0), 255))
	}
	ad, bd, yd := []int64{stacks, m, k}, []int64{stacks, k, n}, []int64{stacks, m, n}
	return genCase{name: "qlinearmatmul_batched_input_zero_point", opset: 13,
		g: graph{
			nodes: []node{{op: "QLinearMatMul", inputs: []string{"a", "sa", "za", "b", "sb", "zb", "sy", "zy"}, outputs: []string{"y"}}},
			inits: []*onnx.Tensor{scalar("sa", sa), intTensor("za", onnx.Uint8, nil, []int64{za}), intTensor("b", onnx.Int8, bd, b),
				scalar("sb", sb), intTensor("zb", onnx.Int8, nil, []int64{zb}), scalar("sy", sy), intTensor("zy", onnx.Uint8, nil, []int64{zy})},
			inputs:  []valueInfo{{name: "a", typ: onnx.Uint8, dims: ad}},
			outputs: []valueInfo{{name: "y", typ: onnx.Uint8, dims: yd}},
		},
		ins:  []*onnx.Tensor{intTensor("a", onnx.Uint8, ad, a)},
		outs: []*onnx.Tensor{intTensor("y", onnx.Uint8, yd, y)},
	}
}

// dequantizePerChannel is DequantizeLinear of an input x [1,20,3,4] of
// type typ with a scale and a zero point per channel (axis 1, written as
// axis): y = (x − z)·s, exact in float32 as the product of an integer
// below 2⁹ by the scale, rounded once.
func dequantizePerChannel(name string, typ onnx.DataType, axis int64) genCase {
	lo, hi := int64(0), int64(255)
	if typ == onnx.Int8 {
		lo, hi = -128, 127
	}
	x := make([]int64, numel(xDims))
	for i := range x {
		x[i] = lo + int64(float64(hi-lo)*(0.5+0.5*math.Sin(float64(i)*0.83)))
	}
	c := int(xDims[1])
	s, z := make([]float32, c), make([]int64, c)
	for ch := range c {
		s[ch] = 0.01 * float32(ch+1)
		z[ch] = lo + int64(ch*(int(hi-lo)/(c-1)))
	}
	inner := numel(xDims) / c
	y := make([]float32, len(x))
	for i, v := range x {
		ch := i / inner % c
		y[i] = float32(float64(v-z[ch]) * float64(s[ch]))
	}
	return genCase{name: name, opset: 13,
		g: graph{
			nodes:   []node{{op: "DequantizeLinear", inputs: []string{"x", "s", "z"}, outputs: []string{"y"}, attrs: []attr{iAttr("axis", axis)}}},
			inits:   []*onnx.Tensor{onnx.NewFloat32("s", []int64{int64(c)}, s), intTensor("z", typ, []int64{int64(c)}, z)},
			inputs:  []valueInfo{{name: "x", typ: typ, dims: xDims}},
			outputs: []valueInfo{fvi("y", xDims)},
		},
		ins:  []*onnx.Tensor{intTensor("x", typ, xDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", xDims, y)},
	}
}
