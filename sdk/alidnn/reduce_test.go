package alidnn_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// reduceGraph is op(Relu(x [2,3,16])) with axes as an input (opset 18).
func reduceGraph(op string, axes []int64, noop int64) *onnx.Model {
	at, _ := onnx.NewInt("axes", onnx.Int64, []int64{int64(len(axes))}, axes)
	return &onnx.Model{Opsets: []onnx.Opset{{Version: 18}}, Graph: &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", 2, 3, 16)},
		Initializers: []*onnx.Tensor{at},
		Nodes: []*onnx.Node{
			{Name: "relu", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"r"}},
			{Name: "red", OpType: op, Inputs: []string{"r", "axes"}, Outputs: []string{"y"},
				Attrs: []*onnx.Attribute{{Name: "noop_with_empty_axes", Type: onnx.AttrInt, I: noop}}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}}
}

// TestReduceNoop: a reduction by no axes with noop_with_empty_axes is its
// input, for every reduction.
func TestReduceNoop(t *testing.T) {
	x := ramp("x", []int64{2, 3, 16}, 0.5)
	xf, _ := x.Float32s()
	want := make([]float64, len(xf))
	for k, v := range xf {
		want[k] = math.Max(float64(v), 0)
	}
	for _, op := range []string{"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"} {
		t.Run(op, func(t *testing.T) { checkClose(t, runModel(t, reduceGraph(op, nil, 1), x), want) })
	}
}

// TestReduceRefused: reductions the engine does not map are refused naming
// the node, the axes and the reason — by no axes without the no-op flag
// (all of them) and over axis 1 of an image [2,3,16], whose channels the
// lanes hold, but for sums and means.
func TestReduceRefused(t *testing.T) {
	for _, tc := range []struct {
		op   string
		axes []int64
		want string
	}{
		{"ReduceMax", nil, "only sums and means of channels"},
		{"ReduceMax", []int64{1}, "holds on the lanes"},
		{"ReduceMin", []int64{0, 1}, "holds on the lanes"},
	} {
		_, err := alidnn.Compile(reduceGraph(tc.op, tc.axes, 0))
		if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), `"red"`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s over %v: %v, want ErrUnsupported naming \"red\" and %q", tc.op, tc.axes, err, tc.want)
		}
	}
}

// TestReducedOutputs returns the four reductions over the last axis of
// hidden states [1,5,40] (a MatMul's) as graph outputs [1,5,1], and the
// product of two of them, against float64.
func TestReducedOutputs(t *testing.T) {
	axes, _ := onnx.NewInt("axes", onnx.Int64, []int64{1}, []int64{-1})
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", 1, 5, 8)},
		Initializers: []*onnx.Tensor{axes, ramp("w", []int64{8, 40}, 0.07)},
		Nodes:        []*onnx.Node{{Name: "mm", OpType: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"p"}}},
	}
	ops := []string{"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"}
	for _, op := range ops {
		g.Nodes = append(g.Nodes, &onnx.Node{Name: op, OpType: op, Inputs: []string{"p", "axes"}, Outputs: []string{op}})
		g.Outputs = append(g.Outputs, onnx.ValueInfo{Name: op})
	}
	g.Nodes = append(g.Nodes, &onnx.Node{Name: "mul", OpType: "Mul", Inputs: []string{"ReduceMax", "ReduceMin"}, Outputs: []string{"prod"}})
	g.Outputs = append(g.Outputs, onnx.ValueInfo{Name: "prod"})
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 18}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	x := ramp("x", []int64{1, 5, 8}, 0.3)
	res := runResult(t, p, x)
	want := make([][]float64, 5)
	for _, row := range hidden(x) {
		s, hi, lo := 0.0, math.Inf(-1), math.Inf(1)
		for _, v := range row {
			s, hi, lo = s+v, math.Max(hi, v), math.Min(lo, v)
		}
		for k, v := range []float64{s / 40, s, hi, lo, hi * lo} {
			want[k] = append(want[k], v)
		}
	}
	for k, out := range res.Outputs {
		if len(out.Dims) != 3 || out.Dims[2] != 1 {
			t.Errorf("output %d: dims %v, want [1 5 1]", k, out.Dims)
		}
		got, err := out.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		checkClose(t, got, want[k])
	}
}
