package alidnn

// Div of two INT32, or two UINT32, graph inputs staged as int32 lanes (see
// intpath.go), exact for every pair: ONNX's quotient truncated toward
// zero, −2³¹ / −1 wrapping to −2³¹, anything for a zero divisor. The
// engine has no integer division and fp32 holds integers only up to 2²⁴,
// so the quotient is an fp32 estimate corrected twice by exact residuals:
//
//  1. q₁ = round(q), q = fp32(a) / fp32(b). Each of the three roundings
//     (four for a UINT32 dividend, whose fp32 takes two) is relative, at
//     most u = 2⁻²⁴, so |a/b − q₁| ≤ ½ + 4.01u·|a/b| and R = a − q₁·b has
//     |R| ≤ |b|/2 + 4.01u·2³² < |b|/2 + 1030 < 2³¹ for |b| ≤ 2³¹: the
//     wrapping int32 R is the true one. q₁ reaches 2³², beyond the
//     1.5·2²³ trick that reads an fp32 integer's bits as int32 (exact
//     below 2²²), so it is built from exact pieces: h = round(q/2¹⁶),
//     |h| ≤ 2¹⁶, and l = round(2¹⁶·(q/2¹⁶ − h)), |l| ≤ 2¹⁵, where the
//     difference is exact (h is within ½ of q/2¹⁶ and on its grid, or
//     Sterbenz's lemma holds); q₁ = h·2¹⁶ + l in wrapping int32.
//  2. q₂ = round(fp32(R) / fp32(b)): |R/b| ≤ ½ + 1030/|b| ≤ 1031, so q₂
//     is off R/b by at most ½ + 1031·3.01u < ½ + 2⁻¹², and R₂ = R − q₂·b
//     has |R₂| < |b| (wrapping int32 again, exact as R₂ fits).
//  3. q₁ + q₂ is then the quotient or one step past it: past when R₂ ≠ 0
//     has the sign opposite to a's (truncation keeps the remainder's sign
//     a's), so q = q₁ + q₂ − sgn(a)·sgn(b)·lt(sgn(a)·fp32(R₂), 0), with
//     sgn(x) = 1 − 2·lt(x, 0) for INT32 and 1 for UINT32 (fp32
//     conversion keeps an int32's sign).
//
// A UINT32 divisor of 2³¹ or more leaves int32 (R, like the remainder
// itself, may not fit), but there the quotient is [a ≥ b]: 0 if a is
// below 2³¹, else lt of the exact int32 a − b with 0, negated
// (cmpuint32.go's argument); the result picks it by b's top bit.

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// intMagic is 1.5·2²³: for an fp32 integer |x| < 2²², x + intMagic is
// exact and its bits are intMagicBits + x, read back as int32 by
// subtracting intMagicBits.
const (
	intMagic     = 1.5 * (1 << 23)
	intMagicBits = 0x4B400000
)

// intDivInput reports whether v is an INT32 or UINT32 graph input staged
// as int32 lanes, which intDiv divides.
func intDivInput(v *value) bool {
	r := v.root()
	return (v.typ == onnx.Int32 || v.typ == onnx.Uint32) && !v.isConst && r.input && r.layer == nil && r.elem == i32
}

// intDiv compiles Div n of the INT32 or UINT32 inputs a and b by the
// steps above.
func (c *compiler) intDiv(n *onnx.Node, a, b *value) error {
	switch {
	case !intDivInput(a) || !intDivInput(b) || a.typ != b.typ:
		return fmt.Errorf("Div of %v %s and %v %s: integer division runs on two integer graph inputs of one type: %w", a.typ, a, b.typ, b, ErrUnsupported)
	case !eqInts(a.shape, b.shape):
		return fmt.Errorf("Div of %v %s and %s: integer division does not broadcast: %w", a.typ, a, b, ErrUnsupported)
	case !c.outputs[n.Outputs[0]] || c.uses[n.Outputs[0]] != 1:
		return fmt.Errorf("Div of %v %s and %s in the middle of the graph: the quotient is only a graph output: %w", a.typ, a, b, ErrUnsupported)
	}
	for _, x := range []*value{a, b} {
		if err := c.materialize(x); err != nil {
			return err
		}
	}
	d := divider{c: c, C: max(a.root().lay.c(), 1)}
	q, err := d.quotient(a, b)
	if err != nil {
		return err
	}
	c.set(n, 0, q)
	return nil
}

