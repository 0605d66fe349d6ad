package alidnn

// Conv: its window, padding and weights, made into a GEMM layer (see
// gemmnode.go).

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// window is the geometry of a convolution or pooling window along one axis.
type window struct{ k, s, d, pb, pe, out int }

// windows reads kernel_shape, strides, dilations, pads and auto_pad for a
// 2-D window over an h×w image; kernel gives the kernel when the node has no
// kernel_shape attribute (Conv takes it from the weights).
func windows(n *onnx.Node, h, w int, kernel []int) (y, x window, err error) {
	get := func(name string, def []int) ([]int, error) {
		v, err := n.Ints(name)
		if err != nil || v == nil {
			return def, err
		}
		return toInts(v), nil
	}
	ks, err := get("kernel_shape", kernel)
	if err != nil {
		return y, x, err
	}
	if len(ks) != 2 {
		return y, x, fmt.Errorf("kernel_shape %v: only 2-D windows: %w", ks, ErrUnsupported)
	}
	st, err := get("strides", []int{1, 1})
	if err != nil {
		return y, x, err
	}
	dl, err := get("dilations", []int{1, 1})
	if err != nil {
		return y, x, err
	}
	pads, err := get("pads", []int{0, 0, 0, 0})
	if err != nil {
		return y, x, err
	}
	autoPad, err := n.String("auto_pad", "NOTSET")
	if err != nil {
		return y, x, err
	}
	ceil, err := n.Int("ceil_mode", 0)
	if err != nil {
		return y, x, err
	}
	if len(st) != 2 || len(dl) != 2 || len(pads) != 4 {
		return y, x, fmt.Errorf("strides %v, dilations %v, pads %v: want 2, 2 and 4 values", st, dl, pads)
	}
	dims := []int{h, w}
	out := [2]window{}
	for a := 0; a < 2; a++ {
		wd := window{k: ks[a], s: st[a], d: dl[a], pb: pads[a], pe: pads[a+2]}
		if wd.k < 1 || wd.s < 1 || wd.d < 1 || wd.pb < 0 || wd.pe < 0 {
			return y, x, fmt.Errorf("window %+v: kernel, stride and dilation must be positive, pads non-negative", wd)
		}
		span := (wd.k-1)*wd.d + 1
		switch autoPad {
		case "NOTSET", "":
		case "VALID":
			wd.pb, wd.pe = 0, 0
		case "SAME_UPPER", "SAME_LOWER":
			o := (dims[a] + wd.s - 1) / wd.s
			total := max((o-1)*wd.s+span-dims[a], 0)
			wd.pb = total / 2
			if autoPad == "SAME_LOWER" {
				wd.pb = total - total/2
			}
			wd.pe = total - wd.pb
		default:
			return y, x, fmt.Errorf("auto_pad %q", autoPad)
		}
		if dims[a]+wd.pb+wd.pe < span {
			return y, x, fmt.Errorf("window %d wide does not fit the padded input %d", span, dims[a]+wd.pb+wd.pe)
		}
		wd.out = (dims[a]+wd.pb+wd.pe-span)/wd.s + 1
		if ceil != 0 && (dims[a]+wd.pb+wd.pe-span)%wd.s != 0 {
			// One more window, partly past the end padding, unless it
			// would start in that padding.
			if wd.out*wd.s < dims[a]+wd.pb {
				wd.out++
			}
		}
		if wd.out < 1 {
			return y, x, fmt.Errorf("window %d wide does not fit the padded input %d", span, dims[a]+wd.pb+wd.pe)
		}
		out[a] = wd
	}
	return out[0], out[1], nil
}

// deviceInput prepares x as the input of a layer that needs layout want
// of x's shape (used when x is a graph input without one yet, or its
// reshaping to the same rank that nothing else reads: a one-channel NHWC
// image's Transpose to NCHW moves only the unit axis, and the input is then
// packed with its channel, not its rows, on the lanes).
func (c *compiler) deviceInput(x *value, want layout) (*value, error) {
	if _, err := c.device(x); err != nil {
		return nil, err
	}
	r := x.root()
	if r.lay.shape == nil {
		only := r.bcast == nil && r.packed == nil && c.dataReaders(r.name) == 1 && !c.outputs[r.name]
		if r.input && (x == r || len(x.shape) == len(r.shape) && only) {
			r.lay = want
			return r, nil
		}
		if r.input && only {
			r.lay = storedAs(r.shape, want)
			return r, nil
		}
		r.lay = convLayout(r.shape)
	}
	return r, nil
}

