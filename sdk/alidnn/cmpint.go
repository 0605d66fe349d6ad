package alidnn

// Equal of INT32 tensors, and of UINT32 inputs staged as their int32 bit
// patterns (see intpath.go), exact for every value: fp32 holds integers
// only up to 2²⁴, so the difference is taken in wrapping int32 first,
// zero exactly when the 32 bits agree.

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// equalInt32 compiles Equal of INT32 a and b, one at least computed, b of
// a's shape (a graph input broadcast to it) or a constant scalar: d = a + (−b) in wrapping int32 (0
// exactly when a = b), converted to fp32 (nonzero stays nonzero), then
// the ALU's eq with 0. The result is 0 and 1 in fp32, which compareNode
// types BOOL.
func (c *compiler) equalInt32(n *onnx.Node, a, b *value) error {
	if a.isConst {
		a, b = b, a
	}
	shape, err := broadcastShape(a.shape, b.shape)
	if err != nil {
		return err
	}
	switch {
	case b.isConst && b.len() != 1:
		return fmt.Errorf("Equal of INT32 %s with the constant %s: only with a scalar: %w", a, b, ErrUnsupported)
	case !eqInts(a.shape, shape):
		return fmt.Errorf("Equal of INT32 %s and %s: %s broadcasts: %w", a, b, a, ErrUnsupported)
	case !b.isConst && !eqInts(b.shape, shape):
		if !b.input || b.lay.shape != nil {
			return fmt.Errorf("Equal of INT32 %s and %s: only a graph input broadcasts: %w", a, b, ErrUnsupported)
		}
		// The runtime packs it broadcast, as Add's operands (see
		// tensorOperands).
		b.bcast, b.shape = b.shape, shape
	}
	if err := c.materialize(a); err != nil {
		return err
	}
	var negB *value
	if !b.isConst {
		if err := c.materialize(b); err != nil {
			return err
		}
		lb, err := c.open(b)
		if err != nil {
			return err
		}
		if lb.accFP || lb.acc8 {
			return fmt.Errorf("Equal of INT32 %s: accumulator not int32: %w", b, ErrUnsupported)
		}
		lb.steps = append(lb.steps, step{kind: sMulRow, rowI: fillI(max(lb.out.lay.c(), 1), -1)})
		negB = c.rename(lb, onnx.Int32)
		negB.uses = 1
	}
	var l *layer
	if negB != nil {
		l, err = c.openAfter(a, negB)
	} else {
		l, err = c.open(a)
	}
	if err != nil {
		return err
	}
	if l.accFP || l.acc8 {
		return fmt.Errorf("Equal of INT32 %s: accumulator not int32: %w", a, ErrUnsupported)
	}
	C := max(l.out.lay.c(), 1)
	if negB == nil {
		// −k wraps for k = −2³¹ (and a UINT32 k ≥ 2³¹), as the difference does.
		l.steps = append(l.steps, step{kind: sAddRow, rowI: fillI(C, castInt(-b.ints()[0], onnx.Int32))})
	} else {
		r := negB.root()
		if !r.lay.equal(l.out.lay) && !sameStorage(r.lay, l.out.lay) {
			return fmt.Errorf("Equal: operands %s and %s are laid out differently on the device: %w", a, b, ErrUnsupported)
		}
		l.steps = append(l.steps, step{kind: sAddTensor, t: r})
	}
	l.steps = append(l.steps, step{kind: sDequantize, rowF: fill(C, 1)}, step{kind: sEqRow, fp: true, rowF: fill(C, 0)})
	l.accFP, l.acc8 = true, false
	c.set(n, 0, c.rename(l, onnx.Float))
	return nil
}
