package alidnn_test

import (
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestSpaceToDepthStem checks that a 3×3 stride-2 convolution of a
// 3-channel image, which packing along the rows does not pay for (see
// stemPacking), compiles to two layers, the space-to-depth packing and
// the packed convolution; a 1×1 one, which packing cannot shorten, stays
// one (onnxtest's stem cases check the outputs).
func TestSpaceToDepthStem(t *testing.T) {
	for _, c := range []struct {
		stride int64
		layers int
		kh     int64
	}{{2, 2, 3}, {2, 1, 1}} {
		m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
			Inputs:       []onnx.ValueInfo{vinfo("x", 1, 3, 32, 32)},
			Initializers: []*onnx.Tensor{ramp("w", []int64{32, 3, c.kh, c.kh}, 0.1)},
			Nodes: []*onnx.Node{{OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"y"}, Attrs: []*onnx.Attribute{
				{Name: "strides", Type: onnx.AttrInts, Ints: []int64{c.stride, c.stride}},
				{Name: "pads", Type: onnx.AttrInts, Ints: []int64{c.kh / 2, c.kh / 2, c.kh / 2, c.kh / 2}}}}},
			Outputs: []onnx.ValueInfo{{Name: "y"}},
		}}
		p, err := alidnn.Compile(m)
		if err != nil {
			t.Fatal(err)
		}
		if p.Layers != c.layers {
			t.Errorf("stride %d: %d layers, want %d", c.stride, p.Layers, c.layers)
		}
	}
}
