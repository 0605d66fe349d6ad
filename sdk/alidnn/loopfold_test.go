package alidnn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// loopModel is x [3] plus the scan output of a Loop over the constants m
// and cond: its body doubles the carried acc (by "two", read from the
// enclosing graph), emits acc + i, and continues while i < 2.
func loopModel(t *testing.T, m int64, bodyReads string) *onnx.Model {
	t.Helper()
	mustInt := func(name string, dt onnx.DataType, v int64) *onnx.Tensor {
		ts, err := onnx.NewInt(name, dt, nil, []int64{v})
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	scalar := func(name string, dt onnx.DataType) onnx.ValueInfo {
		return onnx.ValueInfo{Name: name, ElemType: dt, Dims: []onnx.Dim{}}
	}
	body := &onnx.Graph{
		Name:         "body",
		Initializers: []*onnx.Tensor{mustInt("stop", onnx.Int64, 2)},
		Inputs:       []onnx.ValueInfo{scalar("i", onnx.Int64), scalar("c", onnx.Bool), scalar("acc", onnx.Float)},
		Nodes: []*onnx.Node{
			{OpType: "Less", Inputs: []string{"i", "stop"}, Outputs: []string{"c_out"}},
			{OpType: "Mul", Inputs: []string{"acc", bodyReads}, Outputs: []string{"acc_out"}},
			{OpType: "Cast", Inputs: []string{"i"}, Outputs: []string{"fi"}, Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}}},
			{OpType: "Add", Inputs: []string{"acc", "fi"}, Outputs: []string{"scan"}},
		},
		Outputs: []onnx.ValueInfo{scalar("c_out", onnx.Bool), scalar("acc_out", onnx.Float), scalar("scan", onnx.Float)},
	}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{
			mustInt("m", onnx.Int64, m), mustInt("cond", onnx.Bool, 1),
			onnx.NewFloat32("acc0", nil, []float32{1.5}), onnx.NewFloat32("two", nil, []float32{2}),
		},
		Inputs: []onnx.ValueInfo{vinfo("x", 3)},
		Nodes: []*onnx.Node{
			{OpType: "Loop", Inputs: []string{"m", "cond", "acc0"}, Outputs: []string{"acc_final", "scans"},
				Attrs: []*onnx.Attribute{{Name: "body", Type: onnx.AttrGraph, G: body}}},
			{OpType: "Add", Inputs: []string{"x", "scans"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{vinfo("y", 3)},
	}
	return &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g}
}

// TestLoopFolds: the condition ends the loop after 3 of m = 10 iterations
// (i = 2 is the last, whose i < 2 is false), carrying acc 1.5, 3, 6 and
// emitting acc + i; the engine adds them to x.
func TestLoopFolds(t *testing.T) {
	x := onnx.NewFloat32("x", []int64{3}, []float32{10, 20, 30})
	got := runModel(t, loopModel(t, 10, "two"), x)
	want := []float32{10 + 1.5 + 0, 20 + 3 + 1, 30 + 6 + 2}
	for k := range want {
		if got[k] != want[k] {
			t.Fatalf("y = %v, want %v", got, want)
		}
	}
}

// TestLoopRefused: a Loop whose body reads a run-time value, or whose trip
// count is too large to fold, is refused with its reason; a trip count of
// 2 ends the loop before its condition does, leaving a scan of 2 rows that
// x [3] does not broadcast with.
func TestLoopRefused(t *testing.T) {
	for _, tc := range []struct {
		m     int64
		reads string
		want  string
	}{
		{10, "x", "known only at run time"},
		{1 << 20, "two", "do not fold"},
		{2, "two", "[3] and"},
	} {
		_, err := alidnn.Compile(loopModel(t, tc.m, tc.reads))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("M %d, body reading %q: %v, want an error with %q", tc.m, tc.reads, err, tc.want)
		}
		if tc.want != "[3] and" && !errors.Is(err, alidnn.ErrUnsupported) {
			t.Errorf("M %d, body reading %q: %v is not ErrUnsupported", tc.m, tc.reads, err)
		}
	}
}
