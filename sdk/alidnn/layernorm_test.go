package alidnn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestMeanRefused: what the lane mean cannot serve is refused naming the
// node: a reduction over another axis, a LayerNormalization over the last
// two axes of hidden states (whose [1, 80] view the lanes do not hold); and
// a Softmax other operators read, over another axis.
func TestMeanRefused(t *testing.T) {
	mean := func(axes ...int64) *onnx.Node {
		return &onnx.Node{Name: "rm", OpType: "ReduceMean", Inputs: []string{"p"}, Outputs: []string{"m"},
			Attrs: []*onnx.Attribute{{Name: "axes", Type: onnx.AttrInts, Ints: axes}}}
	}
	for _, tc := range []struct {
		name  string
		opset int64
		nodes []*onnx.Node
		want  []string
	}{
		{"mean over rows", 13, []*onnx.Node{mean(1), {Name: "s", OpType: "Sub", Inputs: []string{"p", "m"}, Outputs: []string{"y"}}}, []string{`"rm"`, "last axis"}},
		{"softmax over rows into a Relu", 13, []*onnx.Node{{Name: "sm", OpType: "Softmax", Inputs: []string{"p"}, Outputs: []string{"s"}, Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 1}}},
			{Name: "r", OpType: "Relu", Inputs: []string{"s"}, Outputs: []string{"y"}}}, []string{`"sm"`, "last axis"}},
		{"layernorm from axis 1", 17, []*onnx.Node{{Name: "ln", OpType: "LayerNormalization", Inputs: []string{"p", "g"}, Outputs: []string{"y"},
			Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 1}}}}, []string{`"ln"`, "laid out as", "want 1×1 of 80"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &onnx.Graph{
				Nodes:        append([]*onnx.Node{{Name: "mm0", OpType: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"p"}}}, tc.nodes...),
				Initializers: []*onnx.Tensor{ramp("w", []int64{8, 16}, 0.1), ramp("w1", []int64{16, 16}, 0.1), ramp("g", []int64{16}, 0.1)},
				Inputs:       []onnx.ValueInfo{vinfo("x", 1, 5, 8)},
				Outputs:      []onnx.ValueInfo{{Name: tc.nodes[len(tc.nodes)-1].Outputs[0]}},
			}
			_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: tc.opset}}, Graph: g})
			if !errors.Is(err, alidnn.ErrUnsupported) {
				t.Fatalf("Compile: %v, want ErrUnsupported", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %s", err, w)
				}
			}
		})
	}
}
