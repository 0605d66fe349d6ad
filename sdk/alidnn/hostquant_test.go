package alidnn_test

import (
	"bytes"
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
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 21}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := p.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if p, err = alidnn.ReadProgram(&buf); err != nil {
		t.Fatal(err)
	}
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
	_, err = alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 21}}, Graph: g})
	if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), "QuantizeLinear to UINT16 in the middle of the graph") {
		t.Fatalf("a QuantizeLinear to UINT16 read on: %v", err)
	}
}
