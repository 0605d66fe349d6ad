package alidnn

// Pow of an INT32 graph input x, staged as int32 lanes (see intpath.go),
// by an INT32 or FLOAT exponent y: a graph input of x's shape, an fp32
// tensor computed so, or a constant of any integer or float type,
// broadcast. The engine has no integer power and fp32 holds integers only
// up to 2²⁴, but the ALU's int32 mul wraps modulo 2³², so an integer y is
// exact by squaring:
//
//	x^y mod 2³² = ∏ₖ (1 + bₖ·(sₖ − 1)),  s₀ = x, sₖ₊₁ = sₖ·sₖ
//
// (wrapping, as numpy's int32 power and ONNX's integer Mul wrap), bₖ bit k
// of y for k < 31. Bit k of an int32 is lt(fp32(y·2³¹⁻ᵏ), 0): the int32
// mul by a power of two is a shift, and the conversion keeps the sign. A
// 0/1 fp32 becomes int32 by intdiv.go's toInt. The layers carry sₖ − 1,
// as sₖ₊₁ − 1 = (sₖ − 1)·(sₖ − 1 + 2): two layers a bit, 31 bits, 64
// layers with the two negative exponents take (71 for a FLOAT y). A
// constant with one value takes a layer a square up to its top bit and
// one for each other bit set; one with several is laid out as x is, an
// integer one as int32 lanes.
//
// A negative y has no integer power: numpy raises, and onnxruntime
// truncates C's pow, giving 1 for x = 1, ±1 by y's parity for x = −1 and 0
// for |x| ≥ 2. So does this, and 0 for x = 0 too (C's pow is +Inf there,
// whose conversion to int32 is undefined). The bits below 31 give x = ±1
// their power, as y's parity is bit 0, and the power is multiplied by
// 1 − lt(y, 0)·[x ≠ ±1], [x ≠ ±1] = min((fp32(x)² − 1)², 1) (fp32 rounds
// monotonically and keeps 0 and ±1).
//
// A FLOAT y is exact where it is an integer, of any magnitude: for y ≥ 2³⁰
// x^y = x^(y mod 2³⁰ + 2³⁰), as an odd x has order dividing 2³⁰ modulo 2³²
// and an even x gives 0. Bits 0 to 29 are those of r = y − 2³⁰·round(y/2³⁰)
// (|r| ≤ 2²⁹, exact in fp32), rounded to int32 by roundInt32, and the
// 2³⁰ bit is [y ≥ 2³⁰]. ONNX's reference truncates the float64 power to
// int32; beyond int32 that conversion is undefined, and this wraps.
//
// A FLOAT y that is not an integer gives trunc(e^(y·ln fp32(x))) with
// exp's and log's fp32 roundings, saturated to [0, 2³¹ − 128]: 0 for a
// negative x, where the reference's power is NaN. fp32(x), ln, the product
// and exp each round once, so the fp32 power is within about
// 2⁻²³·(1 + |y|·(1 + |ln x|)) of x^y, relatively: the result is the
// reference's unless an integer lies between the two (an exact integer
// power such as 4^0.5 may truncate to one less), and is not exact beyond
// 2²⁴. NaN and infinite exponents give unspecified values (a constant
// with that one value is refused).
//
// The power is only a graph output, as intdiv.go's quotient is.

