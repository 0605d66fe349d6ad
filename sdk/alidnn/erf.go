package alidnn

// Erf (GELU's, x·½(1 + erf(x/√2))) on the ALU, by Abramowitz and Stegun's
// 7.1.26: erf(a) = 1 − (a₁t + a₂t² + a₃t³ + a₄t⁴ + a₅t⁵)·e^(−a²) with
// t = 1/(1 + p·a), a = |x|, within 1.5e-7 of erf, and erf(−a) = −erf(a).
// Its terms multiply tensors, which a step reads from device memory, so it
// takes four element-wise layers: x's sign, then t and e^(−x²) from x, then
// the polynomial in t.

import (
	"fmt"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// erfP and erfA are 7.1.26's p and a₁..a₅.
const erfP = 0.3275911

var erfA = [5]float32{0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429}

// signScale makes x·signScale, clamped to ±1, x's sign: it saturates for
// every |x| above 2⁻¹⁰⁰, and below erf(|x|) ≈ 1.13·|x| is too small for
// the fraction to matter.
const signScale = 0x1p100

func (c *compiler) erfNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	if x, err = c.floatOperand(x); err != nil {
		return err
	}
	name := n.Outputs[0]
	s, err := c.derive(x, name+"/sign", []step{rowOf1(sMulRow, signScale), rowOf1(sMaxRow, -1), rowOf1(sMinRow, 1)})
	if err != nil {
		return err
	}
	// |x| = x·sign(x) (below 2⁻¹⁰⁰ as small, where t is 1 either way),
	// and x² = x·x: a pass and a load each, where the scratch copies of
	// max(x, −x) and x·x took four and three passes.
	t, err := c.derive(x, name+"/t", []step{
		{kind: sMulTensor, fp: true, t: s}, rowOf1(sMulRow, erfP), rowOf1(sAddRow, 1),
		{kind: sSelf, fp: true, comb: isa.AluDiv, rowF: []float32{1}},
	})
	if err != nil {
		return err
	}
	e, err := c.derive(x, name+"/exp", []step{{kind: sMulTensor, fp: true, t: x}, rowOf1(sMulRow, -1), {kind: sExp, fp: true}})
	if err != nil {
		return err
	}
	// The polynomial's coefficients negated, so that 1 − P·e is one add.
	mulT := step{kind: sMulTensor, fp: true, t: t}
	poly := []step{rowOf1(sMulRow, -erfA[4])}
	for k := 3; k >= 0; k-- {
		poly = append(poly, rowOf1(sAddRow, -erfA[k]), mulT)
	}
	poly = append(poly, step{kind: sMulTensor, fp: true, t: e}, rowOf1(sAddRow, 1), step{kind: sMulTensor, fp: true, t: s})
	y, err := c.derive(t, name, poly)
	if err != nil {
		return err
	}
	c.set(n, 0, y)
	return nil
}

// rowOf1 is a step with one value for every channel; derive widens it.
func rowOf1(kind stepKind, v float32) step { return step{kind: kind, fp: true, rowF: []float32{v}} }

// derive returns the tensor steps compute from x, named name, in a move
// layer of its own (a step may read x's storage as the layer runs); steps'
// one-value rows are widened to x's channels.
func (c *compiler) derive(x *value, name string, steps []step) (*value, error) {
	l, err := c.moveLayer(x)
	if err != nil {
		return nil, err
	}
	if !l.accFP {
		return nil, fmt.Errorf("%s of the integer tensor %s: %w", name, x, ErrUnsupported)
	}
	for _, s := range steps {
		if len(s.rowF) == 1 {
			s.rowF = fill(l.out.lay.c(), s.rowF[0])
		}
		l.steps = append(l.steps, s)
	}
	v := c.rename(l, x.typ)
	v.name, v.uses = name, 1
	return v, nil
}
