package alidnn

// Arithmetic on 64-bit integers held as two 32-bit words lo and hi (see
// wide.go), exact for every value, modulo 2⁶⁴ as ONNX's UINT64 operators
// wrap. The int32 lanes add and multiply modulo 2³²; what crosses from
// the low word to the high one is computed exactly:
//
//   - Add: lo = a.lo + b.lo, and the carry is lo < a.lo as UINT32
//     (cmpuint32.go's comparison): hi = a.hi + b.hi + carry. Sub likewise
//     with the borrow a.lo < b.lo.
//   - Mul: lo = a.lo·b.lo, hi = H + a.lo·b.hi + a.hi·b.lo, where H is the
//     high word of the 64-bit product of a.lo and b.lo as UINT32, which no
//     lane computes. Each factor x is split into balanced limbs
//     x = x₂·2²² + x₁·2¹¹ + x₀ (|x₀|, |x₁| ≤ 2¹⁰, 0 ≤ x₂ ≤ 2¹⁰: rounding
//     an fp32 estimate to the nearest multiple, with the remainders exact
//     in int32), so every limb product is an exact fp32 integer and so is
//     every column cₖ = Σ_{i+j=k} xᵢyⱼ (|cₖ| < 3·2²⁰). Then
//     H = 2·c₃ + 2¹²·c₄ + F with F = (c₂·2²² + c₁·2¹¹ + c₀ − lo)/2³², an
//     integer the fp32 sum Horner's scheme gives within 2⁻¹¹ (so rounding
//     it is exact); c₃, c₄ and F become int32 below 2²², where the
//     1.5·2²³ trick is exact, and add up in wrapping int32.
//   - Comparisons: a < b is hi_a < hi_b or hi_a = hi_b and lo_a < lo_b,
//     the words compared as UINT32; Equal is both words equal.

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// wideOps builds the layers of one 64-bit operator.
type wideOps struct{ divider }

// wideValue is a 64-bit integer of type typ with words lo and hi. Each
// word is read by several layers of the operators reading it, so none may
// take their steps into its own layer (see open).
func wideValue(typ onnx.DataType, lo, hi *value) *value {
	lo.uses, hi.uses = 2, 2
	return &value{shape: lo.shape, typ: typ, derived: derived{words: &[2]*value{lo, hi}}}
}

// arith returns Add, Sub, Mul or Div (op) of a and b.
func (o wideOps) arith(op string, a, b *value) (*value, error) {
	switch op {
	case "Add":
		return o.add(a, b)
	case "Sub":
		return o.sub(a, b)
	case "Div":
		return o.div(a, b)
	}
	return o.mul(a, b)
}

func (o wideOps) add(a, b *value) (*value, error) {
	lo, err := o.layer(a.words[0], onnx.Uint32, false, intT(sAddTensor, b.words[0]))
	if err != nil {
		return nil, err
	}
	carry, err := o.c.ltUint32(lo, a.words[0], false)
	if err != nil {
		return nil, err
	}
	hi, err := o.layer(carry, onnx.Uint32, false, append(o.toInt(), intT(sAddTensor, a.words[1]), intT(sAddTensor, b.words[1]))...)
	if err != nil {
		return nil, err
	}
	return wideValue(a.typ, lo, hi), nil
}

func (o wideOps) sub(a, b *value) (*value, error) {
	nb, err := o.c.int32Negate(b.words[0])
	if err != nil {
		return nil, err
	}
	lo, err := o.layer(a.words[0], onnx.Uint32, false, intT(sAddTensor, nb))
	if err != nil {
		return nil, err
	}
	borrow, err := o.c.ltUint32(a.words[0], b.words[0], false)
	if err != nil {
		return nil, err
	}
	// −(borrow + b.hi) + a.hi.
	hi, err := o.layer(borrow, onnx.Uint32, false,
		append(o.toInt(), intT(sAddTensor, b.words[1]), o.intRow(sMulRow, -1), intT(sAddTensor, a.words[1]))...)
	if err != nil {
		return nil, err
	}
	return wideValue(a.typ, lo, hi), nil
}

func (o wideOps) mul(a, b *value) (*value, error) {
	lo, err := o.layer(a.words[0], onnx.Uint32, false, intT(sMulTensor, b.words[0]))
	if err != nil {
		return nil, err
	}
	h, err := o.mulHigh(a.words[0], b.words[0], lo)
	if err != nil {
		return nil, err
	}
	cross, err := o.layer(a.words[0], onnx.Uint32, false, intT(sMulTensor, b.words[1]))
	if err != nil {
		return nil, err
	}
	hi, err := o.layer(a.words[1], onnx.Uint32, false, intT(sMulTensor, b.words[0]), intT(sAddTensor, cross), intT(sAddTensor, h))
	if err != nil {
		return nil, err
	}
	return wideValue(a.typ, lo, hi), nil
}

