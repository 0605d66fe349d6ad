package alidnn_test

import (
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// divEdges are the values at which an integer division's estimate and
// corrections turn: 0, ±1, ±2, the ends of INT32 and UINT32, powers of
// two and their neighbours (as UINT32 bit patterns where negative).
func divEdges(typ onnx.DataType) []int64 {
	e := []int64{0, 1, 2, 3, 7, 1<<31 - 1, 1 << 31, 1<<31 + 1}
	for k := 2; k < 32; k++ {
		e = append(e, 1<<k-1, 1<<k, 1<<k+1)
	}
	e = append(e, 1<<24+3, 3000000000, 2863311530, 1431655765, 65535*65535)
	out := []int64{}
	for _, v := range e {
		if typ == onnx.Int32 {
			if v < 1<<31 {
				out = append(out, v, -v)
			} else if v == 1<<31 {
				out = append(out, -v)
			}
			continue
		}
		out = append(out, v, 1<<32-1-v) // 2³²−1, 2³²−2, …
	}
	return out
}

// randomWidth is a value of a random bit length up to 32 (negative half
// the time for INT32), so that every magnitude of quotient turns up.
func randomWidth(r *rand.Rand, typ onnx.DataType) int64 {
	n := r.IntN(33)
	v := int64(r.Uint64() & (1<<n - 1))
	if typ == onnx.Int32 {
		v >>= 1
		if r.IntN(2) == 0 {
			v = -v
		}
		if n == 32 && r.IntN(8) == 0 {
			v = -1 << 31
		}
	}
	return v
}

// TestIntDiv divides INT32 and UINT32 inputs on the engine, every edge by
// every edge and 20 000 random pairs of all widths, against Go's division
// (truncating; −2³¹ / −1 wraps to −2³¹). A zero divisor may give anything
// but must run.
func TestIntDiv(t *testing.T) {
	for _, typ := range []onnx.DataType{onnx.Int32, onnx.Uint32} {
		edges := divEdges(typ)
		var a, b []int64
		for _, x := range edges {
			for _, y := range edges {
				a, b = append(a, x), append(b, y)
			}
		}
		r := rand.New(rand.NewPCG(7, uint64(typ)))
		for range 20000 {
			a, b = append(a, randomWidth(r, typ)), append(b, randomWidth(r, typ))
		}
		n := int64(len(a))
		g := &onnx.Graph{
			Nodes:   []*onnx.Node{{OpType: "Div", Inputs: []string{"a", "b"}, Outputs: []string{"y"}}},
			Inputs:  []onnx.ValueInfo{typed(vinfo("a", n), typ), typed(vinfo("b", n), typ)},
			Outputs: []onnx.ValueInfo{typed(vinfo("y", n), typ)},
		}
		res := runGraphResult(t, g, ints64("a", typ, []int64{n}, a...), ints64("b", typ, []int64{n}, b...))
		got, err := res.Outputs[0].Int64s()
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for k := range a {
			if b[k] == 0 {
				continue
			}
			var want int64
			if typ == onnx.Int32 {
				want = int64(int32(a[k]) / int32(b[k])) // Go wraps −2³¹ / −1
			} else {
				q, _ := bits.Div32(0, uint32(a[k]), uint32(b[k]))
				want = int64(q)
			}
			if got[k] != want {
				if bad++; bad <= 10 {
					t.Errorf("%v %d / %d = %d, want %d", typ, a[k], b[k], got[k], want)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%v: %d of %d quotients wrong", typ, bad, len(a))
		}
	}
}
