package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of upsampling: ConvTranspose (stride 2 with kernels 4 and 3,
// output_padding, stride 1, depthwise, and a 1×1 kernel whose odd phases see
// no input), and nearest Resize/Upsample by integer factors.

func init() { caseFamilies = append(caseFamilies, upsampleCases) }

// ctGeom is a transposed convolution of x [1, c, h, w] by w [c, m/groups,
// k, k] with stride s, pads p (top, left, bottom, right) and output
// padding op.
type ctGeom struct {
	c, h, w, m, k, s, groups, op int
	p                            [4]int
}

func (g ctGeom) out() (int, int) {
	return g.s*(g.h-1) + g.op + g.k - g.p[0] - g.p[2], g.s*(g.w-1) + g.op + g.k - g.p[1] - g.p[3]
}

// ctRef scatters every input pixel's products into the output, in float64.
func ctRef(g ctGeom, x, w, b []float32) []float32 {
	oh, ow := g.out()
	acc := make([]float64, g.m*oh*ow)
	icg, ocg := g.c/g.groups, g.m/g.groups
	for o := range g.m {
		for k := range oh * ow {
			acc[o*oh*ow+k] = float64(b[o])
		}
	}
	for ci := range g.c {
		grp := ci / icg
		for oo := range ocg {
			o := grp*ocg + oo
			for iy := range g.h {
				for ix := range g.w {
					for ky := range g.k {
						for kx := range g.k {
							y, xx := iy*g.s+ky-g.p[0], ix*g.s+kx-g.p[1]
							if y < 0 || y >= oh || xx < 0 || xx >= ow {
								continue
							}
							acc[(o*oh+y)*ow+xx] += float64(x[(ci*g.h+iy)*g.w+ix]) * float64(w[((ci*ocg+oo)*g.k+ky)*g.k+kx])
						}
					}
				}
			}
		}
	}
	y := make([]float32, len(acc))
	for k, v := range acc {
		y[k] = float32(v)
	}
	return y
}

func ctCase(name string, g ctGeom) genCase {
	xd := []int64{1, int64(g.c), int64(g.h), int64(g.w)}
	wd := []int64{int64(g.c), int64(g.m / g.groups), int64(g.k), int64(g.k)}
	oh, ow := g.out()
	yd := []int64{1, int64(g.m), int64(oh), int64(ow)}
	x := data(xd, 61)
	w := mapF(data(wd, 62), func(v float32) float32 { return v / 10 })
	b := data([]int64{int64(g.m)}, 63)
	attrs := []attr{iAttr("group", int64(g.groups)), isAttr("kernel_shape", int64(g.k), int64(g.k)), isAttr("strides", int64(g.s), int64(g.s)),
		isAttr("pads", int64(g.p[0]), int64(g.p[1]), int64(g.p[2]), int64(g.p[3]))}
	if g.op != 0 {
		attrs = append(attrs, isAttr("output_padding", int64(g.op), int64(g.op)))
	}
	return genCase{name: name, opset: 13,
		g: graph{
			nodes:   []node{{op: "ConvTranspose", inputs: []string{"x", "w", "b"}, outputs: []string{"y"}, attrs: attrs}},
			inits:   []*onnx.Tensor{onnx.NewFloat32("w", wd, w), onnx.NewFloat32("b", []int64{int64(g.m)}, b)},
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, ctRef(g, x, w, b))},
	}
}

// nearestRef upsamples x [1, c, h, w] by s, output pixel Y copying input
// src(Y) on each axis.
func nearestRef(x []float32, c, h, w, s int, src func(y, in int) int) []float32 {
	out := make([]float32, c*h*s*w*s)
	for ch := range c {
		for y := range h * s {
			for xx := range w * s {
				out[(ch*h*s+y)*w*s+xx] = x[(ch*h+src(y, h))*w+src(xx, w)]
			}
		}
	}
	return out
}

