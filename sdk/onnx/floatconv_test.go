package onnx

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
)

// TestCastNodeData converts the inputs of onnx's Cast node tests from a
// FLOAT, FLOAT16 or narrow type to a floating-point or 4- or 2-bit type as
// NewFloat and NewInt do, and wants the outputs' bytes exactly.
func TestCastNodeData(t *testing.T) {
	dirs, _ := filepath.Glob(testenv.TestData(t, "onnx", "node", "test_cast_*"))
	checked := 0
	for _, dir := range dirs {
		name := filepath.Base(dir)
		in, err := ReadTensor(filepath.Join(dir, "test_data_set_0", "input_0.pb"))
		if err != nil {
			continue // a type this package does not read
		}
		want, err := ReadTensor(filepath.Join(dir, "test_data_set_0", "output_0.pb"))
		if err != nil {
			continue
		}
		if in.DataType == Double && want.DataType != Float {
			continue // rounded twice through float32: not what Cast does
		}
		got, err := castLike(in, want.DataType, !strings.Contains(name, "no_saturate"))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		checked++
		if !bytes.Equal(got.RawData(), want.RawData()) {
			gf, _ := got.Float32s()
			wf, _ := want.Float32s()
			in32, _ := in.Float32s()
			for k := range wf {
				if math.Float32bits(gf[k]) != math.Float32bits(wf[k]) && !(math.IsNaN(float64(gf[k])) && math.IsNaN(float64(wf[k]))) {
					t.Errorf("%s: element %d (%v): %v, want %v", name, k, in32[k], gf[k], wf[k])
				}
			}
			t.Errorf("%s: % x\nwant % x", name, got.RawData(), want.RawData())
		}
	}
	if checked < 40 {
		t.Errorf("checked %d Cast tests, want at least 40", checked)
	}
}

// castLike converts x to dt as ONNX's Cast from x's type does, where every
// value of x's type is a float32.
func castLike(x *Tensor, dt DataType, saturate bool) (*Tensor, error) {
	var f []float32
	var err error
	if x.DataType.IsFloat() {
		f, err = x.Float32s()
	} else {
		var iv []int64
		iv, err = x.Int64s()
		for _, v := range iv {
			f = append(f, float32(v))
		}
	}
	if err != nil {
		return nil, err
	}
	if dt.IsFloat() {
		return NewFloat("y", dt, x.Dims, f, saturate)
	}
	lo, hi := dt.bounds()
	iv := make([]int64, len(f))
	for k, v := range f {
		w := int64(v) // every test value is an integer
		span := int64(hi) - lo + 1
		iv[k] = ((w-lo)%span+span)%span + lo
	}
	return NewInt("y", dt, x.Dims, iv)
}

func TestMinifloatRoundTrip(t *testing.T) {
	for _, dt := range []DataType{Float16, Bfloat16, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float4E2M1} {
		f, _ := minifloatOf(dt)
		for b := uint32(0); b < 1<<f.bits(); b++ {
			v := f.decode(b)
			if math.IsNaN(float64(v)) {
				if !math.IsNaN(float64(f.decode(f.encode(v, false)))) {
					t.Errorf("%v: NaN %#x does not encode as NaN", dt, b)
				}
				continue
			}
			if got := f.encode(v, false); got != b && !(v == 0 && f.uz) {
				t.Errorf("%v: %#x decodes to %v, which encodes to %#x", dt, b, v, got)
			}
		}
	}
}

// TestE8M0Rounding converts values around powers of two in the three
// round modes, saturated and not, as onnx's reference rounds them.
func TestE8M0Rounding(t *testing.T) {
	for _, tc := range []struct {
		x          float32
		mode       string
		sat        bool
		want       byte
		wantErrNil bool
	}{
		{1, "up", true, 127, true}, {1.125, "up", true, 128, true}, {1.125, "down", true, 127, true},
		{1.375, "nearest", true, 127, true}, {1.5, "nearest", true, 128, true}, {-3, "up", true, 129, true},
		{0x1.8p127, "up", true, 254, true}, {0x1.8p127, "up", false, 255, true},
		{float32(math.Inf(1)), "down", true, 255, true}, {0, "up", true, 0, true}, {1, "sideways", true, 0, false},
	} {
		got, err := encodeE8M0(tc.x, tc.sat, tc.mode)
		if (err == nil) != tc.wantErrNil || err == nil && got != tc.want {
			t.Errorf("%v %s saturate %v: %d (%v), want %d", tc.x, tc.mode, tc.sat, got, err, tc.want)
		}
	}
}

// BenchmarkNewFloat measures the host's read-back conversion of 2¹⁶ fp32
// values to each narrow type (reported per value).
func BenchmarkNewFloat(b *testing.B) {
	f := make([]float32, 1<<16)
	for k := range f {
		f[k] = float32(k-len(f)/2) * 0.37
	}
	for _, dt := range []DataType{Float16, Bfloat16, Float8E4M3FN, Float4E2M1, Float8E8M0} {
		b.Run(dt.String(), func(b *testing.B) {
			for b.Loop() {
				if _, err := NewFloat("y", dt, []int64{int64(len(f))}, f, true); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(f)), "ns/value")
		})
	}
}
