package alidnn

// A transposed convolution with stride s writes output pixel Y from input
// rows iy with Y = iy·s + ky − pad: the pixels of one phase, Y ≡ r (mod s),
// see only the kernel rows ky ≡ r + pad (mod s), so each of the s² phases
// is an ordinary stride-1 convolution of the input with a flipped sub-kernel,
// whose outputs a scatter STORE places every s-th pixel of the output.
// Nearest-neighbour upsampling by an integer factor is the same with a
// one-tap kernel per phase.

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// phase is one output phase's convolution along one axis: taps input
// offsets, tap t reading input q − pad + t for output q (q counting the
// phase's outputs), and out outputs.
type phase struct{ taps, pad, out int }

// transposedPhase returns phase r of a transposed convolution with kernel
// k, stride s and begin padding pb, writing an output of size total, and
// the kernel index of each tap.
func transposedPhase(r, k, s, pb, total int) (phase, []int) {
	k0 := (r + pb) % s
	var ks []int
	for ky := k0; ky < k; ky += s {
		ks = append(ks, ky)
	}
	p := phase{out: max(0, (total-r+s-1)/s)}
	// Output q of the phase is Y = q·s + r; tap ky reads input
	// iy = (Y + pb − ky)/s = q + (r + pb − ky)/s. Ordered by iy, taps run
	// from the last ky to the first.
	c := (r + pb - k0) / s // iy − q for ky = k0, the largest offset
	p.taps = max(len(ks), 1)
	p.pad = p.taps - 1 - c
	flipped := make([]int, len(ks))
	for j, ky := range ks {
		flipped[len(ks)-1-j] = ky
	}
	return p, flipped
}

// phaseLayers compiles the output of node n ([N, oc, OH, OW]) as s×s
// scattered GEMM layers over x: phases[a][r] is phase r along axis a (0
// rows, 1 columns), and weight(o, c, ty, tx, ry, rx) the weight of tap
// (ty, tx) of phase (ry, rx) from input channel c (of its group) to
// output channel o.
func (c *compiler) phaseLayers(n *onnx.Node, x *value, oc, groups, s int, phases [2][]phase, weight func(o, ci, ty, tx, ry, rx int) float32, bias []float32) error {
	x, err := c.fp32Input(n, x)
	if err != nil {
		return err
	}
	N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	OH, OW := 0, 0
	for _, p := range phases[0] {
		OH += p.out
	}
	for _, p := range phases[1] {
		OW += p.out
	}
	shape := []int{N, oc, OH, OW}
	out := &value{shape: shape, typ: onnx.Float, device: device{lay: convLayout(shape), elem: f32}}
	icg := C / groups
	for ry, py := range phases[0] {
		for rx, px := range phases[1] {
			if py.out == 0 || px.out == 0 {
				continue
			}
			spec := &convSpec{kh: py.taps, kw: px.taps, sh: 1, sw: 1, dh: 1, dw: 1, pt: py.pad, pl: px.pad,
				ih: H, iw: W, oh: py.out, ow: px.out, ic: C, oc: oc, groups: groups, fp: true,
				scatter: &scatter{step: s, y0: ry, x0: rx, w: OW}}
			spec.wF = make([]float32, oc*icg*py.taps*px.taps)
			for o := range oc {
				for ci := range icg {
					for ty := range py.taps {
						for tx := range px.taps {
							spec.wF[((o*icg+ci)*py.taps+ty)*px.taps+tx] = weight(o, ci, ty, tx, ry, rx)
						}
					}
				}
			}
			if py.pad > 15 || px.pad > 15 {
				return fmt.Errorf("%s: phase padding %d, %d beyond the engine's: %w", n.OpType, py.pad, px.pad, ErrUnsupported)
			}
			l := &layer{kind: lGemm, in: x, out: out, conv: spec, accFP: true}
			l.macs = uint64(N * py.out * px.out * oc * icg * py.taps * px.taps)
			if bias != nil {
				l.steps = append(l.steps, step{kind: sAddRow, fp: true, rowF: bias})
			}
			c.layers = append(c.layers, l)
		}
	}
	// Several layers write the output, so none of them may take the
	// operators after it into its epilogue: out has no layer of its own.
	c.set(n, 0, out)
	return nil
}

