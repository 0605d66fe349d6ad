package alidnn

// A stride-2 first convolution on few channels (MobileNet's and
// EfficientNet's 3×3 stems) packs no better along the rows (see stem.go):
// with g = 3 pixels in the lanes, the packing costs what it saves. Packing
// 2×2 pixels into the lanes instead (space to depth: channel c, offset
// (dy, dx) in lane 4c + 2dy + dx) makes it a stride-1 convolution of a
// ⌈kh/2⌉×⌈kw/2⌉ kernel on an image of half the size: a 3×3 kernel's 9 taps
// become 4, and the packing is a 2×2 stride-2 convolution of 4 taps over
// the packed image, a quarter of the output's pixels.

import "github.com/fpga-faas/faas/sdk/onnx"

// s2dPays reports whether packing a convolution space to depth pays:
// the blocks it saves over the output's pixels and blocks exceed the
// packing's 4 blocks per packed pixel.
func s2dPays(spec *convSpec) bool {
	if spec.sh != 2 || spec.sw != 2 || spec.dh != 1 || spec.dw != 1 || spec.groups > 1 || 4*spec.ic > lanes || spec.kh*spec.kw < 2 {
		return false
	}
	kh, kw := (spec.kh+1)/2, (spec.kw+1)/2
	ob := (spec.oc + lanes - 1) / lanes
	saved := (spec.kh*spec.kw - kh*kw) * spec.oh * spec.ow * ob
	cost := 4 * (spec.oh + kh - 1) * (spec.ow + kw - 1)
	return saved > cost
}

// spaceToDepthStem compiles an fp32 stride-2 convolution of x by the
// weights w as a packing convolution followed by the packed one, if
// s2dPays. It reports whether it did.
func (c *compiler) spaceToDepthStem(n *onnx.Node, x, w *value, biasIdx int, spec *convSpec, outShape []int) (bool, error) {
	if !s2dPays(spec) || c.opts.int8 || n.OpType != "Conv" || !w.isFloat() || x.typ != onnx.Float {
		return false, nil
	}
	C, kh, kw := spec.ic, (spec.kh+1)/2, (spec.kw+1)/2
	ph, pw := spec.oh+kh-1, spec.ow+kw-1
	// P[4c+2dy+dx][Y][X] = X[c][2Y+dy−pt][2X+dx−pl]: a 2×2 stride-2
	// convolution with one-hot weights and the stem's own padding before.
	sel := make([]float32, 4*C*C*4)
	for ch := range C {
		for d := range 4 {
			sel[((ch*4+d)*C+ch)*4+d] = 1
		}
	}
	pack := &convSpec{kh: 2, kw: 2, sh: 2, sw: 2, dh: 1, dw: 1, pt: spec.pt, pl: spec.pl,
		ih: spec.ih, iw: spec.iw, oh: ph, ow: pw, ic: C, oc: 4 * C}
	pshape := []int{x.shape[0], 4 * C, ph, pw}
	pn := &onnx.Node{OpType: "Conv", Name: n.Name + "/s2d", Outputs: []string{n.Outputs[0] + "/s2d"}}
	c.uses[pn.Outputs[0]] = 1
	if err := c.gemmNode(gemmParams{n: pn, op: "Conv", x: x, w: constFloat("", []int{4 * C, C, 2, 2}, sel), bias: -1, spec: pack, outShape: pshape, outLay: convLayout(pshape), padded: true}); err != nil {
		return true, err
	}
	p := c.vals[pn.Outputs[0]]
	p.layer.macs = 0
	// W'[o][4c+2dy+dx][y][x] = W[o][c][2y+dy][2x+dx], zero past the kernel.
	wf := w.floats()
	packed := make([]float32, spec.oc*4*C*kh*kw)
	for o := range spec.oc {
		for ch := range C {
			for y := range spec.kh {
				for x := range spec.kw {
					d := (y%2)*2 + x%2
					packed[((o*4*C+ch*4+d)*kh+y/2)*kw+x/2] = wf[((o*C+ch)*spec.kh+y)*spec.kw+x]
				}
			}
		}
	}
	main := *spec
	main.ic, main.kh, main.kw, main.sh, main.sw, main.pt, main.pl, main.ih, main.iw = 4*C, kh, kw, 1, 1, 0, 0, ph, pw
	if err := c.gemmNode(gemmParams{n: n, op: "Conv", x: p, w: constFloat("", []int{spec.oc, 4 * C, kh, kw}, packed), bias: biasIdx, spec: &main, outShape: outShape, outLay: convLayout(outShape), padded: true}); err != nil {
		return true, err
	}
	l := c.layers[len(c.layers)-1]
	l.macs = uint64(outShape[0] * spec.oh * spec.ow * spec.oc * spec.ic * spec.kh * spec.kw)
	return true, nil
}