// divider builds the layers of one integer Div, C lanes wide.
type divider struct {
	c *compiler
	C int
}

// fpRow and intRow are the step k with the constant v in every lane, on
// fp32 or int32 lanes; fpT and intT the step k with the tensor t.
func (d divider) fpRow(k stepKind, v float32) step {
	return step{kind: k, fp: true, rowF: fill(d.C, v)}
}

func (d divider) intRow(k stepKind, v int64) step {
	return step{kind: k, rowI: fillI(d.C, v)}
}

func fpT(k stepKind, t *value) step  { return step{kind: k, fp: true, t: t.root()} }
func intT(k stepKind, t *value) step { return step{kind: k, t: t.root()} }

// toFP converts the int32 accumulator to fp32 (one rounding).
func (d divider) toFP() step { return step{kind: sDequantize, rowF: fill(d.C, 1)} }

// toInt converts the fp32 accumulator, an integer below 2²² in magnitude,
// to int32 exactly.
func (d divider) toInt() []step {
	return []step{d.fpRow(sAddRow, intMagic), d.intRow(sAddRow, -intMagicBits)}
}

// layer computes from x, by steps, a value of type typ (fp32 if fp, else
// int32) that only the operator being built reads.
func (d divider) layer(x *value, typ onnx.DataType, fp bool, steps ...step) (*value, error) {
	l, err := d.c.moveLayer(x)
	if err != nil {
		return nil, err
	}
	if l.acc8 {
		return nil, fmt.Errorf("%s: accumulator int8: %w", x, ErrUnsupported)
	}
	for _, s := range steps {
		if s.t != nil && !s.t.lay.equal(l.out.lay) && !sameStorage(s.t.lay, l.out.lay) {
			return nil, fmt.Errorf("operands %s and %s are laid out differently on the device: %w", x, s.t, ErrUnsupported)
		}
	}
	l.steps = append(l.steps, steps...)
	l.accFP = fp
	v := d.c.rename(l, typ)
	v.uses = 1
	return v, nil
}

// quotient returns a / b, computed by the steps above.
func (d divider) quotient(a, b *value) (*value, error) {
	signed := a.typ == onnx.Int32
	// ta is a UINT32 a's top bit; sa and sab are sgn(a) and sgn(a)·sgn(b)
	// of INT32 operands.
	var ta, sa, sab *value
	var err error
	if signed {
		// ±1 in fp32: 1 − 2·lt(fp32(x), 0).
		sgn := func() []step {
			return []step{d.toFP(), d.fpRow(sLtRow, 0), d.fpRow(sMulRow, -2), d.fpRow(sAddRow, 1)}
		}
		if sa, err = d.layer(a, onnx.Float, true, sgn()...); err != nil {
			return nil, err
		}
		if sab, err = d.layer(b, onnx.Float, true, append(sgn(), fpT(sMulTensor, sa))...); err != nil {
			return nil, err
		}
	} else if ta, err = d.layer(a, onnx.Float, true, d.toFP(), d.fpRow(sLtRow, 0)); err != nil {
		return nil, err
	}
	// fp32(a): a UINT32 with its top bit set reads as int32 2³² less,
	// added back at scale 2⁻³² (exact) with one more rounding.
	af := []step{d.toFP()}
	if !signed {
		af = append(af, d.fpRow(sMulRow, 1.0/(1<<32)), fpT(sAddTensor, ta), d.fpRow(sMulRow, 1<<32))
	}
	fa, err := d.layer(a, onnx.Float, true, af...)
	if err != nil {
		return nil, err
	}
	// fp32(b), as int32: a UINT32 b of 2³¹ or more takes the other path.
	fb, err := d.layer(b, onnx.Float, true, d.toFP())
	if err != nil {
		return nil, err
	}
	q1, err := d.estimate(fa, fb)
	if err != nil {
		return nil, err
	}
	// R = a − q₁·b, then step 2: q₂ and R₂ = R − q₂·b.
	rest := func(q, r *value) (*value, error) {
		return d.layer(q, onnx.Int32, false, intT(sMulTensor, b), d.intRow(sMulRow, -1), intT(sAddTensor, r))
	}
	r1, err := rest(q1, a)
	if err != nil {
		return nil, err
	}
	q2, err := d.layer(r1, onnx.Int32, false, append([]step{d.toFP(), fpT(sDivTensor, fb), {kind: sRound, fp: true}}, d.toInt()...)...)
	if err != nil {
		return nil, err
	}
	r2, err := rest(q2, r1)
	if err != nil {
		return nil, err
	}
	// Step 3: q₁ + q₂ − sgn(a)·sgn(b)·lt(sgn(a)·fp32(R₂), 0).
	last := []step{d.toFP()}
	if signed {
		last = append(last, fpT(sMulTensor, sa), d.fpRow(sLtRow, 0), fpT(sMulTensor, sab))
	} else {
		last = append(last, d.fpRow(sLtRow, 0))
	}
	last = append(append(append(last, d.fpRow(sMulRow, -1)), d.toInt()...), intT(sAddTensor, q1), intT(sAddTensor, q2))
	if !signed {
		big, err := d.bigDivisor(a, b, ta)
		if err != nil {
			return nil, err
		}
		last = append(last, big...)
	}
	return d.layer(r2, a.typ, false, last...)
}

