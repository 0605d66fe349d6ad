package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestLayerNormStats runs LayerNormalization (opset 17) of a graph input
// [2,3,40] — hidden states, the last axis on the lanes, not an image —
// with its optional outputs Mean and InvStdDev [2,3,1], against float64.
func TestLayerNormStats(t *testing.T) {
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", 2, 3, 40)},
		Initializers: []*onnx.Tensor{ramp("g", []int64{40}, 0.2), ramp("b", []int64{40}, 0.05)},
		Nodes: []*onnx.Node{{Name: "ln", OpType: "LayerNormalization", Inputs: []string{"x", "g", "b"}, Outputs: []string{"y", "mean", "inv"},
			Attrs: []*onnx.Attribute{{Name: "epsilon", Type: onnx.AttrFloat, F: 0.01}}}},
		Outputs: []onnx.ValueInfo{{Name: "y"}, {Name: "mean"}, {Name: "inv"}},
	}
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 17}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	x := ramp("x", []int64{2, 3, 40}, 0.3)
	res := runResult(t, p, x)
	xf, _ := x.Float32s()
	gf, _ := ramp("g", []int64{40}, 0.2).Float32s()
	bf, _ := ramp("b", []int64{40}, 0.05).Float32s()
	var y, mean, inv []float64
	for r := range 6 {
		row := xf[r*40:][:40]
		m, v := 0.0, 0.0
		for _, e := range row {
			m += float64(e) / 40
		}
		for _, e := range row {
			v += (float64(e) - m) * (float64(e) - m) / 40
		}
		is := 1 / math.Sqrt(v+float64(float32(0.01)))
		for k, e := range row {
			y = append(y, (float64(e)-m)*is*float64(gf[k])+float64(bf[k]))
		}
		mean, inv = append(mean, m), append(inv, is)
	}
	for k, want := range [][]float64{y, mean, inv} {
		out := res.Outputs[k]
		if k > 0 && (len(out.Dims) != 3 || out.Dims[2] != 1) {
			t.Errorf("output %d: dims %v, want [2 3 1]", k, out.Dims)
		}
		got, err := out.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		checkClose(t, got, want)
	}
}

// TestLayerNormFromAxis0 normalises a graph input [3,40] over both axes
// (axis 0), as the same normalisation of the [1,120] view, against float64.
func TestLayerNormFromAxis0(t *testing.T) {
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", 3, 40)},
		Initializers: []*onnx.Tensor{ramp("g", []int64{3, 40}, 0.2)},
		Nodes: []*onnx.Node{{Name: "ln", OpType: "LayerNormalization", Inputs: []string{"x", "g"}, Outputs: []string{"y", "mean"},
			Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 0}}}},
		Outputs: []onnx.ValueInfo{{Name: "y"}, {Name: "mean"}},
	}
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 17}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	x := ramp("x", []int64{3, 40}, 0.3)
	res := runResult(t, p, x)
	xf, _ := x.Float32s()
	gf, _ := ramp("g", []int64{3, 40}, 0.2).Float32s()
	m, v := 0.0, 0.0
	for _, e := range xf {
		m += float64(e) / 120
	}
	for _, e := range xf {
		v += (float64(e) - m) * (float64(e) - m) / 120
	}
	var y []float64
	for k, e := range xf {
		y = append(y, (float64(e)-m)/math.Sqrt(v+float64(float32(1e-5)))*float64(gf[k]))
	}
	if d := res.Outputs[1].Dims; len(d) != 2 || d[0] != 1 || d[1] != 1 {
		t.Errorf("mean dims %v, want [1 1]", d)
	}
	for k, want := range [][]float64{y, {m}} {
		got, err := res.Outputs[k].Float32s()
		if err != nil {
			t.Fatal(err)
		}
		checkClose(t, got, want)
	}
}

// TestLayerNormMeanNonFinite: LayerNormalization's Mean of rows holding
// +∞ or NaN is +∞ or NaN, as in float64 — the pick of lane 0 multiplies
// the other lanes, which hold the same mean, by 0 only once they are 0.
func TestLayerNormMeanNonFinite(t *testing.T) {
	xf := make([]float32, 3*20)
	for k := range xf {
		xf[k] = float32(k%7) - 3
	}
	xf[20+4] = float32(math.Inf(1))
	xf[40+9] = float32(math.NaN())
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", 3, 20)},
		Initializers: []*onnx.Tensor{ramp("g", []int64{20}, 0.2)},
		Nodes:        []*onnx.Node{{Name: "ln", OpType: "LayerNormalization", Inputs: []string{"x", "g"}, Outputs: []string{"y", "mean"}}},
		Outputs:      []onnx.ValueInfo{{Name: "y"}, {Name: "mean"}},
	}
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 17}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	got, err := runResult(t, p, onnx.NewFloat32("x", []int64{3, 20}, xf)).Outputs[1].Float32s()
	if err != nil {
		t.Fatal(err)
	}
	m := 0.0
	for _, v := range xf[:20] {
		m += float64(v) / 20
	}
	if len(got) != 3 || math.Abs(float64(got[0])-m) > 1e-6 || !math.IsInf(float64(got[1]), 1) || !math.IsNaN(float64(got[2])) {
		t.Errorf("means %v, want [%g +Inf NaN]", got, m)
	}
}
