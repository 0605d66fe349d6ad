package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestSubtractBroadcast subtracts a broadcast operand from a computed
// tensor: a computed gate per image and channel, and a graph input along
// the last axis (onnx's test_sub_bcast), against float64 arithmetic.
func TestSubtractBroadcast(t *testing.T) {
	t.Run("gate per image and channel", func(t *testing.T) {
		xDims, zDims := []int64{2, 20, 3, 5}, []int64{2, 20, 3, 5}
		g := gateGraph(xDims, zDims, true)
		g.Nodes[3].OpType = "Sub"
		x, z := ramp("x", xDims, 0.5), ramp("z", zDims, -0.3)
		got := runGraph(t, g, z, x)
		xf, _ := x.Float32s()
		zf, _ := z.Float32s()
		want := make([]float64, len(xf))
		for k := range want {
			plane := zf[k/15*15:][:15]
			mean := 0.0
			for _, v := range plane {
				mean += float64(v)
			}
			mean /= 15
			want[k] = math.Max(float64(xf[k]), 0) - math.Min(math.Max(0.2*mean+0.5, 0), 1)
		}
		checkClose(t, got, want)
	})
	t.Run("graph input along the last axis", func(t *testing.T) {
		g := &onnx.Graph{
			Inputs: []onnx.ValueInfo{vinfo("x", 3, 4, 5), vinfo("b", 5)},
			Nodes: []*onnx.Node{
				{Name: "relu", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"a"}},
				{Name: "sub", OpType: "Sub", Inputs: []string{"a", "b"}, Outputs: []string{"y"}},
			},
			Outputs: []onnx.ValueInfo{{Name: "y"}},
		}
		x, b := ramp("x", []int64{3, 4, 5}, 0.25), ramp("b", []int64{5}, 0.7)
		got := runGraph(t, g, x, b)
		xf, _ := x.Float32s()
		bf, _ := b.Float32s()
		want := make([]float64, len(xf))
		for k := range want {
			want[k] = math.Max(float64(xf[k]), 0) - float64(bf[k%5])
		}
		checkClose(t, got, want)
	})
}

// bothNaN reports whether got and want are both NaN: the closeness checks
// fail a NaN against a number (the comparison with a NaN is false, which a
// check written as |got − want| > tol would pass).
func bothNaN(got float32, want float64) bool { return math.IsNaN(float64(got)) && math.IsNaN(want) }

// checkClose fails unless got matches want within 1e-5 + 1e-5·|want|.
func checkClose(t *testing.T, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for k := range want {
		if !(bothNaN(got[k], want[k]) || math.Abs(float64(got[k])-want[k]) <= 1e-5+1e-5*math.Abs(want[k])) {
			t.Fatalf("value %d: %g, want %g", k, got[k], want[k])
		}
	}
}