import (
	"fmt"
	"math"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// intPow compiles Pow n of the INT32 x by y by the rules above.
func (c *compiler) intPow(n *onnx.Node, x, y *value) error {
	switch {
	case !intDivInput(x):
		return fmt.Errorf("Pow of the INT32 tensor %s: integer powers run on an INT32 graph input: %w", x, ErrUnsupported)
	case !c.outputs[n.Outputs[0]] || c.uses[n.Outputs[0]] != 1:
		return fmt.Errorf("Pow of INT32 %s in the middle of the graph: the power is only a graph output: %w", x, ErrUnsupported)
	case y.isConst:
		if s, err := broadcastShape(x.shape, y.shape); err != nil || !eqInts(s, x.shape) {
			return fmt.Errorf("Pow of INT32 %s by %s broadcasts the base: %w", x, y, ErrUnsupported)
		}
	case !eqInts(x.shape, y.shape):
		return fmt.Errorf("Pow of INT32 %s by %s: integer powers do not broadcast: %w", x, y, ErrUnsupported)
	case !(y.typ == onnx.Int32 && intDivInput(y) || y.typ == onnx.Float && y.root().el() == f32):
		return fmt.Errorf("Pow of INT32 %s by the %v tensor %s: the exponent is an INT32 graph input or fp32: %w", x, y.typ, y, ErrUnsupported)
	}
	for _, v := range []*value{x, y} {
		if !v.isConst {
			if err := c.materialize(v); err != nil {
				return err
			}
		}
	}
	d := divider{c: c, C: max(x.root().lay.c(), 1)}
	var p *value
	var err error
	switch {
	case y.isConst && uniform(y):
		p, err = d.powConst(x, y)
	case y.isConst:
		if y, err = constExponent(x, y); err == nil {
			p, err = d.powTensor(x, y)
		}
	default:
		p, err = d.powTensor(x, y)
	}
	if err != nil {
		return err
	}
	c.set(n, 0, p)
	return nil
}

// constExponent lays the constant y, of several values, out as x is
// (broadcast), for powTensor: a FLOAT y as fp32 lanes, an integer one as
// int32 lanes, each value reduced by reduceExp.
func constExponent(x, y *value) (*value, error) {
	r := x.root()
	if !eqInts(x.shape, r.shape) {
		return nil, fmt.Errorf("Pow of INT32 %s, a view, by the constant %s: %w", x, y, ErrUnsupported)
	}
	if y.i == nil {
		return expand(r.lay, y)
	}
	idx := broadcastIndex(x.shape, y.shape)
	e := make([]int64, len(idx))
	for k, i := range idx {
		e[k] = reduceExp(y.i[i])
	}
	v := constInt(y.name, onnx.Int32, x.shape, e)
	v.lay, v.elem = r.lay, i32
	return v, nil
}

// reduceExp is an int32 exponent with the power of k for every INT32 base:
// k itself, or k mod 2³⁰ + 2³⁰ for k ≥ 2³⁰ (see above), or −1 or −2 by
// k's parity for k < −2³¹.
func reduceExp(k int64) int64 {
	switch {
	case k >= 1<<30:
		return k%(1<<30) + 1<<30
	case k < -1<<31:
		return -2 + k&1
	}
	return k
}

// uniform reports whether the constant v has one value, repeated.
func uniform(v *value) bool {
	if v.i != nil {
		return len(v.i) > 0 && !slices.ContainsFunc(v.i, func(k int64) bool { return k != v.i[0] })
	}
	return len(v.f) > 0 && !slices.ContainsFunc(v.f, func(f float32) bool { return f != v.f[0] })
}

// bit returns the steps taking an int32 accumulator to its bit k, 0 or 1
// in fp32.
func (d divider) bit(k int) []step {
	return []step{d.intRow(sMulRow, int64(int32(uint32(1)<<(31-k)))), d.toFP(), d.fpRow(sLtRow, 0)}
}

// notUnit returns [x ≠ ±1] in fp32: (fp32(x)² − 1)², at most 1, of an
// int32 x or of fp32 integers x.
func (d divider) notUnit(x *value) (*value, error) {
	sq := step{kind: sSquare, fp: true}
	st := []step{sq, d.fpRow(sAddRow, -1), sq, d.fpRow(sMinRow, 1)}
	if x.root().el() != f32 {
		st = append([]step{d.toFP()}, st...)
	}
	return d.layer(x, onnx.Float, true, st...)
}

// powTensor returns x^y for the INT32 or FLOAT tensor y.
func (d divider) powTensor(x, y *value) (*value, error) {
	fp := y.typ == onnx.Float
	// e holds y's bits 0 to 29, and top's steps give the 2³⁰ bit.
	e, top := y, d.bit(30)
	// frac is [y is not an integer].
	var frac *value
	var err error
	if fp {
		// r = y − 2³⁰·round(y/2³⁰) as int32.
		if e, err = d.roundInt32(y, d.fpRow(sMulRow, 1.0/(1<<30)), step{kind: sRound, fp: true}, d.fpRow(sMulRow, -(1<<30)), fpT(sAddTensor, y)); err != nil {
			return nil, err
		}
		top = []step{d.fpRow(sMulRow, -1), d.fpRow(sAddRow, 1<<30), d.fpRow(sLtRow, 0.5)}
		if frac, err = d.layer(y, onnx.Float, true, step{kind: sRound, fp: true}, fpT(sEqTensor, y), d.fpRow(sMulRow, -1), d.fpRow(sAddRow, 1)); err != nil {
			return nil, err
		}
	}
	nu, err := d.notUnit(x)
	if err != nil {
		return nil, err
	}
	// keep = 1 − max(lt(y, 0)·[x ≠ ±1], frac), in int32.
	var ks []step
	if !fp {
		ks = append(ks, d.toFP())
	}
	ks = append(ks, d.fpRow(sLtRow, 0), fpT(sMulTensor, nu))
	if fp {
		ks = append(ks, fpT(sMaxTensor, frac))
	}
	keep, err := d.layer(y, onnx.Int32, false, append(append(ks, d.fpRow(sMulRow, -1), d.fpRow(sAddRow, 1)), d.toInt()...)...)
	if err != nil {
		return nil, err
	}
	last := []step{intT(sMulTensor, keep)}
	if fp {
		v, err := d.fracPow(x, fpT(sMulTensor, y), frac)
		if err != nil {
			return nil, err
		}
		last = append(last, intT(sAddTensor, v))
	}
	return d.squares(x, e, y, top, last)
}

// squares returns ∏ₖ (1 + bₖ·(sₖ − 1)) for k = 0 to 30, bₖ bit k of e
// below 30 and b₃₀ top's steps on t, with the steps last after it.
func (d divider) squares(x, e, t *value, top, last []step) (*value, error) {
	s1, err := d.layer(x, onnx.Int32, false, d.intRow(sAddRow, -1))
	if err != nil {
		return nil, err
	}
	var p *value
	for k := range 31 {
		src, st := e, d.bit(k)
		if k == 30 {
			src, st = t, top[:len(top):len(top)]
		}
		st = append(append(st, d.toInt()...), intT(sMulTensor, s1), d.intRow(sAddRow, 1))
		if p != nil {
			st = append(st, intT(sMulTensor, p))
		}
		if k == 30 {
			st = append(st, last...)
		}
		if p, err = d.layer(src, onnx.Int32, false, st...); err != nil {
			return nil, err
		}
		if k < 30 {
			if s1, err = d.layer(s1, onnx.Int32, false, d.intRow(sAddRow, 2), intT(sMulTensor, s1)); err != nil {
				return nil, err
			}
		}
	}
	return p, nil
}

// fracPow returns trunc(e^(y·ln fp32(x))) saturated to [0, 2³¹ − 128]
// as int32, times the fp32 0/1 tensor frac if there is one; mul
// multiplies by y.
func (d divider) fracPow(x *value, mul step, frac *value) (*value, error) {
	st := []step{d.toFP(), {kind: sLog, fp: true}, mul, {kind: sExp, fp: true},
		d.fpRow(sMaxRow, 0), d.fpRow(sMinRow, 1<<31-128), floorStep()}
	if frac != nil {
		st = append(st, fpT(sMulTensor, frac))
	}
	return d.roundInt32(x, st...)
}

// powConst returns x^y for the constant y, one value: an integer by
// powBy (reduced below 2³¹ as above), any other by fracPow.
func (d divider) powConst(x, y *value) (*value, error) {
	if y.i != nil {
		return d.powBy(x, reduceExp(y.i[0]))
	}
	f := float64(y.f[0])
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return nil, fmt.Errorf("Pow of INT32 %s by %v: %w", x, f, ErrUnsupported)
	case f != math.Trunc(f):
		return d.fracPow(x, d.fpRow(sMulRow, float32(f)), nil)
	case f >= 1<<30:
		return d.powBy(x, int64(math.Mod(f, 1<<30))+1<<30)
	case f < 0:
		return d.powBy(x, -2-int64(math.Mod(f, 2))) // −1 for odd f, −2 for even
	}
	return d.powBy(x, int64(f))
}

