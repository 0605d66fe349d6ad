package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of pooling attributes: ceil_mode for max and average pooling (the
// last window hanging past the padding), count_include_pad with explicit
// and ceil-mode padding, asymmetric pads, dilations (pooled tap by tap),
// and average pooling after a Conv.

func init() { caseFamilies = append(caseFamilies, poolCases) }

// poolGeom is a k×k pooling with stride s and pads (top, left, bottom,
// right) of an image h×w.
type poolGeom struct {
	h, w, k, s int
	pads       [4]int
	ceil, cip  bool
	d          int // dilation, 0 for 1
}

func (g poolGeom) dil() int { return max(g.d, 1) }

func (g poolGeom) out(in, pb, pe int) int {
	span := in + pb + pe - ((g.k-1)*g.dil() + 1)
	o := span/g.s + 1
	if g.ceil && span%g.s != 0 && o*g.s < in+pb {
		o++
	}
	return o
}

// poolRef pools x [c, h, w] as ONNX (and PyTorch) define it: padding never
// wins a max; an average divides by the window's elements inside the image,
// or inside the explicitly padded image with count_include_pad.
func poolRef(g poolGeom, c int, x []float32, avg bool) ([]float32, int, int) {
	oh, ow := g.out(g.h, g.pads[0], g.pads[2]), g.out(g.w, g.pads[1], g.pads[3])
	y := make([]float32, c*oh*ow)
	for ch := range c {
		for i := range oh {
			for j := range ow {
				h0, w0 := i*g.s-g.pads[0], j*g.s-g.pads[1]
				var sum float64
				cnt := 0
				m := math.Inf(-1)
				for ta := range g.k {
					for tb := range g.k {
						a, b := h0+ta*g.dil(), w0+tb*g.dil()
						in := a >= 0 && a < g.h && b >= 0 && b < g.w
						if g.cip {
							// Counted up to the explicit padding.
							if a < g.h+g.pads[2] && b < g.w+g.pads[3] {
								cnt++
							}
						} else if in {
							cnt++
						}
						if !in {
							continue
						}
						v := float64(x[(ch*g.h+a)*g.w+b])
						sum += v
						m = max(m, v)
					}
				}
				if !avg {
					y[(ch*oh+i)*ow+j] = float32(m)
					continue
				}
				y[(ch*oh+i)*ow+j] = float32(sum / float64(cnt))
			}
		}
	}
	return y, oh, ow
}

func poolCase(name, op string, g poolGeom, int8 bool) genCase {
	const c = 20
	xd := []int64{1, c, int64(g.h), int64(g.w)}
	x := data(xd, 91)
	y, oh, ow := poolRef(g, c, x, op == "AveragePool")
	yd := []int64{1, c, int64(oh), int64(ow)}
	attrs := []attr{isAttr("kernel_shape", int64(g.k), int64(g.k)), isAttr("strides", int64(g.s), int64(g.s)),
		isAttr("pads", int64(g.pads[0]), int64(g.pads[1]), int64(g.pads[2]), int64(g.pads[3]))}
	if g.ceil {
		attrs = append(attrs, iAttr("ceil_mode", 1))
	}
	if g.cip {
		attrs = append(attrs, iAttr("count_include_pad", 1))
	}
	opset := int64(13)
	if g.d > 1 {
		attrs = append(attrs, isAttr("dilations", int64(g.d), int64(g.d)))
		opset = 19 // AveragePool's dilations
	}
	return genCase{name: name, opset: opset, int8: int8,
		g: graph{
			nodes:   []node{{op: op, inputs: []string{"x"}, outputs: []string{"y"}, attrs: attrs}},
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, y)},
	}
}

