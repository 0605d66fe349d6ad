package alidnn_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestWithFloatNodes quantises two convolutions with the second kept in
// fp32: its output is then the fp32 model's to the bit when its input is
// (the first kept too), and int8's error when not; a name no node has is
// refused.
func TestWithFloatNodes(t *testing.T) {
	const c = 16
	dims := []int64{1, c, 6, 6}
	wDims := []int64{c, c, 3, 3}
	conv := func(name, x, w, y string) *onnx.Node {
		return &onnx.Node{Name: name, OpType: "Conv", Inputs: []string{x, w}, Outputs: []string{y}, Attrs: []*onnx.Attribute{
			{Name: "kernel_shape", Type: onnx.AttrInts, Ints: []int64{3, 3}}, {Name: "pads", Type: onnx.AttrInts, Ints: []int64{1, 1, 1, 1}}}}
	}
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", dims...)},
		Initializers: []*onnx.Tensor{wave("w1", wDims, 0.2, 4), wave("w2", wDims, 0.2, 5)},
		Nodes: []*onnx.Node{
			conv("first", "x", "w1", "a"),
			{OpType: "Relu", Inputs: []string{"a"}, Outputs: []string{"r"}},
			conv("second", "r", "w2", "y"),
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}}
	x := wave("x", dims, 2, 6)
	ctx := context.Background()
	dev := local(t)
	quantize := func(opts ...alidnn.Option) []float32 {
		t.Helper()
		p, err := alidnn.Quantize(ctx, dev, m, [][]*onnx.Tensor{{x}}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return runProgram(t, dev, p, x)
	}
	fp, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	want := runProgram(t, dev, fp, x)
	if got := quantize(alidnn.WithFloatNodes("first", "second")); !slices.Equal(got, want) {
		t.Errorf("both kept in fp32: output differs from the fp32 model's")
	}
	if got := quantize(); slices.Equal(got, want) {
		t.Errorf("int8: output equals the fp32 model's, so the test cannot tell a node kept in fp32")
	}
	if got := quantize(alidnn.WithFloatNodes("second")); slices.Equal(got, want) {
		t.Errorf("second kept in fp32 on an int8 input: output equals the fp32 model's")
	}
	_, err = alidnn.Quantize(ctx, dev, m, [][]*onnx.Tensor{{x}}, alidnn.WithFloatNodes("third"))
	if err == nil || !strings.Contains(err.Error(), `no node named ["third"]`) {
		t.Errorf("an unknown node: err %v, want it named", err)
	}
}
