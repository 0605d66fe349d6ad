package alidnn

// A Cast of a DOUBLE graph input to a floating-point type narrower than
// fp32 (FLOAT16, BFLOAT16, float8, FLOAT4E2M1) whose result is only a
// graph output. Staging the input as fp32 and rounding that to the type as
// the host reads it back would round twice (a value just past a FLOAT16
// halfway point can round to it in fp32, then to even). Instead the host
// converts the input's own values, once, as it reads the output: the
// input is never staged, and the graph is that conversion.
//
// The conversion goes through fp32 rounded to odd (truncated, its last
// bit set when inexact), which keeps every value the narrow type's
// rounding tells apart: with 24 bits against the narrow types' at most 11
// (p ≥ 2q + 2), rounding the odd fp32 value to the narrow type, to
// nearest even or up (FLOAT8E8M0), gives what rounding the double would.

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// castOp names the host's Cast of a DOUBLE input in a program's bindings.
const castOp = "Cast"

// hostCastOfDouble reports whether n, reading a DOUBLE graph input, is a
// Cast the host does from the input's values: to a narrow float type,
// its result only a graph output. A batched program stacks samples on the
// engine, where this input never goes: it stages the input instead.
func (c *compiler) hostCastOfDouble(n *onnx.Node) bool {
	if n.OpType != "Cast" || len(n.Outputs) != 1 || c.opts.batch > 1 {
		return false
	}
	to, _ := n.Int("to", 0)
	return narrowFloat(onnx.DataType(to)) && c.outputs[n.Outputs[0]] && c.uses[n.Outputs[0]] == 1
}

// hostCast compiles Cast n of the host-only DOUBLE input x to t.
func (c *compiler) hostCast(n *onnx.Node, x *value, t onnx.DataType) error {
	if x.root() != x || !c.hostCastOfDouble(n) {
		return fmt.Errorf("Cast of the DOUBLE input %s to %v: %w", x, t, ErrUnsupported)
	}
	noSat, mode, err := hostCastAttrs(n, t)
	if err != nil {
		return err
	}
	v := &value{shape: x.shape, typ: t, derived: derived{host: &hostOp{op: castOp, src: x}}}
	v.noSaturate, v.roundMode = noSat, mode
	c.set(n, 0, v)
	return nil
}

// hostCastOutput converts the run's DOUBLE input b.Src names to b's type.
func hostCastOutput(b Binding, host map[string]*onnx.Tensor) (*onnx.Tensor, error) {
	t := host[b.Src.Name]
	if t == nil || t.DataType != onnx.Double {
		return nil, fmt.Errorf("%w: DOUBLE input %q missing", ErrInput, b.Src.Name)
	}
	d, err := t.Float64s()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	if len(d) != size(b.Shape) {
		return nil, fmt.Errorf("%w: input %q has %d values, want %v", ErrInput, b.Src.Name, len(d), b.Shape)
	}
	f := make([]float32, len(d))
	for k, x := range d {
		f[k] = roundToOdd32(x)
	}
	return typedTensor(b.Name, b.Type, dims64(b.Shape), f, !b.NoSaturate, b.RoundMode)
}

// roundToOdd32 is x in fp32 rounded to odd: x if fp32 holds it, else the
// fp32 value of x truncated toward zero with its last bit set. Beyond
// fp32's range that is its largest finite value, still beyond the narrow
// types'; NaN and infinities stay.
func roundToOdd32(x float64) float32 {
	f := float32(x)
	if float64(f) == x || math.IsNaN(x) || math.IsInf(x, 0) {
		return f
	}
	if math.Abs(float64(f)) > math.Abs(x) {
		f = math.Nextafter32(f, 0) // truncated: f was rounded away from zero
	}
	return math.Float32frombits(math.Float32bits(f) | 1)
}
