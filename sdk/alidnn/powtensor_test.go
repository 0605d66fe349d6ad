package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestPowTensor runs Pow of x by per-element exponents y (both graph
// inputs, and y a [16] row broadcast) over C's special cases — ±0, ±1, ±Inf,
// NaN on either side, negative x by odd, even and non-integer y — and
// ordinary values, against float64's math.Pow (which follows C): special
// values bit for bit (a NaN only as a NaN), the rest within 4e-6 relative
// (exp and log's fp32 rounding of e^(y·ln|x|)).
func TestPowTensor(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	nz := math.Copysign(0, -1)
	pairs := [][2]float64{
		{0, 3}, {nz, 3}, {nz, -3}, {0, -3}, {nz, 2}, {nz, -2.5}, {nz, 2.5}, {0, 0}, {nan, 0}, {1, nan}, {1, inf}, {-1, inf},
		{-1, -inf}, {-1, nan}, {-1, 3}, {-1, 2}, {-2, 3}, {-2, 2}, {-2, 0.5}, {-2, -3}, {-2, inf}, {-0.5, inf}, {-2, -inf},
		{-inf, 3}, {-inf, 2}, {-inf, 2.5}, {-inf, -3}, {-inf, -2.5}, {inf, 2}, {inf, -2}, {0.5, inf}, {2, -inf}, {nan, 1},
		{2, nan}, {3, 6}, {2, 10}, {-3, 5}, {1.5, -2.25}, {7, 0.5}, {-7, 21}, {10, -5}, {2, 126}, {-2, -127}, {0.1, 3.3},
	}
	for len(pairs)%16 != 0 {
		pairs = append(pairs, [2]float64{1.25, float64(len(pairs)%5) - 2})
	}
	n := len(pairs)
	xf, yf := make([]float32, n), make([]float32, n)
	for k, p := range pairs {
		xf[k], yf[k] = float32(p[0]), float32(p[1])
	}
	check := func(t *testing.T, got []float32, yOf func(k int) float64) {
		for k, v := range got {
			x, y := float64(xf[k]), yOf(k)
			w := math.Pow(x, y)
			g := float64(v)
			switch {
			case math.IsNaN(w) || math.IsNaN(g):
				if math.IsNaN(w) != math.IsNaN(g) {
					t.Errorf("pow(%v, %v) = %v, want %v", x, y, g, w)
				}
			case w == 0 || math.IsInf(w, 0) || w == math.Trunc(w) && math.Abs(w) == 1:
				if math.Float64bits(g) != math.Float64bits(float64(float32(w))) {
					t.Errorf("pow(%v, %v) = %v, want %v", x, y, g, w)
				}
			case math.Abs(g-w) > 4e-6*math.Abs(w):
				t.Errorf("pow(%v, %v) = %v, want %v (relative error %.2g)", x, y, g, w, math.Abs(g-w)/math.Abs(w))
			}
		}
	}
	t.Run("elementwise", func(t *testing.T) {
		g := &onnx.Graph{
			Inputs:  []onnx.ValueInfo{vinfo("x", 2, int64(n/2)), vinfo("y", 2, int64(n/2))},
			Nodes:   []*onnx.Node{{Name: "pow", OpType: "Pow", Inputs: []string{"x", "y"}, Outputs: []string{"p"}}},
			Outputs: []onnx.ValueInfo{{Name: "p"}},
		}
		got := runGraph(t, g, onnx.NewFloat32("x", []int64{2, int64(n / 2)}, xf), onnx.NewFloat32("y", []int64{2, int64(n / 2)}, yf))
		check(t, got, func(k int) float64 { return float64(yf[k]) })
	})
	t.Run("constant base", func(t *testing.T) {
		// x a constant row of special bases, y computed per element.
		row := xf[:16]
		g := &onnx.Graph{
			Inputs:       []onnx.ValueInfo{vinfo("y", int64(n/16), 16)},
			Initializers: []*onnx.Tensor{onnx.NewFloat32("x", []int64{16}, row)},
			Nodes:        []*onnx.Node{{Name: "pow", OpType: "Pow", Inputs: []string{"x", "y"}, Outputs: []string{"p"}}},
			Outputs:      []onnx.ValueInfo{{Name: "p"}},
		}
		got := runGraph(t, g, onnx.NewFloat32("y", []int64{int64(n / 16), 16}, yf))
		for k, v := range got {
			x, y := float64(row[k%16]), float64(yf[k])
			w := math.Pow(x, y)
			if math.IsNaN(w) != math.IsNaN(float64(v)) || !math.IsNaN(w) && math.Abs(float64(v)-w) > 4e-6*math.Abs(w) ||
				(w == 0 || math.IsInf(w, 0)) && math.Float64bits(float64(v)) != math.Float64bits(float64(float32(w))) {
				t.Errorf("pow(%v, %v) = %v, want %v", x, y, v, w)
			}
		}
	})
	t.Run("broadcast", func(t *testing.T) {
		row := []float32{3, -3, 2, -2, 0.5, 0, float32(inf), float32(-inf), float32(nan), 1, -1, 2.5, 6, -0.25, 7, 10}
		g := &onnx.Graph{
			Inputs:  []onnx.ValueInfo{vinfo("x", int64(n/16), 16), vinfo("y", 16)},
			Nodes:   []*onnx.Node{{Name: "pow", OpType: "Pow", Inputs: []string{"x", "y"}, Outputs: []string{"p"}}},
			Outputs: []onnx.ValueInfo{{Name: "p"}},
		}
		got := runGraph(t, g, onnx.NewFloat32("x", []int64{int64(n / 16), 16}, xf), onnx.NewFloat32("y", []int64{16}, row))
		check(t, got, func(k int) float64 { return float64(row[k%16]) })
	})
}
