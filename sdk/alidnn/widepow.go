package alidnn

// Pow of an INT64 graph input x (staged as exact fp32 values within ±2²⁴,
// see embed.go) as a 64-bit integer on two 32-bit words (see wide.go), by
// intpow.go's rules with its squares and products made by widearith.go's
// Mul, modulo 2⁶⁴:
//
//   - an integer y ≥ 0 gives x^y modulo 2⁶⁴ (exactly x^y wherever it fits
//     in INT64), the product of 1 + bₖ·(sₖ − 1) over y's bits, sₖ the
//     wrapped squares of x; y's bits come from y as int32 (an INT64 y is
//     within ±2²⁴ by staging, a FLOAT one is clamped to ±(2³¹ − 128),
//     beyond which |x| ≥ 2 overflows INT64 and ONNX leaves the value
//     undefined, and an even y keeps x = −1's sign); a constant y of one
//     value is exact modulo 2⁶⁴ at any magnitude (an even x gives 0 from
//     y = 64 on, an odd one x^(y mod 2⁶²), odd numbers having orders
//     dividing 2⁶² modulo 2⁶⁴);
//   - a negative y gives 1 for x = 1, ±1 by y's parity for x = −1 and 0
//     otherwise, as onnxruntime's truncated pow (0 for x = 0 too);
//   - a FLOAT y that is not an integer gives trunc(e^(y·ln x)) with exp's
//     and log's fp32 roundings, saturated to [0, 2⁶³ − 2⁴⁰] (see
//     intpow.go's fracPow for the bound), 0 for a negative x.
//
// The squares and products are 64-bit Muls of 32 layers each: a tensor y
// of 25 bits (INT64) or 31 (FLOAT) takes some 1 600 or 2 000 layers, a
// constant only as many squares as its largest value has bits.

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// maxExp64 is the largest exponent a FLOAT y is clamped to: even, and an
// fp32 value.
const maxExp64 = 1<<31 - 128

// widePow compiles Pow n of the INT64 x by y.
func (c *compiler) widePow(n *onnx.Node, x, y *value) error {
	r := x.root()
	switch {
	case x.isConst || !r.input || r.layer != nil || r.elem != f32 || r.gather != nil || !eqInts(x.shape, r.shape):
		return fmt.Errorf("Pow of INT64 %s: integer powers run on an INT64 graph input: %w", x, ErrUnsupported)
	case y.isConst:
		if s, err := broadcastShape(x.shape, y.shape); err != nil || !eqInts(s, x.shape) {
			return fmt.Errorf("Pow of INT64 %s by %s broadcasts the base: %w", x, y, ErrUnsupported)
		}
	case !eqInts(x.shape, y.shape):
		return fmt.Errorf("Pow of INT64 %s by %s: integer powers do not broadcast: %w", x, y, ErrUnsupported)
	case !(y.typ == onnx.Int64 || y.typ == onnx.Float) || y.root().el() != f32:
		return fmt.Errorf("Pow of INT64 %s by the %v tensor %s: the exponent is an INT64 graph input or fp32: %w", x, y.typ, y, ErrUnsupported)
	}
	for _, v := range []*value{x, y} {
		if !v.isConst {
			if err := c.materialize(v); err != nil {
				return err
			}
		}
	}
	o := wideOps{divider{c: c, C: max(r.lay.c(), 1)}}
	xw, err := o.fromFloat(x)
	if err != nil {
		return err
	}
	var p *value
	switch {
	case y.isConst && uniform(y):
		p, err = o.pow64Const(x, xw, y)
	case y.isConst && y.i != nil:
		p, err = o.pow64Ints(x, xw, y)
	default:
		if y.isConst {
			if y, err = expand(r.lay, y); err != nil {
				return err
			}
		}
		p, err = o.pow64Tensor(x, xw, y)
	}
	if err != nil {
		return err
	}
	p.typ = onnx.Int64
	c.set(n, 0, p)
	return nil
}

// clampExp is the integer exponent k as the bits of a tensor's take it:
// k, or beyond int32 2³¹ − 2 or −2 with k's parity (see above).
func clampExp(k int64) int64 {
	switch {
	case k > 1<<31-1:
		return 1<<31 - 2 + k&1
	case k < -1<<31:
		return -2 + k&1
	}
	return k
}

