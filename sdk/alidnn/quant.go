package alidnn

// QuantizeLinear and DequantizeLinear: their parameters, per tensor or per
// channel, and the engine's (de)quantisation steps; and how a
// post-training-quantised layer settles on int8 or fp32 for its consumer.

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// quantParams reads a (scale, zero point) pair of inputs k, k+1 for a tensor
// laid out as l: per tensor, or per channel along the lane axis.
func (c *compiler) quantParams(n *onnx.Node, k int, l layout, axisAttr bool) (scales []float32, zp []int64, typ onnx.DataType, err error) {
	sv, err := c.needConst(n, k, "scale")
	if err != nil {
		return nil, nil, 0, err
	}
	typ = onnx.Uint8
	zv, err := c.in(n, k+1)
	if err != nil {
		return nil, nil, 0, err
	}
	if zv != nil && !zv.isConst {
		return nil, nil, 0, fmt.Errorf("zero point %q must be a constant: %w", zv.name, ErrUnsupported)
	}
	s := sv.floats()
	var z []int64
	if zv != nil {
		typ = zv.typ
		z = zv.ints()
	} else {
		z = make([]int64, len(s))
	}
	if len(s) != len(z) {
		return nil, nil, 0, fmt.Errorf("%d scales and %d zero points", len(s), len(z))
	}
	if len(s) > 1 {
		axis := int64(1)
		if axisAttr {
			if axis, err = n.Int("axis", 1); err != nil {
				return nil, nil, 0, err
			}
		}
		a, err := normAxis(int(axis), len(l.shape))
		if err != nil {
			return nil, nil, 0, err
		}
		if a != l.lane || len(s) != l.c() {
			return nil, nil, 0, fmt.Errorf("per-axis quantisation along axis %d: %w", a, ErrUnsupported)
		}
		return s, z, typ, nil
	}
	return fill(max(l.c(), 1), s[0]), fillI(max(l.c(), 1), z[0]), typ, nil
}

func fillI(n int, v int64) []int64 {
	out := make([]int64, n)
	for k := range out {
		out[k] = v
	}
	return out
}

// devZP converts a logical zero point to the device's int8 domain.
func devZP(z int64, typ onnx.DataType) int32 {
	if typ == onnx.Uint8 {
		return int32(z - 128)
	}
	return int32(z)
}

// deviceZP is a zero point of an int8, uint8 or int32 tensor in the
// device's domain.
func deviceZP(z int64, typ onnx.DataType) int64 {
	if typ == onnx.Int32 {
		return z
	}
	return int64(devZP(z, typ))
}

func uniformZP(z []int64) (int64, bool) {
	for _, v := range z {
		if v != z[0] {
			return 0, false
		}
	}
	return z[0], true
}

func (c *compiler) quantizeNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	if block, err := n.Int("block_size", 0); err != nil {
		return err
	} else if block > 0 {
		return c.blockedQuantize(n, x, int(block))
	}
	sv, err := c.need(n, 1)
	if err != nil {
		return err
	}
	zv, err := c.in(n, 2)
	if err != nil {
		return err
	}
	if !sv.isConst || zv != nil && !zv.isConst {
		return c.quantizeComputed(n, x, sv, zv)
	}
	if err := c.materialize(x); err != nil {
		return err
	}
	if typ := c.quantizedType(n); typ != onnx.Uint8 && typ != onnx.Int8 && n.Attr("block_size") == nil {
		return c.hostQuantize(n, x, typ)
	}
	s, z, typ, err := c.quantParams(n, 1, x.root().lay, true)
	if err != nil {
		return err
	}
	if typ != onnx.Uint8 && typ != onnx.Int8 {
		return fmt.Errorf("QuantizeLinear to %v: %w", typ, ErrUnsupported)
	}
	z0, ok := uniformZP(z)
	if !ok {
		v, err := c.quantizePerChannelZP(x, s, z, typ)
		if err != nil {
			return err
		}
		c.set(n, 0, v)
		return nil
	}
	l, err := c.open(x)
	if err != nil {
		return err
	}
	if !l.accFP {
		return fmt.Errorf("QuantizeLinear of a non-float tensor %s: %w", x, ErrUnsupported)
	}
	c.set(n, 0, c.quantizeStep(l, s, devZP(z0, typ), typ))
	return nil
}

// quantizeStep ends the open fp32 layer l with the quantisation to int8 at
// the per-lane scales s and device zero point zp, and returns its output of
// logical type typ.
func (c *compiler) quantizeStep(l *layer, s []float32, zp int32, typ onnx.DataType) *value {
	l.steps = append(l.steps, step{kind: sQuantize, fp: true, rowF: s, zp: zp})
	l.accFP, l.acc8 = false, true
	v := c.rename(l, typ)
	v.q = quant{scale: s[0], zp: zp}
	return v
}

