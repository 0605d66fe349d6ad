package alidnn

// QuantizeLinear to a type the engine has no data path for (INT16, UINT16,
// the 4- and 2-bit types, float8) ending the graph: the host quantises the
// engine's fp32 as it reads the output, as ONNX defines it — x / scale in
// float32, rounded half to even, plus the zero point, saturated to the
// type (for float8, x / scale + zero point converted as Cast converts, the
// saturate attribute applying). That is the read-back conversion of
// boundary.go with the quantisation's arithmetic, which the engine could
// not round the same way (it multiplies by 1/scale). In the middle of the
// graph it is refused. Blocked scales (opset 21's block_size) are the
// same arithmetic with one scale and zero point per block.

import (
	"fmt"
	"math"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

const quantizeOp = "QuantizeLinear"

// HostQuant is a QuantizeLinear the host applies to an output: one scale
// and zero point, or one of each per index of Axis, or, with Block, one
// of each per Block elements along Axis, laid out as the output with Axis
// shortened to its number of blocks (ONNX's blocked scale tensor).
type HostQuant struct {
	Scales, ZeroPoints []float32
	Axis               int
	Block              int  `json:",omitempty"`
	NoSaturate         bool `json:",omitempty"`
}

// quantizedType is the output type of QuantizeLinear n: its zero point's,
// else its output_dtype attribute's, else UINT8.
func (c *compiler) quantizedType(n *onnx.Node) onnx.DataType {
	if zv, _ := c.in(n, 2); zv != nil {
		return zv.typ
	}
	if t, _ := n.Int("output_dtype", 0); t != 0 {
		return onnx.DataType(t)
	}
	return onnx.Uint8
}

// hostQuantize compiles QuantizeLinear n of x to typ as the host's
// conversion of the graph output it must be.
func (c *compiler) hostQuantize(n *onnx.Node, x *value, typ onnx.DataType) error {
	if err := c.hostQuantizable(n, x, typ); err != nil {
		return err
	}
	sv, err := c.needConst(n, 1, "scale")
	if err != nil {
		return err
	}
	q := &HostQuant{Scales: sv.floats(), ZeroPoints: make([]float32, len(sv.floats())), Axis: -1}
	if zv, err := c.in(n, 2); err != nil {
		return err
	} else if zv != nil {
		if !zv.isConst || zv.len() != len(q.Scales) {
			return fmt.Errorf("QuantizeLinear's zero point %s must be a constant of as many values as its scale: %w", zv, ErrUnsupported)
		}
		q.ZeroPoints = zv.floats()
	}
	if len(q.Scales) > 1 {
		axis, err := n.Int("axis", 1)
		if err != nil {
			return err
		}
		a, err := normAxis(int(axis), len(x.shape))
		if err != nil {
			return err
		}
		q.Axis = a
	}
	return c.setHostQuant(n, x, typ, q)
}

// hostQuantizeBlocked compiles QuantizeLinear n of x to typ with blocked
// scales and zero points, which blockedParams has checked against x's
// shape, as the host's conversion of the graph output it must be.
func (c *compiler) hostQuantizeBlocked(n *onnx.Node, x *value, typ onnx.DataType, block int) error {
	if err := c.hostQuantizable(n, x, typ); err != nil {
		return err
	}
	sv, err := c.needConst(n, 1, "scale")
	if err != nil {
		return err
	}
	q := &HostQuant{Scales: sv.floats(), ZeroPoints: make([]float32, sv.len()), Block: block}
	if zv, _ := c.in(n, 2); zv != nil {
		q.ZeroPoints = zv.floats()
	}
	axis, err := n.Int("axis", 1)
	if err != nil {
		return err
	}
	if q.Axis, err = normAxis(int(axis), len(x.shape)); err != nil {
		return err
	}
	return c.setHostQuant(n, x, typ, q)
}

// hostQuantizable says whether QuantizeLinear n of x to typ can be the
// host's: it must end the graph, and read fp32.
func (c *compiler) hostQuantizable(n *onnx.Node, x *value, typ onnx.DataType) error {
	if !c.outputs[n.Outputs[0]] || c.uses[n.Outputs[0]] != 1 {
		return fmt.Errorf("QuantizeLinear to %v in the middle of the graph: the engine quantises to int8 and uint8 only, the host to %v as it reads a graph output: %w", typ, typ, ErrUnsupported)
	}
	if x.typ != onnx.Float {
		return fmt.Errorf("QuantizeLinear of %v %s to %v: %w", x.typ, x, typ, ErrUnsupported)
	}
	return nil
}

// setHostQuant makes n's output the host's quantisation q of x to typ,
// with n's saturate attribute.
func (c *compiler) setHostQuant(n *onnx.Node, x *value, typ onnx.DataType, q *HostQuant) error {
	sat, err := n.Int("saturate", 1)
	if err != nil {
		return err
	}
	q.NoSaturate = sat == 0
	if err := q.check(typ, x.shape); err != nil {
		return fmt.Errorf("QuantizeLinear: %w", err)
	}
	axis := max(q.Axis, 0)
	c.set(n, 0, &value{shape: x.shape, typ: typ, derived: derived{host: &hostOp{op: quantizeOp, src: x, axis: axis, quant: q}}})
	return nil
}

// check validates q for an output of type typ and shape.
func (q *HostQuant) check(typ onnx.DataType, shape []int) error {
	if typ.Bits() == 0 || typ == onnx.Bool || (!typ.IsFloat() && typ.Bits() > 32) {
		return fmt.Errorf("quantised to %v", typ)
	}
	n := len(q.Scales)
	if n == 0 || len(q.ZeroPoints) != n {
		return fmt.Errorf("%d scales and %d zero points", n, len(q.ZeroPoints))
	}
	if q.Block != 0 {
		return q.checkBlocked(shape)
	}
	if q.Axis == -1 && n == 1 {
		return nil
	}
	if q.Axis < 0 || q.Axis >= len(shape) || shape[q.Axis] != n {
		return fmt.Errorf("%d scales along axis %d of %v", n, q.Axis, shape)
	}
	return nil
}

// checkBlocked validates q's blocked scales for an output of shape.
func (q *HostQuant) checkBlocked(shape []int) error {
	if q.Block < 0 || q.Axis < 0 || q.Axis >= len(shape) {
		return fmt.Errorf("blocks of %d along axis %d of %v", q.Block, q.Axis, shape)
	}
	blocks := slices.Clone(shape)
	if d := shape[q.Axis]; d > 0 {
		blocks[q.Axis] = (d-1)/q.Block + 1
	}
	if size(blocks) != len(q.Scales) {
		return fmt.Errorf("%d scales for blocks of %d along axis %d of %v: want %v", len(q.Scales), q.Block, q.Axis, shape, blocks)
	}
	return nil
}

// apply quantises f, an output of shape, to typ.
func (q *HostQuant) apply(name string, typ onnx.DataType, shape []int, f []float32) (*onnx.Tensor, error) {
	if err := q.check(typ, shape); err != nil {
		return nil, err
	}
	inner := 1
	if q.Axis >= 0 {
		for _, d := range shape[q.Axis+1:] {
			inner *= d
		}
	}
	scales, zps := q.Scales, q.ZeroPoints
	if q.Block > 0 {
		// One scale per element: each index is then its own channel.
		scales, zps = perBlock(shape, q.Axis, q.Block, scales), perBlock(shape, q.Axis, q.Block, zps)
	}
	y := make([]float32, len(f))
	iv := make([]int64, len(f))
	lo, hi := intRange(typ)
	for k, x := range f {
		ch := 0
		switch {
		case q.Block > 0:
			ch = k
		case q.Axis >= 0:
			ch = k / inner % shape[q.Axis]
		}
		v := x / scales[ch] // in float32, as ONNX divides
		if typ.IsFloat() {
			y[k] = v + zps[ch]
			continue
		}
		r := math.RoundToEven(float64(v)) + float64(zps[ch])
		if math.IsNaN(r) {
			r = 0
		}
		iv[k] = int64(min(max(r, lo), hi))
	}
	if typ.IsFloat() {
		return onnx.NewFloat(name, typ, dims64(shape), y, !q.NoSaturate)
	}
	return onnx.NewInt(name, typ, dims64(shape), iv)
}

// intRange is the range of integer type t of at most 32 bits.
func intRange(t onnx.DataType) (lo, hi float64) {
	bits := t.Bits()
	if signed(t) {
		return -math.Ldexp(1, bits-1), math.Ldexp(1, bits-1) - 1
	}
	return 0, math.Ldexp(1, bits) - 1
}
