package alidnn

// A network's first convolution usually sees three channels, so each
// 16-lane GEMM block it runs is mostly padding: ResNet-50's 7×7 stem would
// spend an eighth of the network's array time on zeros. Packing g
// horizontally adjacent pixels into the lanes first (channel c, offset j in
// lane c·g+j) turns a kh×kw kernel into a kh×⌈kw/g⌉ one dilated by g, on
// g times fewer blocks per output pixel.

import "github.com/fpga-faas/faas/sdk/onnx"

// stemPacking reports how many pixels to pack into the lanes for a
// convolution, or 0 when packing would not pay.
func stemPacking(spec *convSpec) int {
	if spec.dw != 1 || spec.kw < 2 || spec.ic > lanes/2 {
		return 0
	}
	g := min(lanes/spec.ic, spec.kw)
	kw := (spec.kw + g - 1) / g
	wp := (spec.ow-1)*spec.sw + (kw-1)*g + 1
	// The packing is a convolution of its own, g blocks for each of the
	// ih×wp pixels it writes; the packed one saves kh·(kw−⌈kw/g⌉) blocks
	// per output pixel and output block.
	ob := (spec.oc + lanes - 1) / lanes
	saved := spec.kh * (spec.kw - kw) * spec.oh * spec.ow * ob
	cost := g * spec.ih * wp
	if saved < 2*cost || wp-spec.iw-spec.pl+g-1 > 15 {
		return 0
	}
	return g
}

// packedStem compiles a convolution of x by the fp32 weights w, with the
// geometry spec, as a packing convolution followed by the packed one, if
// stemPacking finds it pays. It reports whether it did. In int8 models
// both quantise as any GEMM: the packing's one-hot weights are exact in
// int8 and its output has its input's range, so it copies the int8 pixels.
func (c *compiler) packedStem(n *onnx.Node, x, w *value, biasIdx int, spec *convSpec, outShape []int) (bool, error) {
	g := stemPacking(spec)
	if g == 0 || n.OpType != "Conv" || !w.isFloat() || x.typ != onnx.Float {
		return false, nil
	}
	C, kw := spec.ic, (spec.kw+g-1)/g
	wp := (spec.ow-1)*spec.sw + (kw-1)*g + 1
	// P[c·g+j][y][x] = X[c][y][x+j−pl]: a 1×g convolution with one-hot
	// weights, padded left by the stem's own left padding and right by
	// what the packed kernel reaches beyond the image.
	right := max(0, wp-spec.iw-spec.pl+g-1)
	pw := spec.iw + spec.pl + right - g + 1
	sel := make([]float32, C*g*C*g)
	for ch := range C {
		for j := range g {
			sel[((ch*g+j)*C+ch)*g+j] = 1
		}
	}
	pack := &convSpec{kh: 1, kw: g, sh: 1, sw: 1, dh: 1, dw: 1, pl: spec.pl,
		ih: spec.ih, iw: spec.iw, oh: spec.ih, ow: pw, ic: C, oc: C * g}
	pshape := []int{x.shape[0], C * g, spec.ih, pw}
	pn := &onnx.Node{OpType: "Conv", Name: n.Name + "/pack", Outputs: []string{n.Outputs[0] + "/pack"}}
	c.uses[pn.Outputs[0]] = 1
	if err := c.gemmNode(gemmParams{n: pn, op: "Conv", x: x, w: constFloat("", []int{C * g, C, 1, g}, sel), bias: -1, spec: pack, outShape: pshape, outLay: convLayout(pshape), padded: true}); err != nil {
		return true, err
	}
	p := c.vals[pn.Outputs[0]]
	p.layer.macs = 0
	// W'[o][c·g+j][y][q] = W[o][c][y][q·g+j], zero past the kernel.
	wf := w.floats()
	packed := make([]float32, spec.oc*C*g*spec.kh*kw)
	for o := range spec.oc {
		for ch := range C {
			for y := range spec.kh {
				for x := range spec.kw {
					q, j := x/g, x%g
					packed[(((o*C*g+ch*g+j)*spec.kh+y)*kw)+q] = wf[((o*C+ch)*spec.kh+y)*spec.kw+x]
				}
			}
		}
	}
	main := *spec
	main.ic, main.kw, main.dw, main.pl, main.iw = C*g, kw, g, 0, pw
	if err := c.gemmNode(gemmParams{n: n, op: "Conv", x: p, w: constFloat("", []int{spec.oc, C * g, spec.kh, kw}, packed), bias: biasIdx, spec: &main, outShape: outShape, outLay: convLayout(outShape), padded: true}); err != nil {
		return true, err
	}
	l := c.layers[len(c.layers)-1]
	l.macs = uint64(outShape[0] * spec.oh * spec.ow * spec.oc * spec.ic * spec.kh * spec.kw)
	return true, nil
}