// limbs returns x's balanced limbs x₀, x₁, x₂ (see above) in fp32, x an
// int32 tensor read as UINT32.
func (o wideOps) limbs(x *value) ([3]*value, error) {
	var l [3]*value
	top, err := o.c.topBit(x, 1)
	if err != nil {
		return l, err
	}
	// fp32(x) within 2⁸: x as int32, plus 2³² where its top bit is set.
	xf, err := o.layer(x, onnx.Float, true, o.toFP(), o.fpRow(sMulRow, 1.0/(1<<32)), fpT(sAddTensor, top), o.fpRow(sMulRow, 1<<32))
	if err != nil {
		return l, err
	}
	if l[2], err = o.layer(xf, onnx.Float, true, o.fpRow(sMulRow, 1.0/(1<<22)), step{kind: sRound, fp: true}); err != nil {
		return l, err
	}
	// r = x − x₂·2²², |r| ≤ 2²¹ + 2⁸: exact in wrapping int32 and in fp32.
	r, err := o.layer(l[2], onnx.Int32, false, append(o.toInt(), o.intRow(sMulRow, -(1<<22)), intT(sAddTensor, x))...)
	if err != nil {
		return l, err
	}
	rf, err := o.layer(r, onnx.Float, true, o.toFP())
	if err != nil {
		return l, err
	}
	if l[1], err = o.layer(rf, onnx.Float, true, o.fpRow(sMulRow, 1.0/(1<<11)), step{kind: sRound, fp: true}); err != nil {
		return l, err
	}
	l[0], err = o.layer(l[1], onnx.Float, true, o.fpRow(sMulRow, -(1<<11)), fpT(sAddTensor, rf))
	return l, err
}

// mulHigh returns H, the high word of the product of the int32 tensors x
// and y read as UINT32, whose low word is lo (see above).
func (o wideOps) mulHigh(x, y, lo *value) (*value, error) {
	xl, err := o.limbs(x)
	if err != nil {
		return nil, err
	}
	yl, err := o.limbs(y)
	if err != nil {
		return nil, err
	}
	// column returns Σ xᵢ·y_{k−i} over the limbs present, in fp32.
	column := func(k int) (*value, error) {
		var sum *value
		for i := 2; i >= 0; i-- {
			j := k - i
			if j < 0 || j > 2 {
				continue
			}
			steps := []step{fpT(sMulTensor, yl[j])}
			if sum != nil {
				steps = append(steps, fpT(sAddTensor, sum))
			}
			var err error
			if sum, err = o.layer(xl[i], onnx.Float, true, steps...); err != nil {
				return nil, err
			}
		}
		return sum, nil
	}
	var col [5]*value
	for k := range col {
		if col[k], err = column(k); err != nil {
			return nil, err
		}
	}
	// F by Horner's scheme: (((c₀ − lo)·2⁻¹¹ + c₁)·2⁻¹¹ + c₂)·2⁻¹⁰, with
	// lo as int32 and its top bit subtracted apart (UINT32 lo is int32 lo
	// plus 2³² where the bit is set).
	ntop, err := o.c.topBit(lo, -1)
	if err != nil {
		return nil, err
	}
	f, err := o.layer(lo, onnx.Float, true, o.toFP(), o.fpRow(sMulRow, -1), fpT(sAddTensor, col[0]), o.fpRow(sMulRow, 1.0/(1<<11)), fpT(sAddTensor, col[1]))
	if err != nil {
		return nil, err
	}
	if f, err = o.layer(f, onnx.Float, true, o.fpRow(sMulRow, 1.0/(1<<11)), fpT(sAddTensor, col[2]), o.fpRow(sMulRow, 1.0/(1<<10)),
		fpT(sAddTensor, ntop), step{kind: sRound, fp: true}); err != nil {
		return nil, err
	}
	c3, err := o.layer(col[3], onnx.Int32, false, o.toInt()...)
	if err != nil {
		return nil, err
	}
	c4, err := o.layer(col[4], onnx.Int32, false, append(o.toInt(), o.intRow(sMulRow, 1<<12))...)
	if err != nil {
		return nil, err
	}
	return o.layer(f, onnx.Uint32, false, append(o.toInt(), intT(sAddTensor, c3), intT(sAddTensor, c3), intT(sAddTensor, c4))...)
}

// compare returns the comparison op of a and b, 0 or 1 in fp32.
func (o wideOps) compare(op string, a, b *value) (*value, error) {
	if op == "Greater" || op == "GreaterOrEqual" {
		a, b = b, a
	}
	eqHi, err := o.equal32(a.words[1], b.words[1])
	if err != nil {
		return nil, err
	}
	if op == "Equal" {
		eqLo, err := o.equal32(a.words[0], b.words[0])
		if err != nil {
			return nil, err
		}
		return o.layer(eqLo, onnx.Float, true, fpT(sMulTensor, eqHi))
	}
	ltHi, err := o.c.ltUint32(a.words[1], b.words[1], false)
	if err != nil {
		return nil, err
	}
	ltLo, err := o.c.ltUint32(a.words[0], b.words[0], op == "LessOrEqual" || op == "GreaterOrEqual")
	if err != nil {
		return nil, err
	}
	return o.layer(eqHi, onnx.Float, true, fpT(sMulTensor, ltLo), fpT(sAddTensor, ltHi))
}

// equal32 returns x = y of two int32 tensors, 0 or 1 in fp32: their
// wrapping difference is 0 only then, and its fp32 conversion too.
func (o wideOps) equal32(x, y *value) (*value, error) {
	ny, err := o.c.int32Negate(y)
	if err != nil {
		return nil, err
	}
	return o.layer(x, onnx.Float, true, intT(sAddTensor, ny), o.toFP(), o.fpRow(sEqRow, 0))
}
