package alidnn

// Conv, and the GEMM layer every convolution and matrix product becomes:
// its weights, quantisation and bias.

import (
	"fmt"
	"math"
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
// (used when x is a graph input without one yet).
func (c *compiler) deviceInput(x *value, want layout) (*value, error) {
	if _, err := c.device(x); err != nil {
		return nil, err
	}
	r := x.root()
	if r.lay.shape == nil {
		if r.input && x == r {
			r.lay = want
			return r, nil
		}
		r.lay = convLayout(r.shape)
	}
	return r, nil
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
		x = &value{shape: []int{N, C, 1, W}, typ: x.typ, alias: x.root(), q: x.root().q}
	}
	padded := y.pb+y.pe+xw.pb+xw.pe > 0
	if ok, err := c.packedStem(n, x, wv, bi, spec, outShape); ok || err != nil {
		return err
	}
	return c.gemmNode(n, op, x, wv, bi, spec, outShape, convLayout(outShape), padded)
}

// gemmNode makes the GEMM layer of a convolution or matrix product: fp32,
// natively quantised (the *Integer and QLinear* operators), or quantised
// after training (fp32 operators in int8 mode).
func (c *compiler) gemmNode(n *onnx.Node, op string, x, w *value, biasIdx int, spec *convSpec, outShape []int, outLay layout, padded bool) error {
	inLay := convLayout(x.root().shape)
	if len(x.shape) != 4 {
		inLay = matLayout(x.shape)
	}
	if err := c.settle(x, true); err != nil {
		return err
	}
	x, err := c.deviceInput(x, inLay)
	if err != nil {
		return err
	}
	if spec.ih*spec.iw != x.lay.s() || spec.ic != x.lay.c() {
		return fmt.Errorf("input %s laid out as %d rows of %d channels, want %d×%d of %d: %w", x, x.lay.s(), x.lay.c(), spec.ih, spec.iw, spec.ic, ErrUnsupported)
	}
	l := &layer{kind: lGemm, in: x, conv: spec}
	out := &value{shape: outShape, typ: onnx.Float, lay: outLay, layer: l}
	l.out = out
	perOC := spec.icg() * spec.kh * spec.kw
	l.macs = uint64(outLay.o() * spec.oh * spec.ow * spec.oc * perOC)
	quantOp := op == "ConvInteger" || op == "QLinearConv" || op == "MatMulInteger" || op == "QLinearMatMul"
	switch {
	case quantOp:
		if x.el() != i8 {
			return fmt.Errorf("%s input %s is %v on the device, want int8: %w", op, x, x.el(), ErrUnsupported)
		}
		var sx float32
		var zx int64
		var sw []float32
		var zw []int64
		lay := layout{shape: []int{spec.oc}, lane: 0}
		if op == "QLinearConv" || op == "QLinearMatMul" {
			s, z, typ, err := c.quantParams(n, 1, x.lay, false)
			if err != nil {
				return fmt.Errorf("x: %w", err)
			}
			sx, zx = s[0], int64(devZP(z[0], typ))
			if sw, zw, _, err = c.quantParams(n, 4, lay, false); err != nil {
				return fmt.Errorf("w: %w", err)
			}
		} else {
			if zv, err := c.in(n, 2); err != nil {
				return err
			} else if zv != nil {
				if !zv.isConst || len(zv.ints()) != 1 {
					return fmt.Errorf("input zero point must be a per-tensor constant: %w", ErrUnsupported)
				}
				zx = int64(devZP(zv.ints()[0], zv.typ))
			}
			zw = make([]int64, spec.oc)
			if zv, err := c.in(n, 3); err != nil {
				return err
			} else if zv != nil {
				if !zv.isConst {
					return fmt.Errorf("weight zero point must be a constant: %w", ErrUnsupported)
				}
				z := zv.ints()
				for o := range zw {
					zw[o] = z[min(o, len(z)-1)]
				}
			}
			sx, sw = 1, fill(spec.oc, 1)
		}
		// The device computes Σ (x − zx)(w − zw) exactly: w − zw is split
		// into int8 parts when it needs more bits (see convSpec.wI); zx is
		// folded or corrected (see convSpec.zx).
		wi := w.ints()
		spec.wI = make([]int64, len(wi))
		for k, v := range wi {
			o := (k / perOC) % spec.oc
			d := v - zw[o]
			if d < -3*127 || d > 3*127 {
				return fmt.Errorf("weight %d minus its zero point %d is %d, beyond three int8 parts: %w", v, zw[o], d, ErrUnsupported)
			}
			spec.wI[k] = d
		}
		l.accScale = make([]float32, spec.oc)
		for o := range l.accScale {
			l.accScale[o] = sx * sw[o]
		}
		c.layers = append(c.layers, l)
		if zx != 0 {
			if padded {
				spec.zx = int32(zx)
			} else {
				corr := make([]int64, spec.oc)
				for k, v := range spec.wI {
					corr[(k/perOC)%spec.oc] -= zx * v
				}
				if spec.batched {
					return fmt.Errorf("batched %s with an input zero point: %w", op, ErrUnsupported)
				}
				l.steps = append(l.steps, step{kind: sAddRow, rowI: corr})
			}
		}
		if op == "ConvInteger" || op == "MatMulInteger" {
			out.typ = onnx.Int32
			c.set(n, 0, out)
			return nil
		}
		if bi := biasIdx; bi >= 0 {
			bv, err := c.in(n, bi)
			if err != nil {
				return err
			}
			if bv != nil {
				if !bv.isConst || len(bv.ints()) != spec.oc {
					return fmt.Errorf("bias must be a constant of %d values", spec.oc)
				}
				l.steps = append(l.steps, step{kind: sAddRow, rowI: bv.ints()})
			}
		}
		ys, yz, ytyp, err := c.quantParams(n, 6, layout{shape: []int{1}, lane: 0}, false)
		if err != nil {
			return fmt.Errorf("y: %w", err)
		}
		zy := devZP(yz[0], ytyp)
		c.requant(l, ys[0], zy)
		out.typ = ytyp
		out.q = quant{scale: ys[0], zp: zy}
		c.set(n, 0, out)
		return nil
	case c.opts.int8:
		// Post-training quantisation: int8 input at its calibrated scale,
		// weights per output channel, accumulator settled by the consumer.
		if x.el() != i8 {
			q, err := c.quantizeTo(x)
			if err != nil {
				return err
			}
			x = q
			l.in = x
		}
		if x.q.zp != 0 {
			return fmt.Errorf("input %s has zero point %d: %w", x, x.q.zp, ErrUnsupported)
		}
		wf := w.floats()
		sw := make([]float32, spec.oc)
		for k, v := range wf {
			o := (k / perOC) % spec.oc
			sw[o] = max(sw[o], float32(math.Abs(float64(v))))
		}
		for o := range sw {
			if sw[o] == 0 {
				sw[o] = 1
			}
			sw[o] /= 127
		}
		spec.wI = make([]int64, len(wf))
		for k, v := range wf {
			spec.wI[k] = int64(math.Round(float64(v / sw[(k/perOC)%spec.oc])))
		}
		l.accScale = make([]float32, spec.oc)
		for o := range sw {
			l.accScale[o] = x.q.scale * sw[o]
		}
		l.ptq = true
	default:
		if x.el() != f32 {
			return fmt.Errorf("%s input %s is %v on the device, want fp32: %w", op, x, x.el(), ErrUnsupported)
		}
		spec.fp = true
		// A copy: a following BatchNormalization folds into it in place,
		// and another Conv may read the same initializer.
		spec.wF = slices.Clone(w.floats())
		l.accFP = true
	}
	c.layers = append(c.layers, l)
	c.set(n, 0, out)
	if biasIdx >= 0 {
		bv, err := c.in(n, biasIdx)
		if err != nil {
			return err
		}
		if bv != nil {
			if !bv.isConst || bv.len() != spec.oc {
				return fmt.Errorf("bias must be a constant of %d values: %w", spec.oc, ErrUnsupported)
			}
			if err := c.rowStep(l, sAddRow, bv.floats()); err != nil {
				return err
			}
			c.set(n, 0, c.rename(l, out.typ))
		}
	}
	return nil
}
