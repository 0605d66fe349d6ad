package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestErfFolded adds Erf of a constant, folded at compile time, to an
// input.
func TestErfFolded(t *testing.T) {
	dims := []int64{1, 16, 2, 2}
	x, k := ramp("x", dims, 0.5), ramp("k", dims, 0.3)
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", dims...)},
		Initializers: []*onnx.Tensor{k},
		Nodes: []*onnx.Node{
			{Name: "erf", OpType: "Erf", Inputs: []string{"k"}, Outputs: []string{"e"}},
			{Name: "add", OpType: "Add", Inputs: []string{"x", "e"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}
	got := runGraph(t, g, x)
	xf, _ := x.Float32s()
	kf, _ := k.Float32s()
	for i := range got {
		if want := xf[i] + float32(math.Erf(float64(kf[i]))); got[i] != want {
			t.Fatalf("value %d: %g, want %g", i, got[i], want)
		}
	}
}