// storedAs returns the layout a graph input of shape, read only through a
// view of another shape (a Flatten) laid out as want, is packed by: one
// of its own axes — the view's rows its leading axes, its lanes the last —
// when that stores every value where want does, else want itself (the
// view's lanes hold several of its axes), which the runtime packs by its
// offsets in row-major order, the view's and the input's alike.
func storedAs(shape []int, want layout) layout {
	r := len(shape)
	if r >= 2 {
		rows := layout{shape: shape, lane: r - 1}
		for a := range r - 1 {
			rows.rows = append(rows.rows, a)
		}
		wo := want.offsets()
		for _, l := range []layout{rows, matLayout(shape)} {
			if l.elems() == want.elems() && slices.Equal(l.offsets(), wo) {
				return l
			}
		}
	}
	return want
}

func (c *compiler) convNode(n *onnx.Node) error {
	op := n.OpType
	xi, wi, bi := 0, 1, 2
	if op == "QLinearConv" {
		xi, wi, bi = 0, 3, 8
	}
	x, err := c.need(n, xi)
	if err != nil {
		return err
	}
	wv, err := c.needConst(n, wi, "weights")
	if err != nil {
		return err
	}
	groups, err := n.Int("group", 1)
	if err != nil {
		return err
	}
	// A 1-D convolution is a 2-D one on images one pixel high.
	oneD := len(x.shape) == 3 && len(wv.shape) == 3
	if oneD {
		n = lift1D(n)
	} else if len(x.shape) != 4 || len(wv.shape) != 4 {
		return fmt.Errorf("%s of a rank-%d input with rank-%d weights: only 1-D and 2-D convolutions: %w", op, len(x.shape), len(wv.shape), ErrUnsupported)
	}
	N, C := x.shape[0], x.shape[1]
	H, W := 1, x.shape[len(x.shape)-1]
	kh, kw := 1, wv.shape[len(wv.shape)-1]
	if !oneD {
		H, kh = x.shape[2], wv.shape[2]
	}
	OC := wv.shape[0]
	if groups < 1 || int64(C)%groups != 0 || int64(OC)%groups != 0 {
		return fmt.Errorf("group = %d does not divide %d input and %d output channels", groups, C, OC)
	}
	if wv.shape[1]*int(groups) != C {
		return fmt.Errorf("weights %v for %d input channels in %d groups", wv.shape, C, groups)
	}
	y, xw, err := windows(n, H, W, []int{kh, kw})
	if err != nil {
		return err
	}
	if y.k != kh || xw.k != kw {
		return fmt.Errorf("kernel_shape %dx%d does not match weights %v", y.k, xw.k, wv.shape)
	}
	spec := &convSpec{kh: y.k, kw: xw.k, sh: y.s, sw: xw.s, dh: y.d, dw: xw.d, pt: y.pb, pl: xw.pb,
		ih: H, iw: W, oh: y.out, ow: xw.out, ic: C, oc: OC, groups: int(groups)}
	outShape := []int{N, OC, y.out, xw.out}
	if oneD {
		outShape = []int{N, OC, xw.out}
		x = aliasOf(x.root(), []int{N, C, 1, W}, x.typ)
	}
	padded := y.pb+y.pe+xw.pb+xw.pe > 0
	if ok, err := c.packedStem(n, x, wv, bi, spec, outShape); ok || err != nil {
		return err
	}
	if ok, err := c.spaceToDepthStem(n, x, wv, bi, spec, outShape); ok || err != nil {
		return err
	}
	return c.gemmNode(gemmParams{n: n, op: op, x: x, w: wv, bias: bi, spec: spec, outShape: outShape, outLay: convLayout(outShape), padded: padded})
}
