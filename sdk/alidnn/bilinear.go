package alidnn

// Bilinear upsampling by an integer factor s: output q·s + r of an axis
// interpolates inputs q + i0 and q + i0 + 1 of its phase r with the same
// two weights for every q, except that coordinates past the edges clamp
// to the edge pixel. A copy of the input with one replicated pixel on each
// side makes the clamping plain arithmetic, so every phase is a 2×2
// depthwise convolution of the copy (phaseLayers).

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// bilinear compiles Resize in linear mode by the factor s on both image
// axes, for the coordinate transformation coord.
func (c *compiler) bilinear(n *onnx.Node, x *value, s int, coord string) error {
	x, err := c.fp32Input(n, x)
	if err != nil {
		return err
	}
	var phases [2][]phase
	var ws [2][][2]float32
	for a := range 2 {
		in := x.shape[2+a]
		for r := range s {
			var f float64
			switch coord {
			case "half_pixel", "pytorch_half_pixel":
				f = (float64(r)+0.5)/float64(s) - 0.5
			case "asymmetric":
				f = float64(r) / float64(s)
			default:
				return fmt.Errorf("%s: coordinate_transformation_mode %q in linear mode: %w", n.OpType, coord, ErrUnsupported)
			}
			i0 := math.Floor(f)
			w1 := float32(f - i0)
			// Taps read rows q+i0 and q+i0+1 of the input, rows
			// q+i0+1 and q+i0+2 of the padded copy.
			phases[a] = append(phases[a], phase{taps: 2, pad: -int(i0) - 1, out: in})
			ws[a] = append(ws[a], [2]float32{1 - w1, w1})
		}
	}
	p := c.replicatePad(x)
	C := x.shape[1]
	weight := func(o, ci, ty, tx, ry, rx int) float32 { return ws[0][ry][ty] * ws[1][rx][tx] }
	return c.phaseLayers(n, p, C, C, s, phases, weight, nil)
}

// replicatePad returns x [N, C, H, W] with one more pixel on each side,
// a copy of the nearest edge pixel: nine depthwise 1×1 identity layers,
// the interior, four edges and four corners, scattered into place.
func (c *compiler) replicatePad(x *value) *value {
	N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	shape := []int{N, C, H + 2, W + 2}
	p := &value{shape: shape, typ: onnx.Float, device: device{lay: convLayout(shape), elem: f32}}
	// Along an axis of size m: the interior from offset 0, m pixels, to
	// 1; the first pixel to 0; the last (read with padding −(m−1)) to m+1.
	type span struct{ pad, n, at int }
	spans := func(m int) []span { return []span{{0, m, 1}, {0, 1, 0}, {-(m - 1), 1, m + 1}} }
	for _, ys := range spans(H) {
		for _, xs := range spans(W) {
			spec := &convSpec{kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, pt: ys.pad, pl: xs.pad,
				ih: H, iw: W, oh: ys.n, ow: xs.n, ic: C, oc: C, groups: C, fp: true, wF: fill(C, 1),
				scatter: &scatter{step: 1, y0: ys.at, x0: xs.at, w: W + 2}}
			c.layers = append(c.layers, &layer{kind: lGemm, in: x, out: p, conv: spec, accFP: true})
		}
	}
	return p
}
