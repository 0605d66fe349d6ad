package alidnn

// The GEMM layer every convolution and matrix product becomes: its weights,
// quantisation and bias.

import (
	"fmt"
	"math"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// gemmParams are what a GEMM layer computes: node n's operator op (the
// compiler's own layers say "Conv") of input x by weights w, with the bias
// of n's input bias (−1: none), into an output of outShape laid out as
// outLay.
type gemmParams struct {
	n        *onnx.Node
	op       string
	x, w     *value
	bias     int
	spec     *convSpec
	outShape []int
	outLay   layout
	// padded says the input is padded, so an input zero point is
	// corrected per pixel rather than folded into the bias.
	padded bool
}

// gemmNode makes the GEMM layer of a convolution or matrix product: fp32,
// natively quantised (the *Integer and QLinear* operators), or quantised
// after training (fp32 operators in int8 mode).
func (c *compiler) gemmNode(g gemmParams) error {
	spec := g.spec
	inLay := convLayout(g.x.shape)
	if len(g.x.shape) != 4 {
		inLay = matLayout(g.x.shape)
	}
	if err := c.settle(g.x, !c.keepFP32); err != nil {
		return err
	}
	x, err := c.deviceInput(g.x, inLay)
	if err != nil {
		return err
	}
	if spec.ih*spec.iw != x.lay.s() || spec.ic != x.lay.c() {
		return fmt.Errorf("input %s laid out as %d rows of %d channels, want %d×%d of %d: %w", x, x.lay.s(), x.lay.c(), spec.ih, spec.iw, spec.ic, ErrUnsupported)
	}
	g.x = x
	l := &layer{kind: lGemm, in: x, conv: spec}
	out := &value{shape: g.outShape, typ: onnx.Float, device: device{lay: g.outLay, layer: l}}
	l.out = out
	l.macs = uint64(g.outLay.o() * spec.oh * spec.ow * spec.oc * spec.perOC())
	switch {
	case c.opts.calibrating && x.el() == f32 && (g.op == "ConvInteger" || g.op == "MatMulInteger"):
		if err := c.calibrationGemm(&g, l); err != nil {
			return err
		}
	case g.op == "ConvInteger" || g.op == "QLinearConv" || g.op == "MatMulInteger" || g.op == "QLinearMatMul":
		return c.integerGemm(&g, l)
	case c.opts.int8 && !c.keepFP32:
		if err := c.quantizeGemm(&g, l); err != nil {
			return err
		}
	default:
		if x.el() != f32 {
			return fmt.Errorf("%s input %s is %v on the device, want fp32: %w", g.op, x, x.el(), ErrUnsupported)
		}
		spec.fp = true
		// A copy: a following BatchNormalization folds into it in place,
		// and another Conv may read the same initializer.
		spec.wF = slices.Clone(g.w.floats())
		l.accFP = true
	}
	c.layers = append(c.layers, l)
	c.set(g.n, 0, out)
	return c.floatBias(&g, l, out)
}

// perOC is how many weights one output channel has.
func (cv *convSpec) perOC() int { return cv.icg() * cv.kh * cv.kw }

// floatBias adds the node's bias, if it has one, to an fp32 or
// post-training-quantised layer whose output was out.
func (c *compiler) floatBias(g *gemmParams, l *layer, out *value) error {
	if g.bias < 0 {
		return nil
	}
	bv, err := c.in(g.n, g.bias)
	if err != nil || bv == nil {
		return err
	}
	if !bv.isConst || bv.len() != g.spec.oc {
		return fmt.Errorf("bias must be a constant of %d values: %w", g.spec.oc, ErrUnsupported)
	}
	if err := c.rowStep(l, sAddRow, bv.floats()); err != nil {
		return err
	}
	c.set(g.n, 0, c.rename(l, out.typ))
	return nil
}

// quantizeGemm quantises a layer after training: int8 input at its
// calibrated scale, weights per output channel, accumulator settled by the
// consumer.
func (c *compiler) quantizeGemm(g *gemmParams, l *layer) error {
	spec, x := g.spec, g.x
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
	perOC := spec.perOC()
	wf := g.w.floats()
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
	return nil
}

// integerGemm makes the layer of a natively quantised operator. The device
// computes Σ (x − zx)(w − zw) exactly: w − zw is split into int8 parts when
// it needs more bits (see convSpec.wI); zx is folded or corrected (see
// convSpec.zx).
func (c *compiler) integerGemm(g *gemmParams, l *layer) error {
	spec, x, out := g.spec, g.x, l.out
	if x.el() != i8 {
		return fmt.Errorf("%s input %s is %v on the device, want int8: %w", g.op, x, x.el(), ErrUnsupported)
	}
	sx, zx, sw, zw, err := c.integerQuantParams(g)
	if err != nil {
		return err
	}
	perOC := spec.perOC()
	wi := g.w.ints()
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
		subtractInputZeroPoint(g, l, zx)
	}
	if g.op == "ConvInteger" || g.op == "MatMulInteger" {
		out.typ = onnx.Int32
		c.set(g.n, 0, out)
		return nil
	}
	return c.requantizeOutput(g, l)
}

