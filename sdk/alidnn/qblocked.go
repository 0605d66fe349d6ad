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
	sv, err := c.needConst(n, 1, "scale")
	if err != nil {
		return err
	}
	axis, err := n.Int("axis", 1)
	if err != nil {
		return err
	}
	a, err := normAxis(int(axis), len(x.shape))
	if err != nil {
		return fmt.Errorf("DequantizeLinear of %s: %w", x, err)
	}
	if len(sv.shape) != len(x.shape) {
		return fmt.Errorf("DequantizeLinear of %s: blocked scales of rank %d: %w", x, len(sv.shape), ErrUnsupported)
	}
	for k, d := range x.shape {
		if k == a {
			d = (d + block - 1) / block
		}
		if sv.shape[k] != d {
			return fmt.Errorf("DequantizeLinear of %s: scales %v for blocks of %d along axis %d: %w", x, sv.shape, block, a, ErrUnsupported)
		}
	}
	zp := make([]float32, len(sv.floats()))
	zt := onnx.Int8
	if len(n.Inputs) > 2 && n.Inputs[2] != "" {
		zv, err := c.needConst(n, 2, "zero point")
		if err != nil {
			return err
		}
		if len(zv.shape) != len(sv.shape) || zv.len() != sv.len() {
			return fmt.Errorf("DequantizeLinear of %s: zero points %v for scales %v: %w", x, zv.shape, sv.shape, ErrUnsupported)
		}
		zp, zt = zv.floats(), zv.typ
	}
	p := n.Outputs[0] + "/blocked/"
	c.vals[p+"one"] = constFloat(p+"one", nil, []float32{1})
	c.vals[p+"zero"] = constInt(p+"zero", zt, nil, []int64{0})
	c.vals[p+"zp"] = constFloat(p+"zp", x.shape, perBlock(x.shape, a, block, zp))
	c.vals[p+"scale"] = constFloat(p+"scale", x.shape, perBlock(x.shape, a, block, sv.floats()))
	seq := []*onnx.Node{
		{OpType: "DequantizeLinear", Inputs: []string{n.Inputs[0], p + "one", p + "zero"}, Outputs: []string{p + "q"}},
		{OpType: "Sub", Inputs: []string{p + "q", p + "zp"}, Outputs: []string{p + "d"}},
		{OpType: "Mul", Inputs: []string{p + "d", p + "scale"}, Outputs: n.Outputs[:1]},
	}
	return c.runSeq(n, seq, map[string]int{p + "q": 1, p + "d": 1})
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
