package alidnn

// Div of two UINT64 values held as words (see wide.go), exact for every
// pair: the quotient truncated, anything for a zero divisor. As in
// intdiv.go the quotient is an fp32 estimate corrected by exact residuals,
// here 64-bit ones (widearith.go's Mul and Sub, modulo 2⁶⁴), with u = 2⁻²⁴:
//
//  1. q₁ = round(fl(a)/fl(b)), within 4u·a/b + ½ of a/b, so that
//     R₁ = a − q₁·b has |R₁| ≤ 2⁴² + b/2 (modulo 2⁶⁴ all along: q₁ may
//     round up to 2⁶⁴, which wraps to 0, and R₁ is the true residual
//     all the same).
//  2. Twice: δ = round(fl(R)/fl(b)), q += δ, R −= δ·b. Each step leaves
//     |R| ≤ 4u·|R| + b/2 + 1: 2²⁰ + b/2 after the first, below b after the
//     second (b ≤ 2 divides exactly there, R being below 2²⁴).
//  3. q − [R < 0] is the quotient, as the remainder lies in [0, b).
//
// Every R is read as INT64, right while |R| < 2⁶³: so a divisor of 2⁶³ or
// more takes its own path, where the quotient is [a ≥ b]. fl(x) of a
// 64-bit x is fl(hi)·2³² + fl(lo), within 2u relative; an fp32 integer v
// of magnitude below 2⁶⁴ becomes words exactly as h·2³² + r with
// h = round(v/2³²) and r = v − h·2³², |r| ≤ 2³¹, exact in fp32 (it is a
// multiple of v's ulp, at least 2⁸ once h ≠ 0).

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// div returns a / b.
func (o wideOps) div(a, b *value) (*value, error) {
	af, err := o.float(a, false)
	if err != nil {
		return nil, err
	}
	bf, err := o.float(b, false)
	if err != nil {
		return nil, err
	}
	q, err := o.estimate(af, bf)
	if err != nil {
		return nil, err
	}
	r, err := o.rest(a, q, b)
	if err != nil {
		return nil, err
	}
	for range 2 {
		rf, err := o.float(r, true)
		if err != nil {
			return nil, err
		}
		d, err := o.estimate(rf, bf)
		if err != nil {
			return nil, err
		}
		if q, err = o.add(q, d); err != nil {
			return nil, err
		}
		if r, err = o.rest(r, d, b); err != nil {
			return nil, err
		}
	}
	// −[R < 0] in both words is −1 or 0 as a 64-bit integer.
	neg, err := o.layer(r.words[1], onnx.Uint32, false, append([]step{o.toFP(), o.fpRow(sLtRow, 0), o.fpRow(sMulRow, -1)}, o.toInt()...)...)
	if err != nil {
		return nil, err
	}
	if q, err = o.add(q, wideValue(onnx.Uint64, neg, neg)); err != nil {
		return nil, err
	}
	return o.bigDivisor(a, b, q)
}

// rest returns r − d·b.
func (o wideOps) rest(r, d, b *value) (*value, error) {
	p, err := o.mul(d, b)
	if err != nil {
		return nil, err
	}
	return o.sub(r, p)
}

// bigDivisor returns q where b < 2⁶³, else [a ≥ b].
func (o wideOps) bigDivisor(a, b, q *value) (*value, error) {
	top, err := o.c.topBit(b.words[1], 1)
	if err != nil {
		return nil, err
	}
	ge, err := o.compare("GreaterOrEqual", a, b)
	if err != nil {
		return nil, err
	}
	big, err := o.layer(ge, onnx.Int32, false, append([]step{fpT(sMulTensor, top)}, o.toInt()...)...)
	if err != nil {
		return nil, err
	}
	keep, err := o.layer(top, onnx.Int32, false, append([]step{o.fpRow(sMulRow, -1), o.fpRow(sAddRow, 1)}, o.toInt()...)...)
	if err != nil {
		return nil, err
	}
	lo, err := o.layer(q.words[0], onnx.Uint32, false, intT(sMulTensor, keep), intT(sAddTensor, big))
	if err != nil {
		return nil, err
	}
	hi, err := o.layer(q.words[1], onnx.Uint32, false, intT(sMulTensor, keep))
	if err != nil {
		return nil, err
	}
	return wideValue(q.typ, lo, hi), nil
}

// estimate returns round(f / bf) of two fp32 tensors, as words.
func (o wideOps) estimate(f, bf *value) (*value, error) {
	v, err := o.layer(f, onnx.Float, true, fpT(sDivTensor, bf), step{kind: sRound, fp: true})
	if err != nil {
		return nil, err
	}
	return o.fromFloat(v)
}

// float returns fl(w) (see above), w read as INT64 if signed, else as
// UINT64. A signed w is (hi + t)·2³² + lo with lo and hi as int32 and t
// lo's top bit: with hi = −1 and lo's top bit clear, fl(hi)·2³² + fl(lo
// as UINT32) would lose a small negative w in the rounding of lo near
// 2³².
func (o wideOps) float(w *value, signed bool) (*value, error) {
	lo, hi := w.words[0], w.words[1]
	top, err := o.c.topBit(lo, 1)
	if err != nil {
		return nil, err
	}
	if signed {
		lf, err := o.layer(lo, onnx.Float, true, o.toFP())
		if err != nil {
			return nil, err
		}
		return o.layer(hi, onnx.Float, true, o.toFP(), fpT(sAddTensor, top), o.fpRow(sMulRow, 0x1p32), fpT(sAddTensor, lf))
	}
	lf, err := o.layer(lo, onnx.Float, true, o.toFP(), o.fpRow(sMulRow, 0x1p-32), fpT(sAddTensor, top), o.fpRow(sMulRow, 0x1p32))
	if err != nil {
		return nil, err
	}
	ht, err := o.c.topBit(hi, 1)
	if err != nil {
		return nil, err
	}
	return o.layer(hi, onnx.Float, true, o.toFP(), o.fpRow(sMulRow, 0x1p-32), fpT(sAddTensor, ht), o.fpRow(sMulRow, 0x1p64), fpT(sAddTensor, lf))
}

// fromFloat returns the words of v, an fp32 integer below 2⁶⁴ in
// magnitude, modulo 2⁶⁴ (see above).
func (o wideOps) fromFloat(v *value) (*value, error) {
	h, err := o.layer(v, onnx.Float, true, o.fpRow(sMulRow, 0x1p-32), step{kind: sRound, fp: true})
	if err != nil {
		return nil, err
	}
	r, err := o.layer(h, onnx.Float, true, o.fpRow(sMulRow, -0x1p32), fpT(sAddTensor, v))
	if err != nil {
		return nil, err
	}
	lo, err := o.roundInt32(r)
	if err != nil {
		return nil, err
	}
	hw, err := o.roundInt32(h)
	if err != nil {
		return nil, err
	}
	// A negative r borrows one from the high word.
	hi, err := o.layer(r, onnx.Uint32, false, append(append([]step{o.fpRow(sLtRow, 0), o.fpRow(sMulRow, -1)}, o.toInt()...), intT(sAddTensor, hw))...)
	if err != nil {
		return nil, err
	}
	return wideValue(onnx.Uint64, lo, hi), nil
}
