package alidnn_test

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// powBases are the INT32 values at which a power turns: 0, ±1, ±2, ±3, the
// ends of INT32, odd and even values of every width.
func powBases(r *rand.Rand) []int64 {
	b := []int64{0, 1, -1, 2, -2, 3, -3, 1<<31 - 1, -1 << 31, 5, -7, 6, 1 << 16, 65537, 12345, -1 << 30, 1<<31 - 2}
	for range 8 {
		v := int64(int32(r.Uint32()))
		b = append(b, v|1, v&^1)
	}
	return b
}

// wantPow is x^y modulo 2³² (2^bits) for an integer y ≥ 0, and for y < 0
// onnxruntime's truncated C pow: 1 for x = 1, ±1 by y's parity for x = −1,
// 0 for any other x (for x = 0, where C's is +Inf, intpow.go's choice).
func wantPow(x int64, y *big.Int, bits uint) int64 {
	if y.Sign() < 0 {
		switch {
		case x == 1, x == -1 && y.Bit(0) == 0:
			return 1
		case x == -1:
			return -1
		}
		return 0
	}
	if bits == 64 {
		m := new(big.Int).Lsh(big.NewInt(1), 64)
		return int64(new(big.Int).Exp(new(big.Int).Mod(big.NewInt(x), m), y, m).Uint64())
	}
	m := new(big.Int).Lsh(big.NewInt(1), 32)
	p := new(big.Int).Exp(new(big.Int).Mod(big.NewInt(x), m), y, m)
	return int64(int32(uint32(p.Uint64())))
}

// runPow runs Pow of the input x of type typ (INT32 or INT64) by y, a
// graph input or, if constant, an initializer, and returns the powers.
func runPow(t *testing.T, typ onnx.DataType, x []int64, y *onnx.Tensor, constant bool) []int64 {
	t.Helper()
	n := int64(len(x))
	g := &onnx.Graph{
		Nodes:   []*onnx.Node{{OpType: "Pow", Inputs: []string{"x", "y"}, Outputs: []string{"p"}}},
		Inputs:  []onnx.ValueInfo{typed(vinfo("x", n), typ)},
		Outputs: []onnx.ValueInfo{typed(vinfo("p", n), typ)},
	}
	ins := []*onnx.Tensor{ints64("x", typ, []int64{n}, x...)}
	if constant {
		g.Initializers = []*onnx.Tensor{y}
	} else {
		g.Inputs = append(g.Inputs, typed(vinfo("y", y.Dims...), y.DataType))
		ins = append(ins, y)
	}
	got, err := runGraphResult(t, g, ins...).Outputs[0].Int64s()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// cross pairs every base with every exponent.
func cross[E any](bases []int64, exps []E) (x []int64, y []E) {
	for _, b := range bases {
		for _, e := range exps {
			x, y = append(x, b), append(y, e)
		}
	}
	return x, y
}

// wantPows is wantPow of each pair of x and y, and y's values printed.
func wantPows(x, y []int64, bits uint) (want []int64, ys []string) {
	for k := range x {
		want, ys = append(want, wantPow(x[k], big.NewInt(y[k]), bits)), append(ys, big.NewInt(y[k]).String())
	}
	return want, ys
}

// checkPows compares got with want, reporting the first few differences.
func checkPows(t *testing.T, what string, x []int64, y []string, got, want []int64) {
	t.Helper()
	bad := 0
	for k := range want {
		if got[k] != want[k] {
			if bad++; bad <= 10 {
				t.Errorf("%s: %d^%s = %d, want %d", what, x[k], y[k], got[k], want[k])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d powers wrong", what, bad, len(want))
	}
}

// TestIntPow raises INT32 inputs to INT32 exponents on the engine, every
// base by 0 to 40, 2³⁰, 2³¹ − 1, its neighbours and negatives, and 4000
// random pairs, against wrapping int32 arithmetic.
func TestIntPow(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 1))
	exps := []int64{1<<30 - 1, 1 << 30, 1<<30 + 1, 1<<31 - 1, 1<<31 - 2, -1, -2, -3, -40, -1 << 31, -1<<31 + 1}
	for e := range int64(41) {
		exps = append(exps, e)
	}
	x, y := cross(powBases(r), exps)
	for range 4000 {
		e := int64(int32(r.Uint32())) >> r.IntN(32)
		x, y = append(x, int64(int32(r.Uint32()))>>r.IntN(32)), append(y, e)
	}
	got := runPow(t, onnx.Int32, x, ints64("y", onnx.Int32, []int64{int64(len(y))}, y...), false)
	want, ys := wantPows(x, y, 32)
	checkPows(t, "INT32", x, ys, got, want)
}

// TestIntPowFloat raises INT32 inputs to FLOAT exponents: integers of every
// magnitude (2²⁴ to 2³¹ and beyond, where fp32 has gaps, and negative) are
// exact, wrapping; other values are the fp32 power truncated, within
// intpow.go's bound of the float64 one.
func TestIntPowFloat(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 2))
	exps := []float32{0, 1, 2, 3, 4, 5, 31, 32, 33, 40, 1 << 24, 1<<24 + 2, 1<<25 + 4, 1<<29 + 64, 1 << 30, 1<<30 + 64, 1<<31 - 128,
		1 << 31, 1<<31 + 256, 1 << 32, 1e10, 1 << 40, 1e20, 3e38, -1, -2, -3, -1 << 24, -1 << 31, -1e10, -3e38}
	for k := 24; k < 31; k++ {
		exps = append(exps, float32(int64(1)<<k+int64(r.IntN(1<<(k-23)))<<(k-23)))
	}
	fracs := []float32{0.5, 1.5, 2.5, -0.5, -2.5, 0.25, 3.7, 10.1, 30.5, 1e-3}
	x, y := cross(powBases(r), append(exps, fracs...))
	for range 1000 {
		x, y = append(x, int64(r.IntN(200))-20), append(y, float32(r.IntN(64))/8)
	}
	got := runPow(t, onnx.Int32, x, onnx.NewFloat32("y", []int64{int64(len(y))}, y), false)
	checkFloatPows(t, "FLOAT", x, y, got, 32)
}

