package alidnn

// DynamicQuantizeLinear, as onnxruntime's quantize_dynamic writes it before
// each MatMulInteger: y = saturate(round(x / s) + z) in uint8, with s and z
// computed at run time from x's minimum and maximum, 0 included. The
// engine's quantisation reads its scale and zero point from the program
// (AluQuantize's parameter row, the int8 GEMM's zero-point correction as
// a bias row), so they are fixed at compile time: from x's range measured
// on calibration inputs (Calibrate, Quantize), by ONNX's formula.
//
// The ranges are measured level by level: a run compiled with the ranges
// known so far quantises those inputs and passes the others through
// unquantised, and the ranges measured of the inputs whose every
// DynamicQuantizeLinear upstream was quantised are the ones the quantised
// model computes. One compile and run per level — a transformer layer has
// four (the input, the attention's context, and the two of the MLP) — and
// on the calibration inputs the scales are the ones onnxruntime computes
// (up to the engine's fp32 arithmetic before them). On other inputs,
// values beyond the calibrated range saturate where onnxruntime would
// widen the scale.

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// valueRange is a tensor's calibrated range, 0 included.
type valueRange struct{ lo, hi float32 }

func (s valueRange) absMax() float32 { return max(-s.lo, s.hi) }

// dynamicParams are DynamicQuantizeLinear's scale and uint8 zero point
// for a tensor of range r, in float32 as ONNX's reference computes them:
// s = (max − min)/255 (1/255 for a range of zeros) and z = round(−min/s)
// half to even, saturated to [0, 255].
func dynamicParams(r valueRange) (float32, int64) {
	lo, hi := min(r.lo, 0), max(r.hi, 0)
	d := hi - lo
	if d == 0 {
		d = 1
	}
	s := d / 255
	z := math.RoundToEven(float64(-lo / s))
	return s, int64(min(max(z, 0), 255))
}

// dynamicQuantizeNode compiles DynamicQuantizeLinear as a QuantizeLinear at
// the scale and zero point of its input's calibrated range, both outputs
// constants; while calibrating, one whose range is not known yet as its
// input passed through at scale 1 and zero point 0 (see calibrationGemm).
// Without a calibration it is refused.
func (c *compiler) dynamicQuantizeNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	if x.typ != onnx.Float {
		return fmt.Errorf("DynamicQuantizeLinear of %v: want FLOAT", x.typ)
	}
	if x.isConst {
		c.foldDynamicQuantize(n, x)
		return nil
	}
	r, ok := c.opts.bounds[n.Inputs[0]]
	switch {
	case !ok && c.opts.calibrating:
		if c.passed == nil {
			c.passed = map[string]string{}
		}
		c.passed[n.Inputs[0]] = x.root().name
		c.set(n, 0, &value{shape: x.shape, typ: onnx.Float, derived: derived{alias: x.root(), view: x.view, cols: x.cols}})
		c.setDynamicParams(n, 1, 0)
		return nil
	case c.opts.bounds == nil:
		return fmt.Errorf("DynamicQuantizeLinear of %s takes its scale from the tensor's range at run time, and the engine's quantisation takes it at compile time: compile with calibration inputs (alidnn.Calibrate or Quantize; faas model run and test calibrate on their inputs): %w", x, ErrUnsupported)
	case !ok:
		return fmt.Errorf("DynamicQuantizeLinear of %s: no calibrated range for it: %w", x, ErrUnsupported)
	}
	if r := x.root(); r.input && r.lay.shape == nil && len(r.shape) != 4 {
		// A graph input takes its first consumer's layout: here that of
		// the matrix products (MatMulInteger) the result feeds.
		r.lay = matLayout(r.shape)
	}
	// A post-training-quantised producer (Quantize) dequantises first.
	if err := c.settle(x, false); err != nil {
		return err
	}
	l, err := c.open(x)
	if err != nil {
		return err
	}
	if !l.accFP {
		return fmt.Errorf("DynamicQuantizeLinear of %s: accumulator not fp32: %w", x, ErrUnsupported)
	}
	s, z := dynamicParams(r)
	c.set(n, 0, c.quantizeStep(l, fill(l.out.lay.c(), s), devZP(z, onnx.Uint8), onnx.Uint8))
	c.setDynamicParams(n, s, z)
	return nil
}

