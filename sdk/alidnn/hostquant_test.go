package alidnn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestHostQuantize quantises x + 0 (computed on the engine) to INT4 per
// row and to UINT16, through a program written to a file and read back:
// x / scale is rounded half to even (2.5 → 2, 3.5 → 4), the zero point
// added, the result saturated; a QuantizeLinear read on is refused.
func TestHostQuantize(t *testing.T) {
	x := []float32{2.5, 3.5, -20, 0.4, 1, 2, 3, 100}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{onnx.NewFloat32("zero", nil, []float32{0}),
			onnx.NewFloat32("s4", []int64{2}, []float32{1, 0.5}), ints64("z4", onnx.Int4, []int64{2}, 0, -1),
			onnx.NewFloat32("s16", nil, []float32{0.25}), ints64("z16", onnx.Uint16, nil, 3)},
		Nodes: []*onnx.Node{
			{OpType: "Add", Inputs: []string{"x", "zero"}, Outputs: []string{"y"}},
			{OpType: "QuantizeLinear", Inputs: []string{"y", "s4", "z4"}, Outputs: []string{"q4"}, Attrs: []*onnx.Attribute{attrInt("axis", 0)}},
			{OpType: "QuantizeLinear", Inputs: []string{"y", "s16", "z16"}, Outputs: []string{"q16"}},
		},
		Inputs:  []onnx.ValueInfo{vinfo("x", 2, 4)},
		Outputs: []onnx.ValueInfo{typed(vinfo("q4", 2, 4), onnx.Int4), typed(vinfo("q16", 2, 4), onnx.Uint16)},
	}
	p := compileThroughFile(t, 21, g)
	res := runResult(t, p, onnx.NewFloat32("x", []int64{2, 4}, x))
	for k, want := range [][]int64{
		// row 0 by 1 + 0: 2, 4, −20 → −8, 0; row 1 by 0.5 − 1: 1, 3, 5, 199 → 7.
		{2, 4, -8, 0, 1, 3, 5, 7},
		// by 0.25 + 3: 13, 17, −77 → 0, 5 (1.6 → 2), 7, 11, 15, 403.
		{13, 17, 0, 5, 7, 11, 15, 403},
	} {
		got, err := res.Outputs[k].Int64s()
		if err != nil {
			t.Fatal(err)
		}
		for j := range want {
			if got[j] != want[j] {
				t.Errorf("output %d (%v): %v, want %v", k, res.Outputs[k].DataType, got, want)
				break
			}
		}
	}
	g.Nodes = append(g.Nodes, &onnx.Node{OpType: "DequantizeLinear", Inputs: []string{"q16", "s16", "z16"}, Outputs: []string{"d"}})
	g.Outputs = []onnx.ValueInfo{g.Outputs[0], vinfo("d", 2, 4)}
	_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 21}}, Graph: g})
	if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), "QuantizeLinear to UINT16 in the middle of the graph") {
		t.Fatalf("a QuantizeLinear to UINT16 read on: %v", err)
	}
}

// TestHostQuantizeBlocked quantises x + 0 to INT16 with scales and zero
// points per block of 3 along axis 1 (of 4: the second block is one
// column), through a program written to a file and read back; read on,
// the same QuantizeLinear is refused.
func TestHostQuantizeBlocked(t *testing.T) {
	x := []float32{2.5, 3.5, -20, 0.4, 1, 2, 3, 100}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{onnx.NewFloat32("zero", nil, []float32{0}),
			onnx.NewFloat32("s", []int64{2, 2}, []float32{1, 0.5, 0.25, 0.001}), ints64("z", onnx.Int16, []int64{2, 2}, 0, -1, 3, 5)},
		Nodes: []*onnx.Node{
			{OpType: "Add", Inputs: []string{"x", "zero"}, Outputs: []string{"y"}},
			{OpType: "QuantizeLinear", Inputs: []string{"y", "s", "z"}, Outputs: []string{"q"},
				Attrs: []*onnx.Attribute{attrInt("axis", 1), attrInt("block_size", 3)}},
		},
		Inputs:  []onnx.ValueInfo{vinfo("x", 2, 4)},
		Outputs: []onnx.ValueInfo{typed(vinfo("q", 2, 4), onnx.Int16)},
	}
	p := compileThroughFile(t, 21, g)
	res := runResult(t, p, onnx.NewFloat32("x", []int64{2, 4}, x))
	got, err := res.Outputs[0].Int64s()
	if err != nil {
		t.Fatal(err)
	}
	// Row 0: 2.5, 3.5, −20 by 1 + 0 → 2, 4, −20; 0.4 by 0.5 − 1 → 0.
	// Row 1: 1, 2, 3 by 0.25 + 3 → 7, 11, 15; 100 by 0.001 + 5 saturates.
	want := []int64{2, 4, -20, 0, 7, 11, 15, 32767}
	if res.Outputs[0].DataType != onnx.Int16 || len(got) != len(want) {
		t.Fatalf("%v %v, want INT16 %v", res.Outputs[0].DataType, got, want)
	}
	for k := range want {
		if got[k] != want[k] {
			t.Fatalf("q = %v, want %v", got, want)
		}
	}
	g.Nodes = append(g.Nodes, &onnx.Node{OpType: "Neg", Inputs: []string{"q"}, Outputs: []string{"n"}})
	g.Outputs = []onnx.ValueInfo{typed(vinfo("n", 2, 4), onnx.Int16)}
	_, err = alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 21}}, Graph: g})
	if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), "QuantizeLinear to INT16 in the middle of the graph") {
		t.Fatalf("a blocked QuantizeLinear to INT16 read on: %v", err)
	}
}
