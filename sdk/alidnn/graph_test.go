package alidnn_test

import (
	"slices"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

func vinfo(name string, dims ...int64) onnx.ValueInfo {
	v := onnx.ValueInfo{Name: name, ElemType: onnx.Float}
	for _, d := range dims {
		v.Dims = append(v.Dims, onnx.Dim{Value: d})
	}
	return v
}

func ramp(name string, dims []int64, scale float32) *onnx.Tensor {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	f := make([]float32, n)
	for k := range f {
		f[k] = (float32(k%13) - 6) * scale
	}
	return onnx.NewFloat32(name, dims, f)
}

func runGraph(t *testing.T, g *onnx.Graph, ins ...*onnx.Tensor) []float32 {
	t.Helper()
	return runModel(t, &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g}, ins...)
}

// TestConcatAndSum runs a Concat of two computed tensors along channels
// (16 + 8, then 8 + 16) and a three-way Sum, against the same arithmetic on
// the host.
func TestConcatAndSum(t *testing.T) {
	x := ramp("x", []int64{1, 16, 3, 5}, 0.5)
	y := ramp("y", []int64{1, 8, 3, 5}, 0.25)
	z := ramp("z", []int64{1, 8, 3, 5}, -1)
	g := &onnx.Graph{
		Inputs: []onnx.ValueInfo{vinfo("x", 1, 16, 3, 5), vinfo("y", 1, 8, 3, 5), vinfo("z", 1, 8, 3, 5)},
		Nodes: []*onnx.Node{
			{Name: "rx", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"a"}},
			{Name: "s", OpType: "Sum", Inputs: []string{"y", "z", "y"}, Outputs: []string{"b"}},
			{Name: "cat", OpType: "Concat", Inputs: []string{"a", "b"}, Outputs: []string{"c"}, Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 1}}},
		},
		Outputs: []onnx.ValueInfo{{Name: "c"}},
	}
	got := runGraph(t, g, x, y, z)
	xf, _ := x.Float32s()
	yf, _ := y.Float32s()
	zf, _ := z.Float32s()
	want := make([]float32, 0, len(got))
	for _, v := range xf {
		want = append(want, max(v, 0))
	}
	for k := range yf {
		want = append(want, yf[k]+zf[k]+yf[k])
	}
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for k := range want {
		if got[k] != want[k] {
			t.Fatalf("value %d: %g, want %g", k, got[k], want[k])
		}
	}
	// Channels that are not a multiple of 16 first are realigned through
	// the GEMM array, exactly.
	g.Nodes[2].Inputs = []string{"b", "a"}
	got = runGraph(t, g, x, y, z)
	want = slices.Concat(want[len(xf):], want[:len(xf)])
	for k := range want {
		if got[k] != want[k] {
			t.Fatalf("b, a: value %d: %g, want %g", k, got[k], want[k])
		}
	}
}

// TestSumOfLaterOperand adds a tensor computed after the layer that the
// Add joins: a residual block as exporters write it, main path first, then
// the projection shortcut, then the Add. The sum must wait for both.
func TestSumOfLaterOperand(t *testing.T) {
	x := ramp("x", []int64{1, 16, 3, 5}, 0.5)
	y := ramp("y", []int64{1, 16, 3, 5}, -0.25)
	g := &onnx.Graph{
		Inputs: []onnx.ValueInfo{vinfo("x", 1, 16, 3, 5), vinfo("y", 1, 16, 3, 5)},
		Nodes: []*onnx.Node{
			{Name: "rx", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"a"}},
			{Name: "ry", OpType: "Relu", Inputs: []string{"y"}, Outputs: []string{"b"}},
			{Name: "s", OpType: "Add", Inputs: []string{"a", "b"}, Outputs: []string{"c"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "c"}},
	}
	got := runGraph(t, g, x, y)
	xf, _ := x.Float32s()
	yf, _ := y.Float32s()
	for k := range xf {
		if want := max(xf[k], 0) + max(yf[k], 0); got[k] != want {
			t.Fatalf("value %d: %g, want %g", k, got[k], want)
		}
	}
}

// TestSharedWeights runs two 1×1 convolutions of one input by one weight
// initializer, each followed by its own BatchNormalization, and their sum:
// folding the first normalisation into its convolution must not change
// the weights the second one reads.
func TestSharedWeights(t *testing.T) {
	x := ramp("x", []int64{1, 2, 3, 3}, 0.5)
	w := onnx.NewFloat32("w", []int64{2, 2, 1, 1}, []float32{1, 2, 3, 4})
	bn := func(name string, scale float32) []*onnx.Tensor {
		return []*onnx.Tensor{onnx.NewFloat32(name+"_s", []int64{2}, []float32{scale, scale}), onnx.NewFloat32(name+"_b", []int64{2}, []float32{0, 0}),
			onnx.NewFloat32(name+"_m", []int64{2}, []float32{0, 0}), onnx.NewFloat32(name+"_v", []int64{2}, []float32{1, 1})}
	}
	inits := append(append([]*onnx.Tensor{w}, bn("p", 2)...), bn("q", -3)...)
	bnNode := func(name, in, out string) *onnx.Node {
		return &onnx.Node{Name: name, OpType: "BatchNormalization", Inputs: []string{in, name + "_s", name + "_b", name + "_m", name + "_v"}, Outputs: []string{out},
			Attrs: []*onnx.Attribute{{Name: "epsilon", Type: onnx.AttrFloat, F: 0}}}
	}
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", 1, 2, 3, 3)},
		Initializers: inits,
		Nodes: []*onnx.Node{
			{Name: "c1", OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"a"}},
			bnNode("p", "a", "pa"),
			{Name: "c2", OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"b"}},
			bnNode("q", "b", "qb"),
			{Name: "s", OpType: "Add", Inputs: []string{"pa", "qb"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}
	got := runGraph(t, g, x)
	xf, _ := x.Float32s()
	wf := []float32{1, 2, 3, 4}
	for o := range 2 {
		for p := range 9 {
			conv := wf[o*2]*xf[p] + wf[o*2+1]*xf[9+p]
			if want := 2*conv - 3*conv; got[o*9+p] != want {
				t.Fatalf("channel %d pixel %d: %g, want %g", o, p, got[o*9+p], want)
			}
		}
	}
}

// TestSumOfAlias adds an Identity of a computed tensor to another computed
// tensor: the alias has no storage of its own, and its element type is
// its storage's (read as the alias's zero value, int8, it was dequantised
// as if it were, giving wrong sums).
func TestSumOfAlias(t *testing.T) {
	x := ramp("x", []int64{1, 16, 2, 2}, 0.5)
	z := ramp("z", []int64{1, 16, 2, 2}, 0.25)
	g := &onnx.Graph{
		Inputs: []onnx.ValueInfo{vinfo("x", 1, 16, 2, 2), vinfo("z", 1, 16, 2, 2)},
		Nodes: []*onnx.Node{
			{Name: "r", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"a"}},
			{Name: "i", OpType: "Identity", Inputs: []string{"a"}, Outputs: []string{"b"}},
			{Name: "s", OpType: "Relu", Inputs: []string{"z"}, Outputs: []string{"c"}},
			{Name: "add", OpType: "Add", Inputs: []string{"b", "c"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}
	got := runGraph(t, g, x, z)
	xf, _ := x.Float32s()
	zf, _ := z.Float32s()
	for k := range got {
		if w := max(xf[k], 0) + max(zf[k], 0); got[k] != w {
			t.Fatalf("value %d: %g, want %g", k, got[k], w)
		}
	}
}
