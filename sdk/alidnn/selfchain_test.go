package alidnn_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestGatedActivationsFuse compiles the generated cases of a Conv followed
// by a gated activation as exporters decompose it (onnxtest checks their
// numbers): each must take as many layers as the Conv with the fused
// HardSwish operator, the gate a step of the convolution's epilogue; a
// gate with a per-channel constant is compiled operator by operator.
func TestGatedActivationsFuse(t *testing.T) {
	layers := func(name string) int {
		m, err := onnx.ReadModel(filepath.Join("onnxtest", "testdata", "generated", name, "model.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := alidnn.Compile(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return p.Layers
	}
	want := layers("conv_hardswish")
	for _, name := range []string{"conv_hardswish_torch13", "conv_hardswish_paddle", "conv_silu", "conv_swish_beta"} {
		if got := layers(name); got != want {
			t.Errorf("%s: %d layers, want %d (the gate fused into the Conv)", name, got, want)
		}
	}
	if got := layers("conv_gate_per_channel"); got <= want {
		t.Errorf("conv_gate_per_channel: %d layers, want more than %d", got, want)
	}
}

// TestGatedInt8SharedInput quantises a Conv whose output x feeds another
// Conv (in int8) and x · HardSigmoid(x): the gate then dequantises the
// stored int8 x. Both outputs must be near the fp32 program's.
func TestGatedInt8SharedInput(t *testing.T) {
	xd, wd := []int64{1, 3, 6, 6}, []int64{16, 3, 3, 3}
	pads := []*onnx.Attribute{{Name: "pads", Type: onnx.AttrInts, Ints: []int64{1, 1, 1, 1}}}
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("in", xd...)},
		Initializers: []*onnx.Tensor{ramp("w1", wd, 0.1), ramp("w2", []int64{16, 16, 3, 3}, 0.02)},
		Nodes: []*onnx.Node{
			{Name: "c1", OpType: "Conv", Inputs: []string{"in", "w1"}, Outputs: []string{"x"}, Attrs: pads},
			{Name: "c2", OpType: "Conv", Inputs: []string{"x", "w2"}, Outputs: []string{"z"}, Attrs: pads},
			{Name: "hs", OpType: "HardSigmoid", Inputs: []string{"x"}, Outputs: []string{"h"}},
			{Name: "gate", OpType: "Mul", Inputs: []string{"x", "h"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}, {Name: "z"}},
	}
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g}
	in := ramp("in", xd, 0.4)
	ctx := context.Background()
	fp, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	q, err := alidnn.Quantize(ctx, local(t), m, [][]*onnx.Tensor{{in}})
	if err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		want, got := runAll(t, fp, in)[k], runAll(t, q, in)[k]
		var scale, worst float64
		for i := range want {
			scale = max(scale, math.Abs(float64(want[i])))
			worst = max(worst, math.Abs(float64(got[i]-want[i])))
		}
		if worst > 0.03*scale {
			t.Errorf("output %d: int8 off by %.3g of a range %.3g", k, worst, scale)
		}
	}
}

// runAll runs p once on a fresh in-process engine and returns every
// output.
func runAll(t *testing.T, p *alidnn.Program, ins ...*onnx.Tensor) [][]float32 {
	t.Helper()
	ctx := context.Background()
	s, err := alidnn.Load(ctx, local(t), p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, ins...)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for _, o := range res.Outputs {
		f, err := o.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}