// convTransposeNode compiles ConvTranspose in fp32.
func (c *compiler) convTransposeNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	wv, err := c.needConst(n, 1, "weights")
	if err != nil {
		return err
	}
	if len(x.shape) != 4 || len(wv.shape) != 4 {
		return fmt.Errorf("ConvTranspose of a rank-%d input with rank-%d weights: only 2-D: %w", len(x.shape), len(wv.shape), ErrUnsupported)
	}
	groups, err := n.Int("group", 1)
	if err != nil {
		return err
	}
	C, H, W := x.shape[1], x.shape[2], x.shape[3]
	if groups < 1 || int64(C)%groups != 0 || wv.shape[0] != C {
		return fmt.Errorf("weights %v for %d input channels in %d groups", wv.shape, C, groups)
	}
	g := int(groups)
	ocg, kh, kw := wv.shape[1], wv.shape[2], wv.shape[3]
	oc := ocg * g
	s, pads, outPad, err := transposeAttrs(n, kh, kw, wv.shape)
	if err != nil {
		return err
	}
	OH := s*(H-1) + outPad[0] + kh - pads[0] - pads[2]
	OW := s*(W-1) + outPad[1] + kw - pads[1] - pads[3]
	if OH < 1 || OW < 1 {
		return fmt.Errorf("ConvTranspose output %dx%d is empty", OH, OW)
	}
	var phases [2][]phase
	var taps [2][][]int
	for r := range s {
		p, k := transposedPhase(r, kh, s, pads[0], OH)
		phases[0], taps[0] = append(phases[0], p), append(taps[0], k)
		p, k = transposedPhase(r, kw, s, pads[1], OW)
		phases[1], taps[1] = append(phases[1], p), append(taps[1], k)
	}
	wf := wv.floats()
	icg := C / g
	weight := func(o, ci, ty, tx, ry, rx int) float32 {
		ky, kx := taps[0][ry], taps[1][rx]
		if ty >= len(ky) || tx >= len(kx) {
			return 0 // a phase no kernel row reaches: only the bias
		}
		grp := o / ocg
		// ONNX weights are [C][oc/groups][kh][kw].
		return wf[(((grp*icg+ci)*ocg+o%ocg)*kh+ky[ty])*kw+kx[tx]]
	}
	var bias []float32
	if b, err := c.in(n, 2); err != nil {
		return err
	} else if b != nil {
		if !b.isConst || b.len() != oc {
			return fmt.Errorf("bias must be a constant of %d values: %w", oc, ErrUnsupported)
		}
		bias = b.floats()
	}
	return c.phaseLayers(n, x, oc, g, s, phases, weight, bias)
}

// transposeAttrs reads and checks ConvTranspose's attributes for a kh×kw
// kernel of weights wshape: its stride, pads and output_padding.
func transposeAttrs(n *onnx.Node, kh, kw int, wshape []int) (int, []int, []int, error) {
	ints := func(name string, def []int) ([]int, error) {
		v, err := n.Ints(name)
		if err != nil || v == nil {
			return def, err
		}
		return toInts(v), nil
	}
	strides, err := ints("strides", []int{1, 1})
	if err != nil {
		return 0, nil, nil, err
	}
	dil, err := ints("dilations", []int{1, 1})
	if err != nil {
		return 0, nil, nil, err
	}
	pads, err := ints("pads", []int{0, 0, 0, 0})
	if err != nil {
		return 0, nil, nil, err
	}
	outPad, err := ints("output_padding", []int{0, 0})
	if err != nil {
		return 0, nil, nil, err
	}
	if ks, err := ints("kernel_shape", []int{kh, kw}); err != nil || len(ks) != 2 || ks[0] != kh || ks[1] != kw {
		if err == nil {
			err = fmt.Errorf("kernel_shape %v does not match weights %v", ks, wshape)
		}
		return 0, nil, nil, err
	}
	if len(strides) != 2 || len(dil) != 2 || len(pads) != 4 || len(outPad) != 2 {
		return 0, nil, nil, fmt.Errorf("strides %v, dilations %v, pads %v, output_padding %v: want 2, 2, 4 and 2 values", strides, dil, pads, outPad)
	}
	if dil[0] != 1 || dil[1] != 1 {
		return 0, nil, nil, fmt.Errorf("ConvTranspose with dilations %v: %w", dil, ErrUnsupported)
	}
	if strides[0] != strides[1] || strides[0] < 1 {
		return 0, nil, nil, fmt.Errorf("ConvTranspose with strides %v (only equal strides): %w", strides, ErrUnsupported)
	}
	for _, a := range []string{"output_shape", "auto_pad"} {
		if at := n.Attr(a); at != nil && !(a == "auto_pad" && (string(at.S) == "NOTSET" || len(at.S) == 0)) {
			return 0, nil, nil, fmt.Errorf("ConvTranspose with %s (give pads and output_padding): %w", a, ErrUnsupported)
		}
	}
	for _, p := range pads {
		if p < 0 {
			return 0, nil, nil, fmt.Errorf("pads %v: must not be negative", pads)
		}
	}
	return strides[0], pads, outPad, nil
}

// fp32Input readies the image x for layers of node n that read it in fp32
// from device memory.
func (c *compiler) fp32Input(n *onnx.Node, x *value) (*value, error) {
	if err := c.settle(x, false); err != nil {
		return nil, err
	}
	x, err := c.deviceInput(x, convLayout(x.root().shape))
	if err != nil {
		return nil, err
	}
	if x.el() != f32 {
		return nil, fmt.Errorf("%s input %s is %v on the device, want fp32: %w", n.OpType, x, x.el(), ErrUnsupported)
	}
	return x, nil
}
