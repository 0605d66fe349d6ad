package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of convolutions beyond the dense 2-D one: grouped (groups
// straddling 16-channel blocks), depthwise with and without a channel
// multiplier, dilated, asymmetric padding, and 1-D.

func init() { caseFamilies = append(caseFamilies, groupConvCases) }

// gcGeom is a convolution of x [1, c, h, w] (h = 0 for 1-D) by m filters of
// kh×kw (kh = 0 for 1-D).
type gcGeom struct {
	c, h, w, m, kh, kw int
	groups, sh, sw     int
	dh, dw             int
	pads               [4]int // top, left, bottom, right
}

func (g gcGeom) oneD() bool { return g.h == 0 }

func (g gcGeom) dims() (x, w, y []int64) {
	oh, ow := g.out()
	if g.oneD() {
		return []int64{1, int64(g.c), int64(g.w)}, []int64{int64(g.m), int64(g.c / g.groups), int64(g.kw)}, []int64{1, int64(g.m), int64(ow)}
	}
	return []int64{1, int64(g.c), int64(g.h), int64(g.w)}, []int64{int64(g.m), int64(g.c / g.groups), int64(g.kh), int64(g.kw)},
		[]int64{1, int64(g.m), int64(oh), int64(ow)}
}

func (g gcGeom) out() (int, int) {
	h, kh := max(g.h, 1), max(g.kh, 1)
	oh := (h+g.pads[0]+g.pads[2]-((kh-1)*g.dh+1))/g.sh + 1
	ow := (g.w+g.pads[1]+g.pads[3]-((g.kw-1)*g.dw+1))/g.sw + 1
	return oh, ow
}

// gcRef is the grouped convolution of x by w plus b, in float64 rounded
// once.
func gcRef(g gcGeom, x, w, b []float32) []float32 {
	h, kh := max(g.h, 1), max(g.kh, 1)
	oh, ow := g.out()
	icg, ocg := g.c/g.groups, g.m/g.groups
	y := make([]float32, g.m*oh*ow)
	for o := range g.m {
		grp := o / ocg
		for i := range oh {
			for j := range ow {
				s := float64(b[o])
				for ci := range icg {
					c := grp*icg + ci
					for ki := range kh {
						for kj := range g.kw {
							ii, jj := i*g.sh+ki*g.dh-g.pads[0], j*g.sw+kj*g.dw-g.pads[1]
							if ii < 0 || ii >= h || jj < 0 || jj >= g.w {
								continue
							}
							s += float64(x[(c*h+ii)*g.w+jj]) * float64(w[((o*icg+ci)*kh+ki)*g.kw+kj])
						}
					}
				}
				y[(o*oh+i)*ow+j] = float32(s)
			}
		}
	}
	return y
}

func groupConvCase(name string, g gcGeom, int8 bool) genCase {
	xd, wd, yd := g.dims()
	x := data(xd, 21)
	w := mapF(data(wd, 22), func(v float32) float32 { return v / 10 })
	b := data([]int64{int64(g.m)}, 23)
	attrs := []attr{iAttr("group", int64(g.groups))}
	if g.oneD() {
		attrs = append(attrs, isAttr("kernel_shape", int64(g.kw)), isAttr("strides", int64(g.sw)),
			isAttr("dilations", int64(g.dw)), isAttr("pads", int64(g.pads[1]), int64(g.pads[3])))
	} else {
		attrs = append(attrs, isAttr("kernel_shape", int64(g.kh), int64(g.kw)), isAttr("strides", int64(g.sh), int64(g.sw)),
			isAttr("dilations", int64(g.dh), int64(g.dw)), isAttr("pads", int64(g.pads[0]), int64(g.pads[1]), int64(g.pads[2]), int64(g.pads[3])))
	}
	return genCase{name: name, opset: 13, int8: int8,
		g: graph{
			nodes:   []node{{op: "Conv", inputs: []string{"x", "w", "b"}, outputs: []string{"y"}, attrs: attrs}},
			inits:   []*onnx.Tensor{onnx.NewFloat32("w", wd, w), onnx.NewFloat32("b", []int64{int64(g.m)}, b)},
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, gcRef(g, x, w, b))},
	}
}

// groupConvCases run in fp32 only: their int8 outputs are within 0.3% of
// the range, but the argmax comparison of quantised runs needs outputs
// without near-ties along the last axis, which these small images have.
func groupConvCases() []genCase {
	return []genCase{
		// Groups of 10 input and 12 output channels: output blocks read
		// input blocks 0–1, 0–1 and 1–2.
		groupConvCase("conv_group4", gcGeom{c: 40, h: 5, w: 5, m: 48, kh: 3, kw: 3, groups: 4, sh: 1, sw: 1, dh: 1, dw: 1, pads: [4]int{1, 1, 1, 1}}, false),
		groupConvCase("conv_depthwise_stride2", gcGeom{c: 36, h: 7, w: 7, m: 36, kh: 3, kw: 3, groups: 36, sh: 2, sw: 2, dh: 1, dw: 1, pads: [4]int{1, 1, 1, 1}}, false),
		groupConvCase("conv_depthwise_multiplier2", gcGeom{c: 20, h: 6, w: 6, m: 40, kh: 3, kw: 3, groups: 20, sh: 1, sw: 1, dh: 1, dw: 1, pads: [4]int{1, 1, 1, 1}}, false),
		groupConvCase("conv_dilated", gcGeom{c: 5, h: 9, w: 9, m: 18, kh: 3, kw: 3, groups: 1, sh: 1, sw: 1, dh: 2, dw: 2, pads: [4]int{2, 2, 2, 2}}, false),
		groupConvCase("conv_asymmetric_pads", gcGeom{c: 3, h: 8, w: 8, m: 17, kh: 3, kw: 3, groups: 1, sh: 1, sw: 1, dh: 1, dw: 1, pads: [4]int{0, 1, 2, 0}}, false),
		groupConvCase("conv1d_stride2", gcGeom{c: 20, w: 30, m: 24, kw: 5, groups: 1, sh: 1, sw: 2, dh: 1, dw: 1, pads: [4]int{0, 2, 0, 1}}, false),
		groupConvCase("conv1d_depthwise_dilated", gcGeom{c: 32, w: 40, m: 32, kw: 3, groups: 32, sh: 1, sw: 1, dh: 1, dw: 3, pads: [4]int{0, 3, 0, 3}}, false),
	}
}