func (c *compiler) dequantizeNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	if x.gather != nil && x.gather.dq == n {
		// Rows of a table dequantised already (see dequantisedTable).
		c.set(n, 0, &value{shape: x.shape, typ: onnx.Float, derived: derived{alias: x}})
		return nil
	}
	if block, err := n.Int("block_size", 0); err != nil {
		return err
	} else if block > 0 {
		return c.blockedDequantize(n, x, int(block))
	}
	if x.input && x.lay.shape == nil {
		x.lay = convLayout(x.shape)
	}
	l, err := c.open(x)
	if err != nil {
		return err
	}
	if l.accFP && (stagedFloat(x) || hostInt(x) && x.typ != onnx.Int64 && x.typ != onnx.Bool) {
		return c.dequantizeStaged(n, l)
	}
	if l.accFP {
		return fmt.Errorf("DequantizeLinear of a float tensor: %w", ErrUnsupported)
	}
	s, z, typ, err := c.quantParams(n, 1, l.out.lay, true)
	if err != nil {
		return err
	}
	if x.typ == onnx.Int32 {
		typ = onnx.Int32
	}
	zp := int32(0)
	if z0, ok := uniformZP(z); !ok {
		// One zero point per channel (lane): subtracted exactly in the
		// integer accumulator, the step's own zero point then 0.
		corr := make([]int64, len(z))
		for k, v := range z {
			corr[k] = -deviceZP(v, typ)
		}
		l.steps = append(l.steps, step{kind: sAddRow, rowI: corr})
	} else if typ != onnx.Int32 {
		zp = devZP(z0, typ)
	} else if z0 < -1<<15 || z0 >= 1<<15 {
		return fmt.Errorf("int32 zero point %d: %w", z0, ErrUnsupported)
	} else {
		zp = int32(z0)
	}
	l.steps = append(l.steps, step{kind: sDequantize, rowF: s, zp: zp})
	l.accFP, l.acc8 = true, false
	c.set(n, 0, c.rename(l, onnx.Float))
	return nil
}

// requant appends the int32 → int8 step for an output of scale sy.
func (c *compiler) requant(l *layer, sy float32, zy int32) {
	m := make([]int64, len(l.accScale))
	s := make([]int64, len(l.accScale))
	for o, a := range l.accScale {
		m[o], s[o] = fixedPoint(float64(a) / float64(sy))
	}
	l.steps = append(l.steps, step{kind: sRequant, rowI: m, shift: s, zp: zy})
	l.acc8 = true
}

// fixedPoint writes a real multiplier as M·2^−(31+S), M a Q31 integer in
// [2^30, 2^31), clamping S to the engine's range.
func fixedPoint(r float64) (int64, int64) {
	if r <= 0 {
		return 0, 0
	}
	f, e := math.Frexp(r) // r = f·2^e, f in [0.5, 1)
	m := int64(math.Round(f * (1 << 31)))
	if m == 1<<31 {
		m /= 2
		e++
	}
	s := int64(-e)
	for 31+s > 62 {
		m /= 2
		s--
	}
	for 31+s < 1 {
		s++ // saturates: multipliers ≥ 2^30 are out of range anyway
	}
	return m, s
}

// settle decides what an unsettled post-training-quantised layer outputs,
// when its output is first used by something other than a fused step: int8
// at the calibrated scale for consumers that take int8, fp32 otherwise.
func (c *compiler) settle(v *value, int8OK bool) error {
	l := v.root().layer
	if l == nil || !l.ptq {
		return nil
	}
	l.ptq = false
	if int8OK {
		r, ok := c.opts.ranges[l.out.name]
		if !ok || r <= 0 {
			r = 1
		}
		sy := r / 127
		c.requant(l, sy, 0)
		l.out.q = quant{scale: sy}
		return nil
	}
	l.steps = append(l.steps, step{kind: sDequantize, rowF: l.accScale})
	l.accFP = true
	return nil
}

// quantizeTo brings an fp32 tensor to int8 at its calibrated scale, for a
// post-training-quantised consumer.
func (c *compiler) quantizeTo(x *value) (*value, error) {
	r, ok := c.opts.ranges[x.name]
	if x.isConst {
		// A constant in the constant segment (a Concat's) needs no
		// calibration; any scale holds zeros.
		r, ok = 1, true
		if m := maxAbs(x.f); m > 0 {
			r = m
		}
	}
	if !ok || r <= 0 {
		return nil, fmt.Errorf("no calibrated range for %s", x)
	}
	s := r / 127
	if l := x.layer; l != nil && l.out == x && l.accFP && !l.ptq && l.takesSteps() && c.int8Readers(x.name) {
		// Every reader takes int8: the layer writing x quantises in its
		// epilogue rather than a layer reading x back to do it.
		v := c.quantizeStep(l, fill(x.lay.c(), s), 0, onnx.Int8)
		v.name, v.uses = x.name, x.uses
		c.vals[x.name] = v
		return v, nil
	}
	l := &layer{kind: lMove, in: x, accFP: true}
	l.steps = []step{{kind: sQuantize, fp: true, rowF: fill(x.lay.c(), s)}}
	l.acc8 = true
	out := &value{name: x.name + "/quantized", shape: x.shape, typ: onnx.Int8, uses: 1, q: quant{scale: s}, device: device{lay: x.lay, layer: l}}
	l.out = out
	c.layers = append(c.layers, l)
	return out, nil
}

func maxAbs(f []float32) float32 {
	var m float32
	for _, v := range f {
		m = max(m, float32(math.Abs(float64(v))))
	}
	return m
}
