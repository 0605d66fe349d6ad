package onnx

// The narrow floating-point formats: FLOAT16, BFLOAT16 and the four
// float8 formats, decoded to float32 (every value of each is a float32 value,
// so decoding is exact) and encoded from float32 as ONNX's Cast does: round
// to nearest even, and for float8 out-of-range values saturated or not (the
// Cast's saturate attribute).

import (
	"fmt"
	"math"
)

// minifloat describes a binary floating-point format of at most 16 bits.
type minifloat struct {
	ebits, mbits int
	bias         int
	// inf says the format has infinities (all-ones exponent, zero
	// mantissa) and NaNs on the rest of that exponent, as IEEE 754 does.
	inf bool
	// uz says the format has no negative zero: its bit pattern 1000…0 is
	// the only NaN (the FNUZ formats).
	uz bool
	// fn says the format has no infinities and its only NaNs are the
	// patterns with all exponent and mantissa bits set (E4M3FN).
	fn bool
	// finite says every pattern is a finite value (FLOAT4E2M1): values
	// beyond it saturate whatever the Cast says, and NaN becomes −0, as
	// onnx's reference converts.
	finite bool
}

var (
	fmtFloat16  = minifloat{ebits: 5, mbits: 10, bias: 15, inf: true}
	fmtBfloat16 = minifloat{ebits: 8, mbits: 7, bias: 127, inf: true}
	fmtE4M3FN   = minifloat{ebits: 4, mbits: 3, bias: 7, fn: true}
	fmtE4M3FNUZ = minifloat{ebits: 4, mbits: 3, bias: 8, uz: true}
	fmtE5M2     = minifloat{ebits: 5, mbits: 2, bias: 15, inf: true}
	fmtE5M2FNUZ = minifloat{ebits: 5, mbits: 2, bias: 16, uz: true}
	fmtE2M1     = minifloat{ebits: 2, mbits: 1, bias: 1, finite: true}
)

// minifloatOf returns the format of a narrow floating-point type.
func minifloatOf(t DataType) (minifloat, bool) {
	switch t {
	case Float16:
		return fmtFloat16, true
	case Bfloat16:
		return fmtBfloat16, true
	case Float8E4M3FN:
		return fmtE4M3FN, true
	case Float8E4M3FNUZ:
		return fmtE4M3FNUZ, true
	case Float8E5M2:
		return fmtE5M2, true
	case Float8E5M2FNUZ:
		return fmtE5M2FNUZ, true
	case Float4E2M1:
		return fmtE2M1, true
	}
	return minifloat{}, false
}

func (f minifloat) bits() int       { return 1 + f.ebits + f.mbits }
func (f minifloat) signBit() uint32 { return 1 << (f.ebits + f.mbits) }
func (f minifloat) expMax() int     { return 1<<f.ebits - 1 }

// maxFinite is the largest finite value of the format.
func (f minifloat) maxFinite() float64 {
	e, m := f.expMax(), 1<<f.mbits-1
	switch {
	case f.inf:
		e-- // the top exponent is for infinities and NaNs
	case f.fn:
		m-- // all ones is NaN
	}
	return math.Ldexp(1+float64(m)/float64(int(1)<<f.mbits), e-f.bias)
}

// nan is the format's quiet NaN of sign bit s (ignored where the format
// has one NaN).
func (f minifloat) nan(s uint32) uint32 {
	switch {
	case f.uz, f.finite:
		return f.signBit()
	case f.fn:
		return s | (f.signBit() - 1)
	}
	return s | uint32(f.expMax())<<f.mbits | 1<<(f.mbits-1)
}

// decode returns the value of bit pattern b.
func (f minifloat) decode(b uint32) float32 {
	b &= 1<<f.bits() - 1
	neg := b&f.signBit() != 0
	e := int(b>>f.mbits) & f.expMax()
	m := b & (1<<f.mbits - 1)
	switch {
	case f.uz && b == f.signBit(), f.fn && e == f.expMax() && m == 1<<f.mbits-1, f.inf && e == f.expMax() && m != 0:
		return quietNaN(neg)
	case f.inf && e == f.expMax():
		return float32(math.Inf(sign(neg)))
	}
	var v float64
	if e == 0 {
		v = math.Ldexp(float64(m), 1-f.bias-f.mbits)
	} else {
		v = math.Ldexp(float64(m|1<<f.mbits), e-f.bias-f.mbits)
	}
	if neg {
		v = -v
	}
	return float32(v)
}

