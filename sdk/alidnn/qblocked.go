package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// blockedDequantize compiles DequantizeLinear n of x with blocked scales
// (opset 21's block_size): one scale and zero point per block_size
// elements along axis, which vary along rows as well as lanes, so no
// per-lane step holds them. x is dequantised with scale 1 and zero point
// 0 — its integers, exact in fp32 — and then (x − zp)·scale runs as
// element-wise operators by constants of x's shape, each block's value
// repeated over it: ONNX's arithmetic, in fp32.
func (c *compiler) blockedDequantize(n *onnx.Node, x *value, block int) error {
	scale, zp, zt, err := c.blockedParams(n, x, block, onnx.Int8)
	if err != nil {
		return err
	}
	p := n.Outputs[0] + "/blocked/"
	c.vals[p+"one"] = constFloat(p+"one", nil, []float32{1})
	c.vals[p+"zero"] = constInt(p+"zero", zt, nil, []int64{0})
	c.vals[p+"zp"] = constFloat(p+"zp", x.shape, zp)
	c.vals[p+"scale"] = constFloat(p+"scale", x.shape, scale)
	seq := []*onnx.Node{
		{OpType: "DequantizeLinear", Inputs: []string{n.Inputs[0], p + "one", p + "zero"}, Outputs: []string{p + "q"}},
		{OpType: "Sub", Inputs: []string{p + "q", p + "zp"}, Outputs: []string{p + "d"}},
		{OpType: "Mul", Inputs: []string{p + "d", p + "scale"}, Outputs: n.Outputs[:1]},
	}
	return c.runSeq(n, seq, map[string]int{p + "q": 1, p + "d": 1})
}

// blockedParams reads the blocked scales and zero points (of type zt
// when absent) of QuantizeLinear or DequantizeLinear n of x, repeated over
// each block to one value per element of x.
func (c *compiler) blockedParams(n *onnx.Node, x *value, block int, zt onnx.DataType) (scale, zp []float32, typ onnx.DataType, err error) {
	sv, err := c.needConst(n, 1, "scale")
	if err != nil {
		return nil, nil, 0, err
	}
	axis, err := n.Int("axis", 1)
	if err != nil {
		return nil, nil, 0, err
	}
	a, err := normAxis(int(axis), len(x.shape))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("%s of %s: %w", n.OpType, x, err)
	}
	if len(sv.shape) != len(x.shape) {
		return nil, nil, 0, fmt.Errorf("%s of %s: blocked scales of rank %d: %w", n.OpType, x, len(sv.shape), ErrUnsupported)
	}
	for k, d := range x.shape {
		if k == a {
			d = (d + block - 1) / block
		}
		if sv.shape[k] != d {
			return nil, nil, 0, fmt.Errorf("%s of %s: scales %v for blocks of %d along axis %d: %w", n.OpType, x, sv.shape, block, a, ErrUnsupported)
		}
	}
	z := make([]float32, len(sv.floats()))
	if len(n.Inputs) > 2 && n.Inputs[2] != "" {
		zv, err := c.needConst(n, 2, "zero point")
		if err != nil {
			return nil, nil, 0, err
		}
		if len(zv.shape) != len(sv.shape) || zv.len() != sv.len() {
			return nil, nil, 0, fmt.Errorf("%s of %s: zero points %v for scales %v: %w", n.OpType, x, zv.shape, sv.shape, ErrUnsupported)
		}
		z, zt = zv.floats(), zv.typ
	}
	return perBlock(x.shape, a, block, sv.floats()), perBlock(x.shape, a, block, z), zt, nil
}

// blockedQuantize compiles QuantizeLinear n of x with blocked scales and
// zero points: x divided by the scales of x's shape (the ALU's div,
// correctly rounded as ONNX's x / scale is; a multiply by 1/scale would
// not be), rounded half to even (before the zero point: an odd one would
// move a halfway value's even neighbour), the zero points added, and the
// quantisation at scale 1 saturating the integers. The sum is exact below
// 2²⁴, and beyond the type's range both sides saturate.
func (c *compiler) blockedQuantize(n *onnx.Node, x *value, block int) error {
	od, err := n.Int("output_dtype", 0)
	if err != nil {
		return err
	}
	out := onnx.Uint8
	if od != 0 {
		out = onnx.DataType(od)
	}
	scale, zp, zt, err := c.blockedParams(n, x, block, out)
	if err != nil {
		return err
	}
	if od != 0 && zt != out {
		return fmt.Errorf("QuantizeLinear to %v with zero points of %v: %w", out, zt, ErrUnsupported)
	}
	if err := c.materialize(x); err != nil {
		return err
	}
	if zt != onnx.Uint8 && zt != onnx.Int8 {
		// The engine writes int8 and uint8; other types are the host's
		// as it reads a graph output.
		return c.hostQuantizeBlocked(n, x, zt, block)
	}
	if x, err = c.floatOperand(x); err != nil {
		return err
	}
	l, err := c.open(x)
	if err != nil {
		return err
	}
	if !l.accFP {
		return fmt.Errorf("QuantizeLinear of a non-float tensor %s: %w", x, ErrUnsupported)
	}
	for _, st := range []struct {
		kind stepKind
		v    []float32
	}{{sDivTensor, scale}, {sRound, nil}, {sAddTensor, zp}} {
		if st.v == nil {
			l.steps = append(l.steps, step{kind: st.kind, fp: true})
			continue
		}
		t, err := expand(l.out.lay, constFloat("", x.shape, st.v))
		if err != nil {
			return err
		}
		l.steps = append(l.steps, step{kind: st.kind, fp: true, t: t})
	}
	c.set(n, 0, c.quantizeStep(l, fill(max(l.out.lay.c(), 1), 1), devZP(0, zt), zt))
	return nil
}

// perBlock repeats v, one value per block of block elements along axis a
// of a tensor of shape, to one value per element.
func perBlock(shape []int, a, block int, v []float32) []float32 {
	st := rowMajorStrides(shape)
	n := 1
	for _, d := range shape {
		n *= d
	}
	bs := append([]int(nil), shape...)
	bs[a] = (shape[a] + block - 1) / block
	bst := rowMajorStrides(bs)
	out := make([]float32, n)
	for i := range out {
		j := 0
		for k := range shape {
			idx := i / st[k] % shape[k]
			if k == a {
				idx /= block
			}
			j += idx * bst[k]
		}
		out[i] = v[j]
	}
	return out
}
