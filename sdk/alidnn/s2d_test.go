package alidnn_test

import (
	"fmt"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
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

// TestPackedStemInt8 quantises a ViT's patch embedding (three channels, a
// 16×16 kernel at stride 16): the int8 program packs pixels into the lanes
// as the fp32 one does, running under half the GEMM blocks of the
// unpacked convolution, within 5% of the fp32 model's largest output.
func TestPackedStemInt8(t *testing.T) {
	const img, oc = 64, 384
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", 1, 3, img, img)},
		Initializers: []*onnx.Tensor{ramp("w", []int64{oc, 3, 16, 16}, 0.01)},
		Nodes: []*onnx.Node{{OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"y"}, Attrs: []*onnx.Attribute{
			{Name: "strides", Type: onnx.AttrInts, Ints: []int64{16, 16}}}}},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}}
	x := wave("x", []int64{1, 3, img, img}, 1, 0.3)
	p8, want, got := quantizedPair(t, m, x)
	blocks := 0
	for _, in := range p8.Insns {
		if in.Op == isa.OpGEMM && !in.Reset {
			blocks += int(in.IterOut * in.IterIn * (in.UopEnd - in.UopBegin))
		}
	}
	unpacked := (img / 16) * (img / 16) * 16 * 16 * (oc / 16)
	if blocks*2 > unpacked {
		t.Errorf("int8 stem runs %d GEMM blocks; unpacked it takes %d", blocks, unpacked)
	}
	checkWithin(t, fmt.Sprintf("%d GEMM blocks (unpacked %d)", blocks, unpacked), got, want, 0.05)
}