// checkFloatPows checks x^y for FLOAT exponents: exact at integers, within
// intpow.go's bound elsewhere; of INT64 bases (bits 64) modulo 2⁶⁴ and
// saturated at 2⁶³ − 2⁴⁰ (widepow.go).
func checkFloatPows(t *testing.T, what string, x []int64, y []float32, got []int64, bits uint) {
	t.Helper()
	top := float64(1<<31 - 128)
	if bits == 64 {
		top = 0x1p63 - 0x1p40
	}
	want, ys := make([]int64, len(x)), make([]string, len(x))
	for k := range x {
		f := float64(y[k])
		ys[k] = big.NewFloat(f).String()
		if f == math.Trunc(f) {
			e, _ := big.NewFloat(f).Int(nil)
			want[k] = wantPow(x[k], e, bits)
			continue
		}
		// The fp32 power is within tol of x^y, relatively, truncated
		// and saturated at top; 0 for negative x.
		want[k] = got[k]
		w := math.Pow(float64(x[k]), f)
		tol := math.Ldexp(1+math.Abs(f)*(1+math.Abs(math.Log(float64(x[k])))), -23)
		lo, hi := math.Trunc(min(w*(1-tol), top)), math.Trunc(min(w*(1+tol), top))
		switch {
		case x[k] < 0:
			lo, hi = 0, 0
		case x[k] == 0: // ln 0 = −Inf
			lo, hi = math.Trunc(min(w, top)), math.Trunc(min(w, top))
		}
		if g := float64(got[k]); g < lo || g > hi {
			want[k] = int64(math.Trunc(min(w, top)))
		}
	}
	checkPows(t, what, x, ys, got, want)
}

// TestIntPowConst raises INT32 inputs to constant exponents: one value
// (integers reduced at compile time, a fraction by fracPow) or one per
// element, INT32, INT64 and FLOAT.
func TestIntPowConst(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 3))
	x := powBases(r)
	n := []int64{int64(len(x))}
	for _, e := range []int64{0, 1, 2, 3, 5, 31, 32, 33, 1 << 30, 1<<31 - 1, 1<<40 + 3, -1, -2, -1<<40 - 1} {
		got := runPow(t, onnx.Int32, x, ints64("y", onnx.Int64, nil, e), true)
		want, ys := wantPows(x, slices.Repeat([]int64{e}, len(x)), 32)
		checkPows(t, "INT64 constant", x, ys, got, want)
	}
	for _, f := range []float32{7, 1 << 31, 3e38, -5, -1e10, 2.5, -0.5} {
		y := make([]float32, len(x))
		for k := range y {
			y[k] = f
		}
		checkFloatPows(t, "FLOAT constant", x, y, runPow(t, onnx.Int32, x, onnx.NewFloat32("y", nil, []float32{f}), true), 32)
	}
	// One exponent per element.
	ye, yf := make([]int64, len(x)), make([]float32, len(x))
	for k := range x {
		ye[k], yf[k] = int64(k)*0x9E3779B9%(1<<33)-1<<32, float32(k%9)*0.75-2
	}
	got := runPow(t, onnx.Int32, x, ints64("y", onnx.Int64, n, ye...), true)
	want, ys := wantPows(x, ye, 32)
	checkPows(t, "INT64 constants", x, ys, got, want)
	checkFloatPows(t, "FLOAT constants", x, yf, runPow(t, onnx.Int32, x, onnx.NewFloat32("y", n, yf), true), 32)
}

// TestIntPowComputed raises INT32 inputs to a FLOAT exponent computed on
// the engine, 1.5 − y of the input y.
func TestIntPowComputed(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 4))
	var x []int64
	var y, e []float32
	for _, b := range powBases(r) {
		for k := range 12 {
			x, y = append(x, b), append(y, float32(k)-5.5)
			e = append(e, 1.5-y[len(y)-1])
		}
	}
	n := int64(len(x))
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{onnx.NewFloat32("h", nil, []float32{1.5})},
		Nodes: []*onnx.Node{{OpType: "Sub", Inputs: []string{"h", "y"}, Outputs: []string{"e"}},
			{OpType: "Pow", Inputs: []string{"x", "e"}, Outputs: []string{"p"}}},
		Inputs:  []onnx.ValueInfo{typed(vinfo("x", n), onnx.Int32), vinfo("y", n)},
		Outputs: []onnx.ValueInfo{typed(vinfo("p", n), onnx.Int32)},
	}
	got, err := runGraphResult(t, g, ints64("x", onnx.Int32, []int64{n}, x...), onnx.NewFloat32("y", []int64{n}, y)).Outputs[0].Int64s()
	if err != nil {
		t.Fatal(err)
	}
	checkFloatPows(t, "computed FLOAT", x, e, got, 32)
}