// integerQuantParams are the input's scale and device zero point and the
// weights' scales and zero points per output channel of an integer
// operator: a QLinear operator's inputs, or an Integer operator's zero
// points at scale 1.
func (c *compiler) integerQuantParams(g *gemmParams) (sx float32, zx int64, sw []float32, zw []int64, err error) {
	n, spec := g.n, g.spec
	if g.op == "QLinearConv" || g.op == "QLinearMatMul" {
		s, z, typ, err := c.quantParams(n, 1, g.x.lay, false)
		if err != nil {
			return 0, 0, nil, nil, fmt.Errorf("x: %w", err)
		}
		sx, zx = s[0], int64(devZP(z[0], typ))
		if sw, zw, _, err = c.quantParams(n, 4, layout{shape: []int{spec.oc}, lane: 0}, false); err != nil {
			return 0, 0, nil, nil, fmt.Errorf("w: %w", err)
		}
		return sx, zx, sw, zw, nil
	}
	if zv, err := c.in(n, 2); err != nil {
		return 0, 0, nil, nil, err
	} else if zv != nil {
		if !zv.isConst || len(zv.ints()) != 1 {
			return 0, 0, nil, nil, fmt.Errorf("input zero point must be a per-tensor constant: %w", ErrUnsupported)
		}
		zx = int64(devZP(zv.ints()[0], zv.typ))
	}
	zw = make([]int64, spec.oc)
	if zv, err := c.in(n, 3); err != nil {
		return 0, 0, nil, nil, err
	} else if zv != nil {
		if !zv.isConst {
			return 0, 0, nil, nil, fmt.Errorf("weight zero point must be a constant: %w", ErrUnsupported)
		}
		z := zv.ints()
		for o := range zw {
			zw[o] = z[min(o, len(z)-1)]
		}
	}
	return 1, zx, fill(spec.oc, 1), zw, nil
}

// subtractInputZeroPoint subtracts zx × Σw: per pixel on the device when
// the input is padded (padding is zx, not 0) or the weights are batched
// (one matrix per stack, so Σw differs between stacks: the per-pixel
// correction multiplies the ones image by the stack's own weights), else
// once per output channel as a bias.
func subtractInputZeroPoint(g *gemmParams, l *layer, zx int64) {
	spec := g.spec
	if g.padded || spec.batched {
		spec.zx = int32(zx)
		return
	}
	perOC := spec.perOC()
	corr := make([]int64, spec.oc)
	for k, v := range spec.wI {
		corr[(k/perOC)%spec.oc] -= zx * v
	}
	l.steps = append(l.steps, step{kind: sAddRow, rowI: corr})
}

// requantizeOutput adds a QLinear operator's integer bias and requantises
// the accumulator to the output's scale and zero point.
func (c *compiler) requantizeOutput(g *gemmParams, l *layer) error {
	n, spec, out := g.n, g.spec, l.out
	if g.bias >= 0 {
		bv, err := c.in(n, g.bias)
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
}