// estimate returns step 1's q₁ = round(fa / fb) in int32.
func (d divider) estimate(fa, fb *value) (*value, error) {
	return d.roundInt32(fa, fpT(sDivTensor, fb))
}

// roundInt32 returns round(v'), v' the fp32 value the steps pre compute
// from v, as int32 (modulo 2³²) for |v'| < 2³⁷: −h, h = round(v'/2¹⁶), then h·2¹⁶
// in int32, then l = round(2¹⁶·(v'/2¹⁶ − h)) added to it (step 1's
// pieces, each below 2²² and exact).
func (d divider) roundInt32(v *value, pre ...step) (*value, error) {
	nh, err := d.layer(v, onnx.Float, true, append(pre[:len(pre):len(pre)], d.fpRow(sMulRow, 1.0/(1<<16)), step{kind: sRound, fp: true}, d.fpRow(sMulRow, -1))...)
	if err != nil {
		return nil, err
	}
	hi, err := d.layer(nh, onnx.Int32, false, append(append([]step{d.fpRow(sMulRow, -1)}, d.toInt()...), d.intRow(sMulRow, 1<<16))...)
	if err != nil {
		return nil, err
	}
	l := append(pre[:len(pre):len(pre)], d.fpRow(sMulRow, 1.0/(1<<16)), fpT(sAddTensor, nh), d.fpRow(sMulRow, 1<<16), step{kind: sRound, fp: true})
	return d.layer(v, onnx.Int32, false, append(append(l, d.toInt()...), intT(sAddTensor, hi))...)
}

// bigDivisor returns the steps that replace the UINT32 quotient q in the
// accumulator by [a ≥ b] where b ≥ 2³¹: q·(1 − tb) + tb·ta·(1 − lt(a − b, 0)),
// with ta and tb the operands' top bits (when both are set, a − b is
// exact in int32).
func (d divider) bigDivisor(a, b, ta *value) ([]step, error) {
	tb, err := d.layer(b, onnx.Float, true, d.toFP(), d.fpRow(sLtRow, 0))
	if err != nil {
		return nil, err
	}
	keep, err := d.layer(tb, onnx.Int32, false, append([]step{d.fpRow(sMulRow, -1), d.fpRow(sAddRow, 1)}, d.toInt()...)...)
	if err != nil {
		return nil, err
	}
	nb, err := d.c.int32Negate(b)
	if err != nil {
		return nil, err
	}
	ge := []step{intT(sAddTensor, nb), d.toFP(), d.fpRow(sLtRow, 0), d.fpRow(sMulRow, -1), d.fpRow(sAddRow, 1), fpT(sMulTensor, tb), fpT(sMulTensor, ta)}
	big, err := d.layer(a, onnx.Int32, false, append(ge, d.toInt()...)...)
	if err != nil {
		return nil, err
	}
	return []step{intT(sMulTensor, keep), intT(sAddTensor, big)}, nil
}
