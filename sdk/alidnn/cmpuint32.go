package alidnn

// Less, Greater and their OrEqual forms of UINT32 inputs staged as int32
// bit patterns (see intpath.go), exact for every value. Two values with
// the same top bit differ by less than 2³¹, so their wrapping int32
// difference is the true one, and its fp32 conversion keeps its sign and
// whether it is zero; of two values with different top bits the one with
// it set is the larger. With sa and sb the top bits (lt(fp32(x), 0): the
// conversion keeps the sign too) and m the comparison of the difference,
//
//	a < b  = clamp(m + sb − sa, 0, 1),  m = lt(fp32(a − b), 0)
//	a ≤ b  the same with m = lt(fp32(a − b), ½) (the difference is an integer)
//
// as m + sb − sa is m when the top bits agree, and m − 1 ≤ 0 or m + 1 ≥ 1
// when b's or a's is the one set. Greater and GreaterOrEqual swap the
// operands.

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// orderUint32 compiles the comparison n of the UINT32 inputs a and b.
func (c *compiler) orderUint32(n *onnx.Node, a, b *value) error {
	if !int32Int(a) || !int32Int(b) || !eqInts(a.shape, b.shape) {
		return fmt.Errorf("%s of UINT32 %s and %s: only of two graph inputs of one shape: %w", n.OpType, a, b, ErrUnsupported)
	}
	orEqual := n.OpType == "LessOrEqual" || n.OpType == "GreaterOrEqual"
	if n.OpType == "Greater" || n.OpType == "GreaterOrEqual" {
		a, b = b, a
	}
	for _, x := range []*value{a, b} {
		if err := c.materialize(x); err != nil {
			return err
		}
	}
	y, err := c.ltUint32(a, b, orEqual)
	if err != nil {
		return fmt.Errorf("%s of UINT32 %s and %s: %w", n.OpType, a, b, err)
	}
	c.set(n, 0, y)
	return c.typeBool(n.Outputs[0])
}

// ltUint32 returns a < b (a ≤ b if orEqual) of the int32 tensors a and b,
// read as UINT32 bit patterns, by the rule above: 0 or 1 in fp32, computed
// by a layer of its own that only the caller reads.
func (c *compiler) ltUint32(a, b *value, orEqual bool) (*value, error) {
	// −sa and sb, each a layer of its own.
	nsa, err := c.topBit(a, -1)
	if err != nil {
		return nil, err
	}
	sb, err := c.topBit(b, 1)
	if err != nil {
		return nil, err
	}
	nb, err := c.int32Negate(b)
	if err != nil {
		return nil, err
	}
	l, err := c.moveLayer(a)
	if err != nil {
		return nil, err
	}
	if l.accFP || l.acc8 {
		return nil, fmt.Errorf("accumulator not int32: %w", ErrUnsupported)
	}
	for _, t := range []*value{nb, nsa, sb} {
		if r := t.root(); !r.lay.equal(l.out.lay) && !sameStorage(r.lay, l.out.lay) {
			return nil, fmt.Errorf("operands laid out differently on the device: %w", ErrUnsupported)
		}
	}
	C := max(l.out.lay.c(), 1)
	var k float32
	if orEqual {
		k = 0.5
	}
	l.steps = append(l.steps,
		step{kind: sAddTensor, t: nb.root()},
		step{kind: sDequantize, rowF: fill(C, 1)},
		step{kind: sLtRow, fp: true, rowF: fill(C, k)},
		step{kind: sAddTensor, fp: true, t: sb.root()},
		step{kind: sAddTensor, fp: true, t: nsa.root()},
		step{kind: sMaxRow, fp: true, rowF: fill(C, 0)},
		step{kind: sMinRow, fp: true, rowF: fill(C, 1)})
	l.accFP, l.acc8 = true, false
	y := c.rename(l, onnx.Float)
	y.uses = 1
	return y, nil
}

// topBit returns s times the top bit of the int32 input x (1 where it is
// negative as int32), in fp32, computed by a layer of its own that only
// the caller reads.
func (c *compiler) topBit(x *value, s float32) (*value, error) {
	l, err := c.moveLayer(x)
	if err != nil {
		return nil, err
	}
	if l.accFP || l.acc8 {
		return nil, fmt.Errorf("%s: accumulator not int32: %w", x, ErrUnsupported)
	}
	C := max(l.out.lay.c(), 1)
	l.steps = append(l.steps,
		step{kind: sDequantize, rowF: fill(C, 1)},
		step{kind: sLtRow, fp: true, rowF: fill(C, 0)},
		step{kind: sMulRow, fp: true, rowF: fill(C, s)})
	l.accFP = true
	v := c.rename(l, onnx.Float)
	v.uses = 1
	return v, nil
}
