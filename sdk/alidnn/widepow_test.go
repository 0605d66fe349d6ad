package alidnn_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// widePowBases are INT64 values at which a power turns, within the ±2²⁴
// an INT64 input is staged in: 0, ±1, ±2, ±3, the ends, odd and even
// values of every width.
func widePowBases(r *rand.Rand) []int64 {
	b := []int64{0, 1, -1, 2, -2, 3, -3, 7, -7, 1 << 24, -1 << 24, 1<<24 - 1, 1<<23 + 1, 12345, -65537}
	for range 6 {
		v := int64(r.Int32N(1<<25)) - 1<<24
		b = append(b, v|1, v&^1)
	}
	return b
}

// TestWidePow raises INT64 inputs to INT64 exponents (0 to 70, around 2²⁴,
// negatives, random) on the engine, against x^y modulo 2⁶⁴: the squares
// and products cross both words.
func TestWidePow(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 5))
	exps := []int64{1 << 24, 1<<24 - 1, 1<<23 + 5, -1, -2, -3, -1 << 24}
	for e := range int64(71) {
		exps = append(exps, e)
	}
	x, y := cross(widePowBases(r), exps)
	for range 500 {
		x, y = append(x, int64(r.Int32N(1<<25))-1<<24), append(y, (int64(r.Int32N(1<<25))-1<<24)>>r.IntN(25))
	}
	got := runPow(t, onnx.Int64, x, ints64("y", onnx.Int64, []int64{int64(len(y))}, y...), false)
	want, ys := wantPows(x, y, 64)
	checkPows(t, "INT64", x, ys, got, want)
}

// TestWidePowFloat raises INT64 inputs to FLOAT exponents: integers exact
// modulo 2⁶⁴ up to 2³¹ − 128 (beyond, where |x| ≥ 2 overflows INT64 and
// ONNX leaves the value undefined, only x = 0, ±1 are checked), other
// values the fp32 power truncated; and to constant exponents, one value or
// one per element, exact modulo 2⁶⁴ for integers of any magnitude.
func TestWidePowFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 6))
	exps := []float32{0, 1, 2, 5, 31, 32, 33, 62, 63, 64, 65, 1 << 24, 1<<25 + 4, 1 << 30, 1<<31 - 128, -1, -2, -1 << 24,
		0.5, 1.5, 2.5, -0.5, 3.7, 10.1, 1e-3}
	x, y := cross(widePowBases(r), exps)
	for range 300 {
		x, y = append(x, int64(r.IntN(200))-20), append(y, float32(r.IntN(64))/8)
	}
	checkFloatPows(t, "FLOAT", x, y, runPow(t, onnx.Int64, x, onnx.NewFloat32("y", []int64{int64(len(y))}, y), false), 64)

	units := []int64{0, 1, -1}
	for _, f := range []float32{1 << 31, 1e20, 3e38} {
		got := runPow(t, onnx.Int64, units, onnx.NewFloat32("y", []int64{3}, []float32{f, f, f}), false)
		checkFloatPows(t, "FLOAT beyond int32", units, []float32{f, f, f}, got, 64)
	}

	x = widePowBases(r)
	for _, e := range []int64{0, 1, 2, 3, 5, 62, 63, 64, 65, 1 << 40, 1<<62 + 3, 1<<63 - 1, -1, -2, -1<<40 - 1} {
		got := runPow(t, onnx.Int64, x, ints64("y", onnx.Int64, nil, e), true)
		want, ys := wantPows(x, slices.Repeat([]int64{e}, len(x)), 64)
		checkPows(t, "INT64 constant", x, ys, got, want)
	}
	for _, f := range []float32{7, 2.5, -5, 1e20, 3e38, -1e20} {
		y := []float32{}
		for range x {
			y = append(y, f)
		}
		checkFloatPows(t, "FLOAT constant", x, y, runPow(t, onnx.Int64, x, onnx.NewFloat32("y", nil, []float32{f}), true), 64)
	}
	ye, yf := make([]int64, len(x)), make([]float32, len(x))
	for k := range x {
		ye[k], yf[k] = int64(k*7%70)-3, float32(k%9)*0.75-2
	}
	n := []int64{int64(len(x))}
	got := runPow(t, onnx.Int64, x, ints64("y", onnx.Int64, n, ye...), true)
	want, ys := wantPows(x, ye, 64)
	checkPows(t, "INT64 constants", x, ys, got, want)
	checkFloatPows(t, "FLOAT constants", x, yf, runPow(t, onnx.Int64, x, onnx.NewFloat32("y", n, yf), true), 64)
}
