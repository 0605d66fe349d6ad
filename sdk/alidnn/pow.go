package alidnn

// Division by computed tensors and powers, on the ALU's div, exp and log.

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// maxPowMul is the largest integer exponent Pow computes by multiplying:
// beyond it the products cost more than they are worth, and e^(p·ln x)
// would be NaN for negative x.
const maxPowMul = 16

// divideInto compiles k / x for a constant k, per channel or scalar, and a
// computed x: x's tile becomes k and is divided by a copy of x.
func (c *compiler) divideInto(n *onnx.Node, k, x *value) error {
	shape, err := broadcastShape(x.shape, k.shape)
	if err != nil {
		return err
	}
	if !eqInts(shape, x.shape) {
		return fmt.Errorf("Div broadcasts the tensor %v to %v: %w", x.shape, shape, ErrUnsupported)
	}
	if x, err = c.floatOperand(x); err != nil {
		return err
	}
	l, err := c.open(x)
	if err != nil {
		return err
	}
	row, ok := perLane(l.out.lay, k.shape, k.floats())
	if !ok {
		return fmt.Errorf("Div of the constant %s, which varies along a tile's rows, by a tensor: %w", k, ErrUnsupported)
	}
	if !l.accFP {
		return fmt.Errorf("Div by the integer tensor %s: %w", x, ErrUnsupported)
	}
	l.steps = append(l.steps, step{kind: sSelf, fp: true, comb: isa.AluDiv, rowF: row})
	c.set(n, 0, c.rename(l, x.typ))
	return nil
}

// powNode compiles Pow of a computed tensor by a scalar constant p: an
// integer p by multiplying x by itself (its reciprocal for p < 0), any
// other p as e^(p·ln x), which is NaN for negative x as numpy's power is.
// Exponents per element are powTensor's, an INT32 x intpow.go's, an INT64
// one widepow.go's.
func (c *compiler) powNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	pv, err := c.need(n, 1)
	if err != nil {
		return err
	}
	switch x.typ {
	case onnx.Int32:
		return c.intPow(n, x, pv) // see intpow.go
	case onnx.Int64:
		return c.widePow(n, x, pv) // see widepow.go
	}
	if !pv.isConst || pv.len() != 1 {
		return c.powTensor(n, x, pv)
	}
	p := float64(pv.floats()[0])
	integer := p == math.Trunc(p)
	if integer && (p == 0 || math.Abs(p) > maxPowMul) {
		return fmt.Errorf("Pow by %v (integer exponents 1..%d and their negatives multiply x by itself): %w", p, maxPowMul, ErrUnsupported)
	}
	if x, err = c.floatOperand(x); err != nil {
		return err
	}
	l, err := c.open(x)
	if err != nil {
		return err
	}
	if !l.accFP {
		return fmt.Errorf("Pow of the integer tensor %s: %w", x, ErrUnsupported)
	}
	if !integer {
		if err := c.opSteps(l, []selfOp{{op: isa.AluLog}, {isa.AluMul, float32(p)}, {op: isa.AluExp}}); err != nil {
			return err
		}
	} else if m := int(math.Abs(p)); m == 2 {
		l.steps = append(l.steps, step{kind: sSquare, fp: true})
	} else if m > 2 {
		l.steps = append(l.steps, step{kind: sSelf, fp: true, comb: isa.AluMul, combs: m - 1})
	}
	if integer && p < 0 {
		l.steps = append(l.steps, step{kind: sSelf, fp: true, comb: isa.AluDiv, rowF: fill(l.out.lay.c(), 1)})
	}
	c.set(n, 0, c.rename(l, x.typ))
	return nil
}