// powBy returns x^k for the integer k < 2³¹: for k ≥ 0 each bit's sₖ
// multiplied in as the squares are made, for k < 0 [x = ±1]·x^(k mod 2).
func (d divider) powBy(x *value, k int64) (*value, error) {
	if k < 0 {
		nu, err := d.notUnit(x)
		if err != nil {
			return nil, err
		}
		st := append([]step{d.fpRow(sMulRow, -1), d.fpRow(sAddRow, 1)}, d.toInt()...)
		if k%2 != 0 {
			st = append(st, intT(sMulTensor, x))
		}
		return d.layer(nu, onnx.Int32, false, st...)
	}
	if k == 0 {
		return d.layer(x, onnx.Int32, false, d.intRow(sMulRow, 0), d.intRow(sAddRow, 1))
	}
	p, s := (*value)(nil), x
	for j := 0; ; j++ {
		var err error
		switch {
		case k>>j&1 == 0:
		case p == nil:
			p = s
		default:
			p, err = d.layer(s, onnx.Int32, false, intT(sMulTensor, p))
		}
		if err != nil {
			return nil, err
		}
		if k>>(j+1) == 0 {
			break
		}
		if s, err = d.layer(s, onnx.Int32, false, intT(sMulTensor, s)); err != nil {
			return nil, err
		}
	}
	if p == x { // the power is a layer's output
		return d.layer(x, onnx.Int32, false)
	}
	return p, nil
}