func poolCases() []genCase {
	cs := []genCase{
		poolCase("maxpool_ceil_mode", "MaxPool", poolGeom{h: 8, w: 9, k: 3, s: 2, ceil: true}, false),
		poolCase("maxpool_ceil_mode_pads", "MaxPool", poolGeom{h: 7, w: 10, k: 3, s: 2, pads: [4]int{1, 1, 1, 1}, ceil: true}, false),
		poolCase("averagepool_ceil_mode", "AveragePool", poolGeom{h: 8, w: 9, k: 3, s: 2, ceil: true}, false),
		poolCase("averagepool_ceil_count_include_pad", "AveragePool", poolGeom{h: 7, w: 10, k: 3, s: 2, pads: [4]int{1, 1, 1, 1}, ceil: true, cip: true}, false),
		poolCase("averagepool_count_include_pad", "AveragePool", poolGeom{h: 6, w: 7, k: 3, s: 1, pads: [4]int{1, 1, 1, 1}, cip: true}, false),
		poolCase("averagepool_asymmetric_pads", "AveragePool", poolGeom{h: 6, w: 7, k: 2, s: 2, pads: [4]int{0, 1, 1, 0}}, false),
		poolCase("maxpool_dilations", "MaxPool", poolGeom{h: 8, w: 9, k: 2, s: 1, d: 2}, false),
		poolCase("maxpool_dilations_pads_ceil_mode", "MaxPool", poolGeom{h: 9, w: 10, k: 3, s: 2, d: 2, pads: [4]int{1, 1, 1, 1}, ceil: true}, false),
		poolCase("averagepool_dilations_pads", "AveragePool", poolGeom{h: 8, w: 9, k: 3, s: 1, d: 2, pads: [4]int{2, 1, 2, 1}}, false),
		poolCase("averagepool_dilations_count_include_pad", "AveragePool", poolGeom{h: 8, w: 8, k: 2, s: 2, d: 3, pads: [4]int{1, 1, 1, 1}, cip: true}, false),
	}
	// Average pooling after a Conv: post-training-quantised, the engine
	// averages the int8 values themselves (TestQuantizedAveragePool).
	x := data(convXDims, 5)
	w := mapF(data(convWDims, 6), func(v float32) float32 { return v / 10 })
	b := data([]int64{20}, 7)
	conv := conv3x3(x, w, b, 3, 6, 6, 20)
	y, oh, ow := poolRef(poolGeom{h: 6, w: 6, k: 2, s: 2}, 20, conv, true)
	yd := []int64{1, 20, int64(oh), int64(ow)}
	cs = append(cs, genCase{name: "conv_averagepool", opset: 13,
		g: graph{
			nodes: []node{
				{op: "Conv", inputs: []string{"x", "w", "b"}, outputs: []string{"c"}, attrs: []attr{isAttr("pads", 1, 1, 1, 1), isAttr("kernel_shape", 3, 3)}},
				{op: "AveragePool", inputs: []string{"c"}, outputs: []string{"y"}, attrs: []attr{isAttr("kernel_shape", 2, 2), isAttr("strides", 2, 2)}},
			},
			inits:   []*onnx.Tensor{onnx.NewFloat32("w", convWDims, w), onnx.NewFloat32("b", []int64{20}, b)},
			inputs:  []valueInfo{fvi("x", convXDims)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, y)},
	})
	// The same in int8, on an image that rises along each row through
	// positive weights, so each output row's largest value leads the next
	// by several int8 steps and the argmax comparison of quantised runs is
	// meaningful: the engine averages the int8 values themselves.
	xr := make([]float32, len(x))
	for k := range xr {
		xr[k] = float32(k%6) + 0.1*float32(k%5)
	}
	wr := mapF(w, func(v float32) float32 { return float32(math.Abs(float64(v))) })
	yr, _, _ := poolRef(poolGeom{h: 6, w: 6, k: 2, s: 2}, 20, conv3x3(xr, wr, b, 3, 6, 6, 20), true)
	rising := cs[len(cs)-1]
	rising.name, rising.int8 = "conv_averagepool_int8", true
	rising.g.inits = []*onnx.Tensor{onnx.NewFloat32("w", convWDims, wr), onnx.NewFloat32("b", []int64{20}, b)}
	rising.ins = []*onnx.Tensor{onnx.NewFloat32("x", convXDims, xr)}
	rising.outs = []*onnx.Tensor{onnx.NewFloat32("y", yd, yr)}
	return append(cs, rising)
}
