package alidnn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestMeanRefused: what the lane mean cannot serve is refused naming the
// node: a Softmax other operators read, over another axis. (A mean over
// another axis and a LayerNormalization over the last two axes of hidden
// states now run, see reduceaxes_test.go and normaxes_test.go.)
func TestMeanRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opset int64
		nodes []*onnx.Node
		want  []string
	}{
		{"softmax over rows into a Relu", 13, []*onnx.Node{{Name: "sm", OpType: "Softmax", Inputs: []string{"p"}, Outputs: []string{"s"}, Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 1}}},
			{Name: "r", OpType: "Relu", Inputs: []string{"s"}, Outputs: []string{"y"}}}, []string{`"sm"`, "last axis"}},
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