// pow64Const returns x^y for the constant y of one value, exact modulo 2⁶⁴
// for every integer.
func (o wideOps) pow64Const(x, xw, y *value) (*value, error) {
	if y.i != nil {
		return o.pow64By(x, xw, y.i[0])
	}
	f := float64(y.f[0])
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return nil, fmt.Errorf("Pow of INT64 %s by %v: %w", x, f, ErrUnsupported)
	case f != math.Trunc(f):
		v, err := o.fracFloat(x, o.fpRow(sMulRow, float32(f)), nil)
		if err != nil {
			return nil, err
		}
		return o.fromFloat(v)
	case f >= 0x1p63:
		return o.pow64By(x, xw, 1<<62+int64(math.Mod(f, 0x1p62)))
	case f < -0x1p63:
		return o.pow64By(x, xw, -2) // fp32 is even there
	}
	return o.pow64By(x, xw, int64(f))
}

// pow64By returns x^k: for k ≥ 0 the squares up to k's top bit, each
// multiplied in where k has its bit; for k ≥ 64 an even x gives 0 and an
// odd one x^(k mod 2⁶²), odd numbers having orders dividing 2⁶² modulo
// 2⁶⁴; for k < 0 [x = ±1]·x^(k mod 2).
func (o wideOps) pow64By(x, xw *value, k int64) (*value, error) {
	if k < 0 {
		one, err := o.unit(x, k)
		if err != nil {
			return nil, err
		}
		if k%2 == 0 {
			return o.extend(one)
		}
		return o.times(xw, one)
	}
	if k < 64 {
		return o.pow64Bits(x, xw, k)
	}
	odd, err := o.layer(x, onnx.Int32, false, append([]step{o.fpRow(sMulRow, 0.5), step{kind: sRound, fp: true}, o.fpRow(sMulRow, -2),
		fpT(sAddTensor, x), step{kind: sSquare, fp: true}}, o.toInt()...)...)
	if err != nil {
		return nil, err
	}
	p, err := o.pow64Bits(x, xw, k&(1<<62-1))
	if err != nil {
		return nil, err
	}
	return o.times(p, odd)
}