func upsampleCases() []genCase {
	cs := []genCase{
		ctCase("convtranspose_s2_k4_p1", ctGeom{c: 20, h: 5, w: 6, m: 12, k: 4, s: 2, groups: 1, p: [4]int{1, 1, 1, 1}}),
		ctCase("convtranspose_s2_k3_output_padding", ctGeom{c: 8, h: 4, w: 4, m: 18, k: 3, s: 2, groups: 1, op: 1, p: [4]int{1, 1, 1, 1}}),
		ctCase("convtranspose_s1_k3", ctGeom{c: 16, h: 6, w: 6, m: 16, k: 3, s: 1, groups: 1, p: [4]int{1, 1, 1, 1}}),
		ctCase("convtranspose_depthwise_s2_k4", ctGeom{c: 18, h: 4, w: 5, m: 18, k: 4, s: 2, groups: 18, p: [4]int{1, 1, 1, 1}}),
		ctCase("convtranspose_k1_s2", ctGeom{c: 4, h: 3, w: 3, m: 5, k: 1, s: 2, groups: 1}),
	}
	xd := []int64{1, 20, 3, 4}
	x := data(xd, 64)
	// Resize-13's defaults: half_pixel coordinates, round_prefer_floor.
	halfPixel := func(s int) func(y, in int) int {
		return func(y, in int) int {
			f := (float64(y)+0.5)/float64(s) - 0.5
			return min(max(int(math.Ceil(f-0.5)), 0), in-1)
		}
	}
	for _, s := range []int{2, 3} {
		yd := []int64{1, 20, 3 * int64(s), 4 * int64(s)}
		scales := onnx.NewFloat32("scales", []int64{4}, []float32{1, 1, float32(s), float32(s)})
		name := map[int]string{2: "resize_nearest_x2", 3: "resize_nearest_x3"}[s]
		cs = append(cs, genCase{name: name, opset: 13,
			g: graph{
				nodes:   []node{{op: "Resize", inputs: []string{"x", "", "scales"}, outputs: []string{"y"}}},
				inits:   []*onnx.Tensor{scales},
				inputs:  []valueInfo{fvi("x", xd)},
				outputs: []valueInfo{fvi("y", yd)},
			},
			ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
			outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, nearestRef(x, 20, 3, 4, s, halfPixel(s)))},
		})
	}
	// Bilinear: coordinates clamped at the edges, as onnxruntime does.
	linear := func(y, in, s int, coord string) (int, int, float32) {
		f := float64(y) / float64(s)
		if coord == "half_pixel" {
			f = (float64(y)+0.5)/float64(s) - 0.5
		}
		f = min(max(f, 0), float64(in-1))
		i0 := int(math.Floor(f))
		return i0, min(i0+1, in-1), float32(f - float64(i0))
	}
	bilinearRef := func(x []float32, c, h, w, s int, coord string) []float32 {
		out := make([]float32, c*h*s*w*s)
		for ch := range c {
			at := func(y, x0 int) float64 { return float64(x[(ch*h+y)*w+x0]) }
			for y := range h * s {
				y0, y1, fy := linear(y, h, s, coord)
				for xx := range w * s {
					x0, x1, fx := linear(xx, w, s, coord)
					top := (1-float64(fx))*at(y0, x0) + float64(fx)*at(y0, x1)
					bot := (1-float64(fx))*at(y1, x0) + float64(fx)*at(y1, x1)
					out[(ch*h*s+y)*w*s+xx] = float32((1-float64(fy))*top + float64(fy)*bot)
				}
			}
		}
		return out
	}
	for _, c := range []struct {
		name, coord string
		s           int
	}{{"resize_bilinear_x2", "half_pixel", 2}, {"resize_bilinear_x4_asymmetric", "asymmetric", 4}} {
		yd := []int64{1, 20, 3 * int64(c.s), 4 * int64(c.s)}
		attrs := []attr{sAttr("mode", "linear")}
		if c.coord != "half_pixel" {
			attrs = append(attrs, sAttr("coordinate_transformation_mode", c.coord))
		}
		cs = append(cs, genCase{name: c.name, opset: 13,
			g: graph{
				nodes:   []node{{op: "Resize", inputs: []string{"x", "", "scales"}, outputs: []string{"y"}, attrs: attrs}},
				inits:   []*onnx.Tensor{onnx.NewFloat32("scales", []int64{4}, []float32{1, 1, float32(c.s), float32(c.s)})},
				inputs:  []valueInfo{fvi("x", xd)},
				outputs: []valueInfo{fvi("y", yd)},
			},
			ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
			outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, bilinearRef(x, 20, 3, 4, c.s, c.coord))},
		})
	}
	// Upsample-9: asymmetric coordinates, floor.
	yd := []int64{1, 20, 6, 8}
	cs = append(cs, genCase{name: "upsample_nearest_x2", opset: 9,
		g: graph{
			nodes:   []node{{op: "Relu", inputs: []string{"x"}, outputs: []string{"r"}}, {op: "Upsample", inputs: []string{"r", "scales"}, outputs: []string{"y"}}},
			inits:   []*onnx.Tensor{onnx.NewFloat32("scales", []int64{4}, []float32{1, 1, 2, 2})},
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", yd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, mapF(nearestRef(x, 20, 3, 4, 2, func(y, in int) int { return y / 2 }), func(v float32) float32 { return max(v, 0) }))},
	})
	return append(cs, fpnAddCase(x, xd))
}

// fpnAddCase is a feature pyramid's top-down step as PP-OCR's DB detector
// writes it (opset 11): the finer lateral map, computed first (a Relu of
// its input), plus the coarser map upsampled by Resize (nearest,
// asymmetric, floor). The sum joins the lateral's layer, which must then
// run after the upsampling's phase layers that write the other operand.
func fpnAddCase(x []float32, xd []int64) genCase {
	ld := []int64{1, 20, 6, 8}
	lat := data(ld, 65)
	up := nearestRef(mapF(x, func(v float32) float32 { return max(v, 0) }), 20, 3, 4, 2, func(y, in int) int { return y / 2 })
	sum := make([]float32, len(up))
	for k := range sum {
		sum[k] = max(lat[k], 0) + up[k]
	}
	attrs := []attr{sAttr("mode", "nearest"), sAttr("coordinate_transformation_mode", "asymmetric"), sAttr("nearest_mode", "floor")}
	return genCase{name: "resize_nearest_add_lateral", opset: 11,
		g: graph{
			nodes: []node{
				{op: "Relu", inputs: []string{"lat"}, outputs: []string{"l"}},
				{op: "Relu", inputs: []string{"x"}, outputs: []string{"r"}},
				{op: "Resize", inputs: []string{"r", "roi", "scales"}, outputs: []string{"u"}, attrs: attrs},
				{op: "Add", inputs: []string{"l", "u"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{onnx.NewFloat32("roi", []int64{0}, nil), onnx.NewFloat32("scales", []int64{4}, []float32{1, 1, 2, 2})},
			inputs:  []valueInfo{fvi("lat", ld), fvi("x", xd)},
			outputs: []valueInfo{fvi("y", ld)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("lat", ld, lat), onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", ld, sum)},
	}
}
