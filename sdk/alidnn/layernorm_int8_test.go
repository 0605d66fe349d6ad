package alidnn_test

import (
	"context"
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

func attrInt(name string, v int64) *onnx.Attribute {
	return &onnx.Attribute{Name: name, Type: onnx.AttrInt, I: v}
}

// TestLayerNormInt8SmallRow layer-normalises, in a post-training-
// quantised model, hidden states whose first row is a hundred times
// smaller than the others (a ViT's class token beside its patches): the
// lane means stay fp32, so that row comes out as close to the fp32
// model's as the others (int8 means rounded its variance to about 0 and
// missed by 1.5 of 0.8). The Softmax's row sums, which the ViT case needs
// in fp32 too, are held by onnxtest's TestInt8References.
func TestLayerNormInt8SmallRow(t *testing.T) {
	const S, K = 5, 32
	x := wave("x", []int64{1, S - 1, K}, 4, 0.3)
	// A constant first row a hundred times smaller, concatenated before
	// the computed ones, as a ViT's class token.
	cls := wave("cls", []int64{1, 1, K}, 0.04, 1.1)
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{ramp("w", []int64{K, K}, 0.0625), ramp("g", []int64{K}, 0.1), ramp("b", []int64{K}, 0.05), ramp("w2", []int64{K, 16}, 0.0625), cls},
		Nodes: []*onnx.Node{
			{OpType: "MatMul", Name: "h1", Inputs: []string{"x", "w"}, Outputs: []string{"h1"}},
			{OpType: "Concat", Name: "h", Inputs: []string{"cls", "h1"}, Outputs: []string{"h"}, Attrs: []*onnx.Attribute{attrInt("axis", 1)}},
			{OpType: "LayerNormalization", Name: "ln", Inputs: []string{"h", "g", "b"}, Outputs: []string{"ln"},
				Attrs: []*onnx.Attribute{{Name: "epsilon", Type: onnx.AttrFloat, F: 1e-12}}},
			{OpType: "MatMul", Name: "y", Inputs: []string{"ln", "w2"}, Outputs: []string{"y"}},
		},
		Inputs:  []onnx.ValueInfo{vinfo("x", 1, S-1, K)},
		Outputs: []onnx.ValueInfo{vinfo("y", 1, S, 16)},
	}
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 17}}, Graph: g}
	dev := local(t)
	p32, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	want := runProgram(t, dev, p32, x)
	p8, err := alidnn.Quantize(context.Background(), dev, m, [][]*onnx.Tensor{{x}})
	if err != nil {
		t.Fatal(err)
	}
	got := runProgram(t, dev, p8, x)
	for r := range S {
		var big, worst float64
		for j := range 16 {
			big = max(big, math.Abs(float64(want[r*16+j])))
			worst = max(worst, math.Abs(float64(got[r*16+j]-want[r*16+j])))
		}
		t.Logf("row %d: worst |int8 − fp32| %.3g of the largest %.3g", r, worst, big)
		if worst > 0.05*big {
			t.Errorf("row %d: worst |int8 − fp32| %.3g beyond 5%% of the largest %.3g", r, worst, big)
		}
	}
}
