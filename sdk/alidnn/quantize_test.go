package alidnn_test

import (
	"context"
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// wave is a deterministic spread of n values in [-amp, amp].
func wave(name string, dims []int64, amp, seed float64) *onnx.Tensor {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	f := make([]float32, n)
	for k := range f {
		f[k] = float32(amp * math.Sin(float64(k)*0.61+seed))
	}
	return onnx.NewFloat32(name, dims, f)
}

// TestQuantizeBatchNormAndSum quantises a residual block as exporters
// write it: Conv → BatchNormalization (scales of both signs) → Relu, whose
// output feeds the next Conv (so it is int8) and the Add after that
// Conv's BatchNormalization. The BNs fold into the int8 convolutions and
// the Add runs in fp32; the result must stay close to the fp32 model's.
func TestQuantizeBatchNormAndSum(t *testing.T) {
	const c = 16
	dims := []int64{1, c, 6, 6}
	wDims := []int64{c, c, 3, 3}
	ch := []int64{c}
	bn := func(p string) []*onnx.Tensor {
		// Scales alternate in sign; variances stay positive.
		return []*onnx.Tensor{wave(p+"s", ch, 1.5, 1), wave(p+"b", ch, 0.5, 2), wave(p+"m", ch, 0.3, 3),
			onnx.NewFloat32(p+"v", ch, []float32{0.5, 1, 2, 0.25, 1.5, 0.75, 3, 1, 0.5, 1, 2, 0.25, 1.5, 0.75, 3, 1})}
	}
	inits := append([]*onnx.Tensor{wave("w1", wDims, 0.2, 4), wave("w2", wDims, 0.2, 5)}, append(bn("n1"), bn("n2")...)...)
	conv := func(x, w, y string) *onnx.Node {
		return &onnx.Node{OpType: "Conv", Inputs: []string{x, w}, Outputs: []string{y}, Attrs: []*onnx.Attribute{
			{Name: "kernel_shape", Type: onnx.AttrInts, Ints: []int64{3, 3}}, {Name: "pads", Type: onnx.AttrInts, Ints: []int64{1, 1, 1, 1}}}}
	}
	norm := func(x, p, y string) *onnx.Node {
		return &onnx.Node{OpType: "BatchNormalization", Inputs: []string{x, p + "s", p + "b", p + "m", p + "v"}, Outputs: []string{y}}
	}
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", dims...)},
		Initializers: inits,
		Nodes: []*onnx.Node{
			conv("x", "w1", "c1"), norm("c1", "n1", "b1"),
			{OpType: "Relu", Inputs: []string{"b1"}, Outputs: []string{"a"}},
			conv("a", "w2", "c2"), norm("c2", "n2", "b2"),
			{OpType: "Add", Inputs: []string{"b2", "a"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}}
	x := wave("x", dims, 2, 6)
	ctx := context.Background()
	dev := local(t)
	run := func(p *alidnn.Program) []float32 {
		s, err := alidnn.Load(ctx, dev, p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Run(ctx, x)
		if err != nil {
			t.Fatal(err)
		}
		f, err := res.Outputs[0].Float32s()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	fp, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	q8, err := alidnn.Quantize(ctx, dev, m, [][]*onnx.Tensor{{x}})
	if err != nil {
		t.Fatal(err)
	}
	want, got := run(fp), run(q8)
	var peak, worst float64
	for k := range want {
		peak = max(peak, math.Abs(float64(want[k])))
		worst = max(worst, math.Abs(float64(got[k]-want[k])))
	}
	if worst > 0.05*peak {
		t.Errorf("int8 differs from fp32 by up to %.3g, %.2g%% of the largest output %.3g; want ≤ 5%%", worst, 100*worst/peak, peak)
	}
	t.Logf("int8 differs from fp32 by up to %.3g (%.2g%% of %.3g)", worst, 100*worst/peak, peak)
}
