package alidnn

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// foldQDQ evaluates QuantizeLinear or DequantizeLinear of a constant, per
// tensor or per axis (pre-quantised models store weights as int8 with one
// scale per output channel, axis 0, and biases as int32). A folded
// DequantizeLinear remembers its node, so that a QDQ Conv can take the
// int8 weights (see qdqConv).
func (c *compiler) foldQDQ(n *onnx.Node) (*value, error) {
	x, err := c.need(n, 0)
	if err != nil {
		return nil, err
	}
	sv, err := c.need(n, 1)
	if err != nil {
		return nil, err
	}
	zv, err := c.in(n, 2)
	if err != nil {
		return nil, err
	}
	scales := sv.floats()
	zps := make([]int64, len(scales))
	typ := onnx.Uint8
	if zv != nil {
		zps, typ = zv.ints(), zv.typ
	}
	if len(zps) != len(scales) {
		return nil, fmt.Errorf("%d scales and %d zero points", len(scales), len(zps))
	}
	// param[k] is the scale and zero point index of element k.
	param := func(int) int { return 0 }
	if len(scales) > 1 {
		axis, err := n.Int("axis", 1)
		if err != nil {
			return nil, err
		}
		a, err := normAxis(int(axis), len(x.shape))
		if err != nil {
			return nil, err
		}
		if x.shape[a] != len(scales) {
			return nil, fmt.Errorf("%d scales for axis %d of %v", len(scales), a, x.shape)
		}
		inner := 1
		for _, d := range x.shape[a+1:] {
			inner *= d
		}
		param = func(k int) int { return k / inner % len(scales) }
	}
	if n.OpType == "DequantizeLinear" {
		xi := x.ints()
		r := make([]float32, len(xi))
		for k, v := range xi {
			p := param(k)
			r[k] = float32(v-zps[p]) * scales[p]
		}
		v := constFloat("", x.shape, r)
		v.dq = n
		return v, nil
	}
	lo, hi := int64(0), int64(255)
	if typ == onnx.Int8 {
		lo, hi = -128, 127
	}
	xf := x.floats()
	r := make([]int64, len(xf))
	for k, v := range xf {
		p := param(k)
		q := int64(math.RoundToEven(float64(v/scales[p]))) + zps[p]
		r[k] = min(max(q, lo), hi)
	}
	return constInt("", typ, x.shape, r), nil
}
