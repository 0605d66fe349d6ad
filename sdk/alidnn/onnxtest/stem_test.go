package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of a network's first convolution on few channels, which the
// compiler runs with adjacent pixels packed into the lanes (see
// sdk/alidnn/stem.go and s2d.go): a ResNet-style 7×7 stride-2 stem on an image whose
// width needs right padding of the packing, and an MNIST-style 5×5 on one
// channel, both with random weights so a misplaced tap shows.

func init() { caseFamilies = append(caseFamilies, stemCases) }

// stemGeom is a convolution's geometry: kernel k×k, stride s, padding p
// on every side.
type stemGeom struct{ c, h, w, m, k, s, p int }

func (g stemGeom) out() (int, int) { return (g.h+2*g.p-g.k)/g.s + 1, (g.w+2*g.p-g.k)/g.s + 1 }

// stemConvRef is the convolution of x [1,c,h,w] by w [m,c,k,k] plus b, in
// float64 rounded once.
func stemConvRef(g stemGeom, x, w, b []float32) []float32 {
	oh, ow := g.out()
	y := make([]float32, g.m*oh*ow)
	for o := range g.m {
		for i := range oh {
			for j := range ow {
				s := float64(b[o])
				for ci := range g.c {
					for ki := range g.k {
						for kj := range g.k {
							ii, jj := i*g.s+ki-g.p, j*g.s+kj-g.p
							if ii < 0 || ii >= g.h || jj < 0 || jj >= g.w {
								continue
							}
							s += float64(x[(ci*g.h+ii)*g.w+jj]) * float64(w[((o*g.c+ci)*g.k+ki)*g.k+kj])
						}
					}
				}
				y[(o*oh+i)*ow+j] = float32(s)
			}
		}
	}
	return y
}

func stemCase(name string, g stemGeom, relu bool) genCase {
	xd := []int64{1, int64(g.c), int64(g.h), int64(g.w)}
	wd := []int64{int64(g.m), int64(g.c), int64(g.k), int64(g.k)}
	oh, ow := g.out()
	yd := []int64{1, int64(g.m), int64(oh), int64(ow)}
	x := data(xd, 11)
	w := mapF(data(wd, 12), func(v float32) float32 { return v / 20 })
	b := data([]int64{int64(g.m)}, 13)
	y := stemConvRef(g, x, w, b)
	conv := node{op: "Conv", inputs: []string{"x", "w", "b"}, outputs: []string{"y"}, attrs: []attr{
		isAttr("kernel_shape", int64(g.k), int64(g.k)), isAttr("strides", int64(g.s), int64(g.s)),
		isAttr("pads", int64(g.p), int64(g.p), int64(g.p), int64(g.p))}}
	nodes := []node{conv}
	if relu {
		nodes[0].outputs = []string{"c"}
		nodes = append(nodes, node{op: "Relu", inputs: []string{"c"}, outputs: []string{"y"}})
		y = mapF(y, func(v float32) float32 { return max(v, 0) })
	}
	return genCase{name: name, opset: 13,
		g: graph{
			nodes:   nodes,
			inits:   []*onnx.Tensor{onnx.NewFloat32("w", wd, w), onnx.NewFloat32("b", []int64{int64(g.m)}, b)},
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, y)},
	}
}

func stemCases() []genCase {
	return []genCase{
		stemCase("conv_stem_7x7_stride2", stemGeom{c: 3, h: 30, w: 34, m: 32, k: 7, s: 2, p: 3}, false),
		stemCase("conv_stem_5x5_one_channel_relu", stemGeom{c: 1, h: 28, w: 28, m: 16, k: 5, s: 1, p: 2}, true),
		// Stride-2 stems packed space to depth (see sdk/alidnn/s2d.go):
		// MobileNet's 3×3 on an odd width, and on four channels, which
		// fill the 16 lanes.
		stemCase("conv_stem_3x3_stride2_s2d_relu", stemGeom{c: 3, h: 30, w: 33, m: 32, k: 3, s: 2, p: 1}, true),
		stemCase("conv_stem_3x3_stride2_s2d_four_channels", stemGeom{c: 4, h: 17, w: 20, m: 24, k: 3, s: 2, p: 1}, false),
	}
}