// quietNaN is float32's quiet NaN of the sign neg, as onnx's reference
// decodes a NaN (the FNUZ formats' one NaN is 1000…0, so negative).
func quietNaN(neg bool) float32 {
	b := uint32(0x7fc00000)
	if neg {
		b |= 1 << 31
	}
	return math.Float32frombits(b)
}

func sign(neg bool) int {
	if neg {
		return -1
	}
	return 1
}

// encode returns the bit pattern of x rounded to nearest even. Beyond the
// largest finite value, saturate gives it (of x's sign, infinities
// included, as onnx's reference does); otherwise the result is infinity
// where the format has one and NaN where it has not. The FNUZ formats have
// no negative zero: a negative value that rounds to zero is +0.
func (f minifloat) encode(x float32, saturate bool) uint32 {
	saturate = saturate || f.finite
	var s uint32
	if math.Signbit(float64(x)) {
		s = f.signBit()
	}
	v := math.Abs(float64(x))
	switch {
	case math.IsNaN(v):
		return f.nan(s)
	case math.IsInf(v, 0) && !saturate:
		if f.inf {
			return s | uint32(f.expMax())<<f.mbits
		}
		return f.nan(s)
	}
	// The quantum at v's binade, never below the subnormals'.
	_, exp := math.Frexp(v) // v = frac·2^exp, frac in [0.5, 1)
	e := max(exp-1, 1-f.bias)
	q := math.Ldexp(1, e-f.mbits)
	r := math.RoundToEven(v/q) * q
	if math.IsInf(v, 0) || r > f.maxFinite() {
		switch {
		case saturate:
			r = f.maxFinite()
		case f.inf:
			return s | uint32(f.expMax())<<f.mbits
		default:
			return f.nan(s)
		}
	}
	if r == 0 {
		if f.uz {
			return 0
		}
		return s
	}
	_, exp = math.Frexp(r)
	if exp-1 < 1-f.bias { // subnormal
		return s | uint32(r/math.Ldexp(1, 1-f.bias-f.mbits))
	}
	m := uint32(r/math.Ldexp(1, exp-1-f.mbits)) - 1<<f.mbits
	return s | uint32(exp-1+f.bias)<<f.mbits | m
}

// FLOAT8E8M0 is an exponent alone: 2^(b−127), no sign, no zero, 0xFF NaN.

// decodeE8M0 returns the value of b.
func decodeE8M0(b byte) float32 {
	switch b {
	case 0xff:
		return quietNaN(false)
	case 0:
		return math.Float32frombits(0x00400000) // 2⁻¹²⁷, an fp32 subnormal
	}
	return math.Float32frombits(uint32(b) << 23)
}

// encodeE8M0 converts x as onnx's reference does: x's fp32 exponent, its
// sign ignored, NaN and infinities 0xFF; the mantissa rounds it "up" (any
// fraction), "down" (none) or to "nearest" (a half or more, but an exact
// half at exponent 0); saturate keeps 2¹²⁷ from rounding up to NaN.
func encodeE8M0(x float32, saturate bool, roundMode string) (byte, error) {
	f := math.Float32bits(x)
	e := f >> 23 & 0xff
	if e == 0xff {
		return 0xff, nil
	}
	var up bool
	switch roundMode {
	case "up":
		up = f&0x7fffff != 0
	case "down":
	case "nearest":
		g, r, s := f&0x400000 != 0, f&0x200000 != 0, f&0x1fffff != 0
		up = g && (r || s || e > 0)
	default:
		return 0, fmt.Errorf("FLOAT8E8M0 round_mode %q, want up, down or nearest", roundMode)
	}
	if up && !(saturate && e == 0xfe) {
		e++
	}
	return byte(e), nil
}
