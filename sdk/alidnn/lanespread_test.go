package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestLaneSpread reads a row mean m [1,5,1] of hidden states p [1,5,40]
// as a graph output (so reduced to one lane), and subtracts it from p and
// divides p by its reciprocal, which broadcasts it along the lanes: as
// LayerNormalization's function body does. Against float64.
func TestLaneSpread(t *testing.T) {
	axes, _ := onnx.NewInt("axes", onnx.Int64, []int64{1}, []int64{-1})
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", 1, 5, 8)},
		Initializers: []*onnx.Tensor{axes, ramp("w", []int64{8, 40}, 0.07)},
		Nodes: []*onnx.Node{
			{Name: "mm", OpType: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"p"}},
			{Name: "mean", OpType: "ReduceMean", Inputs: []string{"p", "axes"}, Outputs: []string{"m"}},
			{Name: "sub", OpType: "Sub", Inputs: []string{"p", "m"}, Outputs: []string{"d"}},
			{Name: "rec", OpType: "Reciprocal", Inputs: []string{"m"}, Outputs: []string{"r"}},
			{Name: "div", OpType: "Div", Inputs: []string{"p", "r"}, Outputs: []string{"q"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "m"}, {Name: "d"}, {Name: "q"}},
	}
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 18}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PRODUCTS %d", fp32Products(p))
	// The two spreads are one block product a row each, by one block of
	// ones that the ALU reads for each of p's three blocks; spread to
	// every lane, they were three (80 in all).
	if got := fp32Products(p); got > 60 {
		t.Errorf("%d fp32 block products, want 60: the spreads are copied to every lane", got)
	}
	x := ramp("x", []int64{1, 5, 8}, 0.3)
	res := runResult(t, p, x)
	want := make([][]float64, 3)
	for _, row := range hidden(x) {
		m := 0.0
		for _, v := range row {
			m += v / 40
		}
		want[0] = append(want[0], m)
		for _, v := range row {
			want[1], want[2] = append(want[1], v-m), append(want[2], v*m)
		}
	}
	for k, out := range res.Outputs {
		got, err := out.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		checkCloseAbs(t, got, want[k])
	}
}

// checkCloseAbs is checkClose with the absolute part scaled for values
// that are differences of larger ones (v − mean).
func checkCloseAbs(t *testing.T, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for k := range want {
		if !(bothNaN(got[k], want[k]) || math.Abs(float64(got[k])-want[k]) <= 1e-5+1e-4*math.Abs(want[k])) {
			t.Fatalf("value %d: %g, want %g", k, got[k], want[k])
		}
	}
}

// expandGraph is Expand(Abs(x), to).
func expandGraph(xDims, to []int64) *onnx.Graph {
	shape, _ := onnx.NewInt("to", onnx.Int64, []int64{int64(len(to))}, to)
	return &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", xDims...)},
		Initializers: []*onnx.Tensor{shape},
		Nodes: []*onnx.Node{
			{Name: "abs", OpType: "Abs", Inputs: []string{"x"}, Outputs: []string{"a"}},
			{Name: "expand", OpType: "Expand", Inputs: []string{"a", "to"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}
}

// TestExpandLanes expands a computed [10,1], an infinity among its values,
// to [10,20] along the lanes: exact.
func TestExpandLanes(t *testing.T) {
	xf := []float32{1, -2, 3, float32(math.Inf(-1)), 0.5, -6, 7, 8, -9, 10}
	got := runGraph(t, expandGraph([]int64{10, 1}, []int64{10, 20}), onnx.NewFloat32("x", []int64{10, 1}, xf))
	var want []float64
	for _, v := range xf {
		for range 20 {
			want = append(want, math.Abs(float64(v)))
		}
	}
	checkExact(t, got, want)
}
