package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of pre-quantised models: QuantizeLinear → DequantizeLinear per
// channel (axis 1) on an activation, and a fragment in onnxruntime's QDQ
// format, which the compiler runs as int8 convolutions: an input quantised
// to uint8, two Convs whose weights are int8 per output channel (axis 0)
// and biases int32, both behind DequantizeLinear, a Relu and a requantised
// activation between them. Integer constants are written as exporters
// sometimes do, value_ints cast to the integer type.

func init() { caseFamilies = append(caseFamilies, expQDQCases) }

// expIntConst is the nodes making the integer constant name of type typ
// and dims (a scalar for nil dims) from value_ints.
func expIntConst(name string, typ onnx.DataType, dims []int64, v []int64) []node {
	cast := node{op: "Cast", inputs: []string{name + "_i64"}, outputs: []string{name}, attrs: []attr{iAttr("to", int64(typ))}}
	if dims == nil {
		return []node{{op: "Constant", outputs: []string{name + "_i64"}, attrs: []attr{iAttr("value_int", v[0])}}, cast}
	}
	return []node{
		expInts(name+"_flat", v...),
		expInts(name+"_shape", dims...),
		{op: "Reshape", inputs: []string{name + "_flat", name + "_shape"}, outputs: []string{name + "_i64"}},
		cast,
	}
}

// expQuant is QuantizeLinear's arithmetic: round half to even, saturate.
func expQuant(x, s float32, zp, lo, hi int64) int64 {
	return min(max(int64(math.RoundToEven(float64(x/s)))+zp, lo), hi)
}

// expConv3x3 is conv3x3 in float64, the reference for convolutions the
// engine computes exactly in integers.
func expConv3x3(x, w, b []float32, c, h, wd, m int) []float32 {
	y := make([]float32, m*h*wd)
	for o := range m {
		for i := range h {
			for j := range wd {
				s := float64(b[o])
				for ci := range c {
					for ki := range 3 {
						for kj := range 3 {
							ii, jj := i+ki-1, j+kj-1
							if ii < 0 || ii >= h || jj < 0 || jj >= wd {
								continue
							}
							s += float64(x[(ci*h+ii)*wd+jj]) * float64(w[((o*c+ci)*3+ki)*3+kj])
						}
					}
				}
				y[(o*h+i)*wd+j] = float32(s)
			}
		}
	}
	return y
}