// pow64Bits returns x^k for 0 ≤ k, by the squares up to k's top bit.
func (o wideOps) pow64Bits(x, xw *value, k int64) (*value, error) {
	if k == 0 {
		one, err := o.unit(x, 0)
		if err != nil {
			return nil, err
		}
		return o.extend(one)
	}
	var p *value
	s := xw
	for j := range bits.Len64(uint64(k)) {
		var err error
		if j > 0 {
			if s, err = o.mul(s, s); err != nil {
				return nil, err
			}
		}
		if k>>j&1 == 0 {
			continue
		}
		if p == nil {
			p = s
		} else if p, err = o.mul(p, s); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// times returns w times the int32 0/1 tensor m.
func (o wideOps) times(w, m *value) (*value, error) {
	lo, err := o.layer(w.words[0], onnx.Uint32, false, intT(sMulTensor, m))
	if err != nil {
		return nil, err
	}
	hi, err := o.layer(w.words[1], onnx.Uint32, false, intT(sMulTensor, m))
	if err != nil {
		return nil, err
	}
	return wideValue(onnx.Int64, lo, hi), nil
}

// unit returns, as int32, 1 for k = 0 and [x = ±1] for k < 0.
func (o wideOps) unit(x *value, k int64) (*value, error) {
	if k == 0 {
		return o.layer(x, onnx.Int32, false, append([]step{o.fpRow(sMulRow, 0), o.fpRow(sAddRow, 1)}, o.toInt()...)...)
	}
	nu, err := o.notUnit(x)
	if err != nil {
		return nil, err
	}
	return o.layer(nu, onnx.Int32, false, append([]step{o.fpRow(sMulRow, -1), o.fpRow(sAddRow, 1)}, o.toInt()...)...)
}

// extend returns the int32 v ≥ 0 as a 64-bit integer.
func (o wideOps) extend(v *value) (*value, error) {
	hi, err := o.layer(v, onnx.Uint32, false, o.intRow(sMulRow, 0))
	if err != nil {
		return nil, err
	}
	return wideValue(onnx.Int64, v, hi), nil
}

// pow64Ints returns x^y for the integer constant y of several values, laid
// out as int32 lanes as x is: bits up to the largest value's top one.
func (o wideOps) pow64Ints(x, xw, y *value) (*value, error) {
	idx := broadcastIndex(x.shape, y.shape)
	e := make([]int64, len(idx))
	for k, i := range idx {
		e[k] = clampExp(y.i[i])
	}
	ev := constInt(y.name, onnx.Int32, x.shape, e)
	ev.lay, ev.elem = x.root().lay, i32
	// A negative value needs bit 0 only, its parity.
	return o.squares64(x, xw, ev, nil, bits.Len64(uint64(max(slices.Max(e), 1))))
}

// fracFloat returns trunc(e^(y·ln x)) of the fp32 integers x, saturated to
// [0, 2⁶³ − 2⁴⁰], in fp32, times the fp32 0/1 tensor mask if there is one;
// mul multiplies by y.
func (o wideOps) fracFloat(x *value, mul step, mask *value) (*value, error) {
	st := []step{{kind: sLog, fp: true}, mul, {kind: sExp, fp: true},
		o.fpRow(sMaxRow, 0), o.fpRow(sMinRow, 0x1p63-0x1p40), floorStep()}
	if mask != nil {
		st = append(st, fpT(sMulTensor, mask))
	}
	return o.layer(x, onnx.Float, true, st...)
}

// pow64Tensor returns x^y for the INT64 or FLOAT tensor y.
func (o wideOps) pow64Tensor(x, xw, y *value) (*value, error) {
	fp := y.typ == onnx.Float
	n := 25 // an INT64 y is within ±2²⁴
	var frac *value
	var err error
	pre := []step{}
	if fp {
		n = 31
		pre = []step{o.fpRow(sMinRow, maxExp64), o.fpRow(sMaxRow, -(1 << 31))}
		if frac, err = o.layer(y, onnx.Float, true, step{kind: sRound, fp: true}, fpT(sEqTensor, y), o.fpRow(sMulRow, -1), o.fpRow(sAddRow, 1)); err != nil {
			return nil, err
		}
	}
	e, err := o.roundInt32(y, pre...)
	if err != nil {
		return nil, err
	}
	if frac == nil {
		return o.squares64(x, xw, e, nil, n)
	}
	v, err := o.fracFloat(x, fpT(sMulTensor, y), frac)
	if err != nil {
		return nil, err
	}
	fw, err := o.fromFloat(v)
	if err != nil {
		return nil, err
	}
	return o.squares64(x, xw, e, &fracPart{mask: frac, value: fw}, n)
}

// fracPart is the power of a FLOAT y that is not an integer, where mask
// is 1.
type fracPart struct{ mask, value *value }

// squares64 returns ∏ₖ (1 + bₖ·(sₖ − 1)) over bits k < n of the int32
// exponent e, times keep = 1 − max(lt(e, 0)·[x ≠ ±1], frac's mask), plus
// frac's value.
func (o wideOps) squares64(x, xw, e *value, frac *fracPart, n int) (*value, error) {
	nu, err := o.notUnit(x)
	if err != nil {
		return nil, err
	}
	ks := []step{o.toFP(), o.fpRow(sLtRow, 0), fpT(sMulTensor, nu)}
	if frac != nil {
		ks = append(ks, fpT(sMaxTensor, frac.mask))
	}
	keep, err := o.layer(e, onnx.Int32, false, append(append(ks, o.fpRow(sMulRow, -1), o.fpRow(sAddRow, 1)), o.toInt()...)...)
	if err != nil {
		return nil, err
	}
	var p *value
	s := xw
	for k := range n {
		if k > 0 {
			if s, err = o.mul(s, s); err != nil {
				return nil, err
			}
		}
		b, err := o.layer(e, onnx.Int32, false, append(o.bit(k), o.toInt()...)...)
		if err != nil {
			return nil, err
		}
		lo, err := o.layer(s.words[0], onnx.Uint32, false, o.intRow(sAddRow, -1), intT(sMulTensor, b), o.intRow(sAddRow, 1))
		if err != nil {
			return nil, err
		}
		hi, err := o.layer(s.words[1], onnx.Uint32, false, intT(sMulTensor, b))
		if err != nil {
			return nil, err
		}
		f := wideValue(onnx.Int64, lo, hi)
		if p == nil {
			p = f
		} else if p, err = o.mul(p, f); err != nil {
			return nil, err
		}
	}
	var w [2]*value
	for k := range w {
		st := []step{intT(sMulTensor, keep)}
		if frac != nil {
			st = append(st, intT(sAddTensor, frac.value.words[k]))
		}
		if w[k], err = o.layer(p.words[k], onnx.Uint32, false, st...); err != nil {
			return nil, err
		}
	}
	return wideValue(onnx.Int64, w[0], w[1]), nil
}