// foldDynamicQuantize evaluates DynamicQuantizeLinear of a constant, whose
// range is known.
func (c *compiler) foldDynamicQuantize(n *onnx.Node, x *value) {
	var r valueRange
	f := x.floats()
	for _, v := range f {
		r.lo, r.hi = min(r.lo, v), max(r.hi, v)
	}
	s, z := dynamicParams(r)
	q := make([]int64, len(f))
	for k, v := range f {
		q[k] = min(max(int64(math.RoundToEven(float64(v/s)))+z, 0), 255)
	}
	c.set(n, 0, constInt("", onnx.Uint8, x.shape, q))
	c.setDynamicParams(n, s, z)
}

// setDynamicParams sets DynamicQuantizeLinear's optional scale and zero
// point outputs to constants.
func (c *compiler) setDynamicParams(n *onnx.Node, s float32, z int64) {
	if len(n.Outputs) > 1 && n.Outputs[1] != "" {
		c.set(n, 1, constFloat("", nil, []float32{s}))
	}
	if len(n.Outputs) > 2 && n.Outputs[2] != "" {
		c.set(n, 2, constInt("", onnx.Uint8, nil, []int64{z}))
	}
}

// calibrationGemm compiles, in the calibrating run, an Integer operator
// whose input is a DynamicQuantizeLinear passed through in fp32: an fp32
// GEMM by the weights less their zero points, whose product by the scales
// that follow is the fp32 operator's with the dequantised weights.
func (c *compiler) calibrationGemm(g *gemmParams, l *layer) error {
	_, _, _, zw, err := c.integerQuantParams(g)
	if err != nil {
		return err
	}
	perOC := g.spec.perOC()
	wi := g.w.ints()
	wf := make([]float32, len(wi))
	for k, v := range wi {
		wf[k] = float32(v - zw[(k/perOC)%g.spec.oc])
	}
	g.spec.fp, g.spec.wF = true, wf
	l.accFP = true
	g.bias = -1 // inputs 2 and 3 are zero points
	return nil
}

// dynamicLevels returns the level of each DynamicQuantizeLinear's input in
// g, by name — 0 for one with no other upstream, else one more than the
// highest level upstream — and the number of levels.
func dynamicLevels(g *onnx.Graph) (map[string]int, int) {
	up := map[string]int{} // a value's highest DynamicQuantizeLinear upstream, if any
	levels, depth := map[string]int{}, 0
	for _, n := range g.Nodes {
		u := -1
		for _, in := range n.Inputs {
			if l, ok := up[in]; ok {
				u = max(u, l)
			}
		}
		if n.OpType == "DynamicQuantizeLinear" && len(n.Inputs) > 0 {
			u++
			levels[n.Inputs[0]] = u
			depth = max(depth, u+1)
		}
		if u >= 0 {
			for _, o := range n.Outputs {
				up[o] = u
			}
		}
	}
	return levels, depth
}

// dequantisedTable returns, for Gather n of rows of the integer table data
// by a graph input, the table dequantised and the DequantizeLinear that
// does it, when that is n's only reader with a constant per-tensor scale
// and zero point — as quantize_dynamic writes an embedding (its Gather of
// int8 rows, dequantised for the float operators after it). Dequantising
// element by element commutes with gathering rows, so the runtime gathers
// rows of the float table, each value the float32 (q − z)·s that
// DequantizeLinear computes, and the DequantizeLinear passes them through.
func (c *compiler) dequantisedTable(n *onnx.Node, data *value) ([]float32, *onnx.Node) {
	dq := c.consumer(n.Outputs[0])
	if dq == nil || dq.OpType != "DequantizeLinear" || c.uses[n.Outputs[0]] != 1 || dq.Inputs[0] != n.Outputs[0] {
		return nil, nil
	}
	sv, zv := c.vals[inputName(dq, 1)], c.vals[inputName(dq, 2)]
	if sv == nil || !sv.isConst || sv.len() != 1 || zv != nil && (!zv.isConst || zv.len() != 1 || zv.typ != data.typ) {
		return nil, nil
	}
	s, z := sv.floats()[0], int64(0)
	if zv != nil {
		z = zv.ints()[0]
	}
	q := data.ints()
	table := make([]float32, len(q))
	for k, v := range q {
		table[k] = float32(v-z) * s
	}
	return table, dq
}
