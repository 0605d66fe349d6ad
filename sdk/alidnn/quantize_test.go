package alidnn_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
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

// quantizedPair compiles m in fp32 and quantised after training on x,
// runs both on one engine and returns the int8 program with the fp32 and
// the int8 program's first outputs.
func quantizedPair(t *testing.T, m *onnx.Model, x *onnx.Tensor) (p8 *alidnn.Program, want, got []float32) {
	t.Helper()
	dev := local(t)
	p32, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	want = runProgram(t, dev, p32, x)
	if p8, err = alidnn.Quantize(context.Background(), dev, m, [][]*onnx.Tensor{{x}}); err != nil {
		t.Fatal(err)
	}
	return p8, want, runProgram(t, dev, p8, x)
}

// checkWithin fails t unless every value of got is within tol of want's
// largest magnitude of want's; what names the comparison in the log.
func checkWithin(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	var big, worst float64
	for k := range want {
		big = max(big, math.Abs(float64(want[k])))
		worst = max(worst, math.Abs(float64(got[k]-want[k])))
	}
	t.Logf("%s: worst |int8 − fp32| %.3g of the largest %.3g", what, worst, big)
	if worst > tol*big || math.IsNaN(worst) {
		t.Errorf("%s: worst |int8 − fp32| %.3g beyond %g of the largest %.3g", what, worst, tol, big)
	}
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
	run := func(p *alidnn.Program) []float32 { return runProgram(t, dev, p, x) }
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

// TestQuantizedAveragePool quantises Conv → AveragePool → GlobalAveragePool
// (testdata/generated/conv_averagepool with a global average after it):
// both pools run on the int8 values (integer POOL instructions), and the
// result stays within a few int8 steps of the fp32 model's.
func TestQuantizedAveragePool(t *testing.T) {
	m, err := onnx.ReadModel(filepath.Join("onnxtest", "testdata", "generated", "conv_averagepool", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	m.Graph.Nodes = append(m.Graph.Nodes, &onnx.Node{Name: "gap", OpType: "GlobalAveragePool", Inputs: []string{"y"}, Outputs: []string{"g"}})
	m.Graph.Outputs = []onnx.ValueInfo{{Name: "g", ElemType: onnx.Float}}
	in := wave("x", []int64{1, 3, 6, 6}, 4, 0.3)
	ctx := context.Background()
	dev := local(t)
	q, err := alidnn.Quantize(ctx, dev, m, [][]*onnx.Tensor{{in}})
	if err != nil {
		t.Fatal(err)
	}
	intPools := 0
	for _, i := range q.Insns {
		if i.Op == isa.OpPool && !i.FP32 {
			intPools++
		}
	}
	if intPools == 0 {
		t.Error("no POOL instruction runs on integers: the pools dequantised first")
	}
	fp, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	run := func(p *alidnn.Program) []float32 { return runProgram(t, dev, p, in) }
	want, got := run(fp), run(q)
	var scale, worst float64
	for k, w := range want {
		scale = max(scale, math.Abs(float64(w)))
		worst = max(worst, math.Abs(float64(got[k]-w)))
	}
	// The Conv's output is quantised at its calibrated range / 127; the
	// pools average int8 values and round once more each.
	if step := scale / 127; worst > 4*step {
		t.Errorf("int8 differs from fp32 by %.3g, more than 4 int8 steps (%.3g)", worst, step)
	}
	t.Logf("%d integer POOL instructions; worst difference %.3g (largest output %.3g)", intPools, worst, scale)
}

// TestQuantizeNearZeroChannel quantises a 1×1 Conv one of whose output
// channels has weights of 1e-12 (pruned, or folded away as PP-OCRv4's
// reparameterised blocks leave some) and a bias of 2: in that channel's
// accumulator units, 2 / (s_x · 1e-12/127), the bias overflows int32, so
// the layer adds it in fp32. The output stays within 2% of a float64
// evaluation of the model.
func TestQuantizeNearZeroChannel(t *testing.T) {
	const c, px = 16, 12
	dims := []int64{1, c, 3, 4}
	w := wave("w", []int64{c, c, 1, 1}, 0.5, 1)
	wv, _ := w.Float32s()
	for i := range c {
		wv[3*c+i] = 1e-12
	}
	w = onnx.NewFloat32("w", []int64{c, c, 1, 1}, wv)
	b := onnx.NewFloat32("b", []int64{c}, fillF(c, 2))
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", dims...)},
		Initializers: []*onnx.Tensor{w, b},
		Nodes:        []*onnx.Node{{OpType: "Conv", Inputs: []string{"x", "w", "b"}, Outputs: []string{"y"}}},
		Outputs:      []onnx.ValueInfo{{Name: "y"}},
	}}
	x := wave("x", dims, 2, 6)
	xv, _ := x.Float32s()
	dev := local(t)
	q8, err := alidnn.Quantize(context.Background(), dev, m, [][]*onnx.Tensor{{x}})
	if err != nil {
		t.Fatal(err)
	}
	got := runProgram(t, dev, q8, x)
	var peak, worst float64
	for o := range c {
		for p := range px {
			want := 2.0
			for i := range c {
				want += float64(wv[o*c+i]) * float64(xv[i*px+p])
			}
			peak = max(peak, math.Abs(want))
			worst = max(worst, math.Abs(float64(got[o*px+p])-want))
		}
	}
	if worst > 0.02*peak {
		t.Errorf("int8 differs from float64 by up to %.3g, %.2g%% of the largest output %.3g; want ≤ 2%%", worst, 100*worst/peak, peak)
	}
}

func fillF(n int, v float32) []float32 {
	f := make([]float32, n)
	for k := range f {
		f[k] = v
	}
	return f
}