// expPerChannelQDQ is x → QuantizeLinear → DequantizeLinear with one int8
// scale per channel, zero points 0.
func expPerChannelQDQ() genCase {
	x := data(xDims, 140)
	s := mapF(data([]int64{20}, 141), func(v float32) float32 { return float32(math.Abs(float64(v)))/40 + 0.01 })
	y := make([]float32, len(x))
	inner := numel(xDims[2:])
	for k, v := range x {
		sc := s[k/inner%20]
		y[k] = float32(expQuant(v, sc, 0, -128, 127)) * sc
	}
	nodes := expIntConst("zp", onnx.Int8, []int64{20}, make([]int64, 20))
	nodes = append(nodes,
		node{op: "QuantizeLinear", inputs: []string{"x", "s", "zp"}, outputs: []string{"q"}, attrs: []attr{iAttr("axis", 1)}},
		node{op: "DequantizeLinear", inputs: []string{"q", "s", "zp"}, outputs: []string{"y"}, attrs: []attr{iAttr("axis", 1)}})
	return genCase{name: "export_qdq_per_channel", opset: 13,
		g: graph{
			nodes:   nodes,
			inits:   []*onnx.Tensor{onnx.NewFloat32("s", []int64{20}, s)},
			inputs:  []valueInfo{fvi("x", xDims)},
			outputs: []valueInfo{fvi("y", xDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", xDims, y)},
	}
}

// expQDQConv is one QDQ Conv of the activation xd (c channels) to m
// channels: its int8 weights and int32 bias, their DequantizeLinear nodes,
// the Conv to out, and the reference.
func expQDQConv(k string, xd []float32, sx float32, c, m int, seed float64, out string) ([]node, []*onnx.Tensor, []float32) {
	wdims := []int64{int64(m), int64(c), 3, 3}
	wf := data(wdims, seed)
	sw := make([]float32, m)
	per := c * 9
	wq := make([]int64, len(wf))
	for o := range m {
		sw[o] = (float32(o%5) + 1) / 400
		for i := range per {
			wq[o*per+i] = expQuant(wf[o*per+i]/20, sw[o], 0, -127, 127)
		}
	}
	bs := make([]float32, m)
	bq := make([]int64, m)
	bf := data([]int64{int64(m)}, seed+1)
	wd := make([]float32, len(wq))
	bd := make([]float32, m)
	for o := range m {
		bs[o] = sx * sw[o]
		bq[o] = int64(math.Round(float64(bf[o] / bs[o])))
		bd[o] = float32(bq[o]) * bs[o]
		for i := range per {
			wd[o*per+i] = float32(wq[o*per+i]) * sw[o]
		}
	}
	nodes := append(expIntConst("wq"+k, onnx.Int8, wdims, wq), expIntConst("bq"+k, onnx.Int32, []int64{int64(m)}, bq)...)
	nodes = append(nodes,
		node{op: "DequantizeLinear", inputs: []string{"wq" + k, "sw" + k}, outputs: []string{"w" + k}, attrs: []attr{iAttr("axis", 0)}},
		node{op: "DequantizeLinear", inputs: []string{"bq" + k, "bs" + k}, outputs: []string{"b" + k}, attrs: []attr{iAttr("axis", 0)}},
		node{op: "Conv", inputs: []string{"xd" + k, "w" + k, "b" + k}, outputs: []string{out}, attrs: []attr{isAttr("pads", 1, 1, 1, 1)}})
	inits := []*onnx.Tensor{onnx.NewFloat32("sw"+k, []int64{int64(m)}, sw), onnx.NewFloat32("bs"+k, []int64{int64(m)}, bs)}
	return nodes, inits, expConv3x3(xd, wd, bd, c, 6, 6, m)
}

// expQDQFront is x → Q(uint8, zero point 120) → DQ → Conv → Relu →
// Q(uint8) → DQ → xd1: its nodes, initializers, and xd1's reference and
// scale.
func expQDQFront(x []float32) ([]node, []*onnx.Tensor, []float32, float32) {
	const sx0, zx0, sx1 = float32(0.04), 120, float32(0.05)
	xd0 := make([]float32, len(x))
	for k, v := range x {
		xd0[k] = float32(expQuant(v, sx0, zx0, 0, 255)-zx0) * sx0
	}
	n0, i0, c0 := expQDQConv("0", xd0, sx0, 3, 20, 151, "c0")
	xd1 := make([]float32, len(c0))
	for k, v := range c0 {
		xd1[k] = float32(expQuant(max(v, 0), sx1, 0, 0, 255)) * sx1
	}
	nodes := append(expIntConst("zx0", onnx.Uint8, nil, []int64{zx0}), expIntConst("zx1", onnx.Uint8, nil, []int64{0})...)
	nodes = append(nodes,
		node{op: "QuantizeLinear", inputs: []string{"x", "sx0", "zx0"}, outputs: []string{"xq0"}},
		node{op: "DequantizeLinear", inputs: []string{"xq0", "sx0", "zx0"}, outputs: []string{"xd0"}})
	nodes = append(nodes, n0...)
	nodes = append(nodes,
		node{op: "Relu", inputs: []string{"c0"}, outputs: []string{"r0"}},
		node{op: "QuantizeLinear", inputs: []string{"r0", "sx1", "zx1"}, outputs: []string{"xq1"}},
		node{op: "DequantizeLinear", inputs: []string{"xq1", "sx1", "zx1"}, outputs: []string{"xd1"}})
	return nodes, append([]*onnx.Tensor{scalar("sx0", sx0), scalar("sx1", sx1)}, i0...), xd1, sx1
}

// expQDQNetwork is expQDQFront, then a second QDQ Conv → y.
func expQDQNetwork() genCase {
	x := data(convXDims, 150)
	nodes, inits, xd1, sx1 := expQDQFront(x)
	n1, i1, y := expQDQConv("1", xd1, sx1, 20, 20, 153, "y")
	return genCase{name: "export_qdq_conv", opset: 13,
		g: graph{
			nodes:   append(nodes, n1...),
			inits:   append(inits, i1...),
			inputs:  []valueInfo{fvi("x", convXDims)},
			outputs: []valueInfo{fvi("y", convYDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", convYDims, y)},
	}
}

// expQDQClassifier is expQDQFront, then Flatten behind DequantizeLinear
// and QuantizeLinear (as the quantiser wraps operators it does not
// quantise) into a QDQ Gemm with int8 weights per output (transB, axis 0)
// and an int32 bias, or (matmul) a QDQ MatMul with int8 weights per
// tensor and a float bias added after it.
func expQDQClassifier(name string, matmul bool) genCase {
	x := data(convXDims, 160)
	nodes, inits, xd1, sx1 := expQDQFront(x)
	k := len(xd1)
	wf := data([]int64{expClasses, int64(k)}, 161)
	sw := make([]float32, expClasses)
	wq := make([]int64, len(wf))   // [N][K]
	wd := make([]float32, len(wf)) // [N][K]
	bq := make([]int64, expClasses)
	bd := make([]float32, expClasses)
	bs := make([]float32, expClasses)
	bf := data([]int64{expClasses}, 162)
	for j := range expClasses {
		sw[j] = float32(j%3+1) / 500
		if matmul {
			sw[j] = 0.003
		}
		for i := range k {
			wq[j*k+i] = expQuant(wf[j*k+i]/10, sw[j], 0, -127, 127)
			wd[j*k+i] = float32(wq[j*k+i]) * sw[j]
		}
		bs[j] = sx1 * sw[j]
		bq[j] = int64(math.Round(float64(bf[j] / bs[j])))
		bd[j] = float32(bq[j]) * bs[j]
		if matmul {
			bd[j] = bf[j]
		}
	}
	y := make([]float32, expClasses)
	for j := range y {
		s := float64(bd[j])
		for i := range k {
			s += float64(xd1[i]) * float64(wd[j*k+i])
		}
		y[j] = float32(s)
	}
	nodes = append(nodes,
		node{op: "Flatten", inputs: []string{"xd1"}, outputs: []string{"f"}},
		node{op: "QuantizeLinear", inputs: []string{"f", "sx1", "zx1"}, outputs: []string{"fq"}},
		node{op: "DequantizeLinear", inputs: []string{"fq", "sx1", "zx1"}, outputs: []string{"fd"}})
	if matmul {
		kn := make([]int64, len(wq)) // [K][N]
		for j := range expClasses {
			for i := range k {
				kn[i*expClasses+j] = wq[j*k+i]
			}
		}
		nodes = append(nodes, expIntConst("wq", onnx.Int8, []int64{int64(k), expClasses}, kn)...)
		nodes = append(nodes,
			node{op: "DequantizeLinear", inputs: []string{"wq", "swt"}, outputs: []string{"w"}},
			node{op: "MatMul", inputs: []string{"fd", "w"}, outputs: []string{"m"}},
			node{op: "Add", inputs: []string{"m", "bias"}, outputs: []string{"y"}})
		inits = append(inits, scalar("swt", sw[0]), onnx.NewFloat32("bias", []int64{expClasses}, bd))
	} else {
		nodes = append(nodes, expIntConst("wq", onnx.Int8, []int64{expClasses, int64(k)}, wq)...)
		nodes = append(nodes, expIntConst("bq", onnx.Int32, []int64{expClasses}, bq)...)
		nodes = append(nodes,
			node{op: "DequantizeLinear", inputs: []string{"wq", "sw"}, outputs: []string{"w"}, attrs: []attr{iAttr("axis", 0)}},
			node{op: "DequantizeLinear", inputs: []string{"bq", "bs"}, outputs: []string{"b"}, attrs: []attr{iAttr("axis", 0)}},
			node{op: "Gemm", inputs: []string{"fd", "w", "b"}, outputs: []string{"y"}, attrs: []attr{iAttr("transB", 1)}})
		inits = append(inits, onnx.NewFloat32("sw", []int64{expClasses}, sw), onnx.NewFloat32("bs", []int64{expClasses}, bs))
	}
	yd := []int64{1, expClasses}
	return genCase{name: name, opset: 13,
		g: graph{
			nodes:   nodes,
			inits:   inits,
			inputs:  []valueInfo{fvi("x", convXDims)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, y)},
	}
}

// expQDQFloatWeights is a quantised activation into a Conv with float
// weights, which runs in fp32 on the dequantised input.
func expQDQFloatWeights() genCase {
	x := data(convXDims, 170)
	w := mapF(data(convWDims, 171), func(v float32) float32 { return v / 10 })
	b := data([]int64{20}, 172)
	const sx = float32(0.03)
	xd := mapF(x, func(v float32) float32 { return float32(expQuant(v, sx, 0, -128, 127)) * sx })
	nodes := append(expIntConst("zx", onnx.Int8, nil, []int64{0}),
		node{op: "QuantizeLinear", inputs: []string{"x", "sx", "zx"}, outputs: []string{"xq"}},
		node{op: "DequantizeLinear", inputs: []string{"xq", "sx", "zx"}, outputs: []string{"xd"}},
		node{op: "Conv", inputs: []string{"xd", "w", "b"}, outputs: []string{"y"}, attrs: []attr{isAttr("pads", 1, 1, 1, 1)}})
	return genCase{name: "export_qdq_float_weights", opset: 13,
		g: graph{
			nodes:   nodes,
			inits:   []*onnx.Tensor{scalar("sx", sx), onnx.NewFloat32("w", convWDims, w), onnx.NewFloat32("b", []int64{20}, b)},
			inputs:  []valueInfo{fvi("x", convXDims)},
			outputs: []valueInfo{fvi("y", convYDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", convYDims, expConv3x3(xd, w, b, 3, 6, 6, 20))},
	}
}

// expQDQAfterFlatten is Relu → Flatten → Q → DQ → Relu: the
// DequantizeLinear of a reshaped int8 tensor, deferred, then compiled for
// the Relu on the tensor's storage.
func expQDQAfterFlatten() genCase {
	x := data(xDims, 180)
	const s = float32(0.02)
	y := mapF(x, func(v float32) float32 { return max(float32(expQuant(max(v, 0), s, 0, -128, 127))*s, 0) })
	yd := []int64{1, int64(numel(xDims))}
	nodes := append(expIntConst("z", onnx.Int8, nil, []int64{0}),
		node{op: "Relu", inputs: []string{"x"}, outputs: []string{"r"}},
		node{op: "Flatten", inputs: []string{"r"}, outputs: []string{"f"}},
		node{op: "QuantizeLinear", inputs: []string{"f", "s", "z"}, outputs: []string{"q"}},
		node{op: "DequantizeLinear", inputs: []string{"q", "s", "z"}, outputs: []string{"d"}},
		node{op: "Relu", inputs: []string{"d"}, outputs: []string{"y"}})
	return genCase{name: "export_qdq_after_flatten", opset: 13,
		g: graph{
			nodes:   nodes,
			inits:   []*onnx.Tensor{scalar("s", s)},
			inputs:  []valueInfo{fvi("x", xDims)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, y)},
	}
}

func expQDQCases() []genCase {
	return []genCase{expPerChannelQDQ(), expQDQNetwork(),
		expQDQClassifier("export_qdq_classifier_gemm", false), expQDQClassifier("export_qdq_classifier_matmul", true), expQDQFloatWeights(), expQDQAfterFlatten()}
}
