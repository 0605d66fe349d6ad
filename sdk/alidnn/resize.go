package alidnn

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// resizeNode compiles Resize (and the older Upsample) by an integer factor
// on the image axes, as feature pyramids and segmentation heads use it. In
// nearest mode every output phase copies one input pixel, so the
// upsampling is phaseLayers with a one-tap identity kernel per channel;
// linear mode is bilinear. Other modes and factors are refused.
func (c *compiler) resizeNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	if len(x.shape) != 4 {
		return fmt.Errorf("%s of a rank-%d tensor: only NCHW images: %w", n.OpType, len(x.shape), ErrUnsupported)
	}
	mode, err := n.String("mode", "nearest")
	if err != nil {
		return err
	}
	if mode != "nearest" && mode != "linear" && mode != "bilinear" {
		return fmt.Errorf("%s mode %q (only nearest and linear): %w", n.OpType, mode, ErrUnsupported)
	}
	coord, err := n.String("coordinate_transformation_mode", "half_pixel")
	if err != nil {
		return err
	}
	nearest, err := n.String("nearest_mode", "round_prefer_floor")
	if err != nil {
		return err
	}
	if n.OpType == "Upsample" || c.opset() < 11 {
		coord, nearest = "asymmetric", "floor" // Upsample and Resize-10
	}
	if mode == "linear" || mode == "bilinear" {
		// Resize-11+ reads cubic_coeff_a and exclude_outside only in cubic
		// mode; in linear mode exclude_outside changes nothing.
		mode = "linear"
	}
	out, err := c.resizeShape(n, x.shape)
	if err != nil {
		return err
	}
	if out[0] != x.shape[0] || out[1] != x.shape[1] {
		return fmt.Errorf("%s to %v scales the batch or channels of %v: %w", n.OpType, out, x.shape, ErrUnsupported)
	}
	s := out[2] / x.shape[2]
	if out[2] != s*x.shape[2] || out[3] != s*x.shape[3] || s < 1 {
		return fmt.Errorf("%s of %v to %v: only the same integer factor on both image axes: %w", n.OpType, x.shape, out, ErrUnsupported)
	}
	if mode == "linear" {
		return c.bilinear(n, x, s, coord)
	}
	var phases [2][]phase
	for a := range 2 {
		in := x.shape[2+a]
		for r := range s {
			d, err := nearestOffset(r, s, in, coord, nearest)
			if err != nil {
				return fmt.Errorf("%s: %w", n.OpType, err)
			}
			phases[a] = append(phases[a], phase{taps: 1, pad: -d, out: in})
		}
	}
	C := x.shape[1]
	one := func(o, ci, ty, tx, ry, rx int) float32 { return 1 }
	return c.phaseLayers(n, x, C, C, s, phases, one, nil)
}

// nearestOffset returns the input offset d of output phase r: output
// q·s + r copies input q + d for every q, or an error where edge clamping
// breaks that pattern.
func nearestOffset(r, s, in int, coord, nearest string) (int, error) {
	src := func(y int) (int, error) {
		var f float64
		switch coord {
		case "half_pixel", "pytorch_half_pixel":
			f = (float64(y)+0.5)/float64(s) - 0.5
		case "asymmetric":
			f = float64(y) / float64(s)
		case "tf_half_pixel_for_nn":
			f = (float64(y) + 0.5) / float64(s)
		default:
			return 0, fmt.Errorf("coordinate_transformation_mode %q in nearest mode: %w", coord, ErrUnsupported)
		}
		var i float64
		switch nearest {
		case "round_prefer_floor":
			i = math.Ceil(f - 0.5)
		case "round_prefer_ceil":
			i = math.Floor(f + 0.5)
		case "floor":
			i = math.Floor(f)
		case "ceil":
			i = math.Ceil(f)
		default:
			return 0, fmt.Errorf("nearest_mode %q: %w", nearest, ErrUnsupported)
		}
		return min(max(int(i), 0), in-1), nil
	}
	d0, err := src(r)
	if err != nil {
		return 0, err
	}
	for q := range in {
		v, _ := src(q*s + r)
		if v != q+d0 {
			return 0, fmt.Errorf("output %d copies input %d, not %d (edge clamping breaks the phase pattern): %w", q*s+r, v, q+d0, ErrUnsupported)
		}
	}
	return d0, nil
}

// resizeShape returns Resize's output shape from its sizes or scales input
// (Upsample: its scales input or attribute).
func (c *compiler) resizeShape(n *onnx.Node, in []int) ([]int, error) {
	out := make([]int, len(in))
	if n.OpType == "Resize" && c.opset() >= 11 {
		if sz, err := c.in(n, 3); err != nil {
			return nil, err
		} else if sz != nil {
			if !sz.isConst || len(sz.ints()) != len(in) {
				return nil, fmt.Errorf("sizes (%q) must be a constant of %d values: %w", sz.name, len(in), ErrUnsupported)
			}
			for k, v := range sz.ints() {
				out[k] = int(v)
			}
			return out, nil
		}
	}
	var scales []float32
	idx := 1
	if n.OpType == "Resize" && c.opset() >= 11 {
		idx = 2
	}
	if sv, err := c.in(n, idx); err != nil {
		return nil, err
	} else if sv != nil {
		if !sv.isConst {
			return nil, fmt.Errorf("scales (%q) must be a constant: %w", sv.name, ErrUnsupported)
		}
		scales = sv.floats()
	} else if a, err := n.Floats("scales"); err != nil {
		return nil, err
	} else {
		scales = a
	}
	if len(scales) != len(in) {
		return nil, fmt.Errorf("%d scales for a rank-%d input", len(scales), len(in))
	}
	for k, sc := range scales {
		if !(sc > 0) || sc > 1<<10 {
			return nil, fmt.Errorf("scale %g", sc)
		}
		out[k] = int(math.Floor(float64(in[k]) * float64(sc)))
	}
	return out, nil
}
