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
// (all of them), over another axis or several, and one over the last axis
// that a graph output reads, which the engine would hold broadcast.
func TestReduceRefused(t *testing.T) {
	for _, tc := range []struct {
		op   string
		axes []int64
		want string
	}{
		{"ReduceMean", nil, "only over the last axis"},
		{"ReduceSum", []int64{-1}, "only into element-wise operators"},
		{"ReduceMax", []int64{1}, "axes [1] (keepdims 1)"},
		{"ReduceMin", []int64{0, 2}, "axes [0 2]"},
	} {
		_, err := alidnn.Compile(reduceGraph(tc.op, tc.axes, 0))
		if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), `"red"`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s over %v: %v, want ErrUnsupported naming \"red\" and %q", tc.op, tc.axes, err, tc.want)
		}
	}
}
