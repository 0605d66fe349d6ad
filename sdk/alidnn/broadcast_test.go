package alidnn_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// gateGraph is Mul(a, g): a = Relu(x) of xDims, and the gate g, of gDims,
// HardSigmoid of the global average of z (GAP when gDims keeps only the
// batch and channels; Relu when it is z's own shape).
func gateGraph(xDims, gDims []int64, pool bool) *onnx.Graph {
	gate := &onnx.Node{Name: "pool", OpType: "GlobalAveragePool", Inputs: []string{"z"}, Outputs: []string{"p"}}
	if !pool {
		gate.OpType = "Relu"
	}
	return &onnx.Graph{
		Inputs: []onnx.ValueInfo{vinfo("z", gDims...), vinfo("x", xDims...)},
		Nodes: []*onnx.Node{
			gate,
			{Name: "hs", OpType: "HardSigmoid", Inputs: []string{"p"}, Outputs: []string{"g"}},
			{Name: "relu", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"a"}},
			{Name: "gate", OpType: "Mul", Inputs: []string{"a", "g"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}
}

// TestBroadcastGate multiplies computed tensors whose second operand
// broadcasts: a gate per image and channel over the image's pixels (two
// images), and one image of a gate over a batch of three, against the
// host's arithmetic.
func TestBroadcastGate(t *testing.T) {
	for _, tc := range []struct {
		name         string
		xDims, zDims []int64
		pool         bool
	}{
		{"per image and channel", []int64{2, 20, 3, 5}, []int64{2, 20, 3, 5}, true},
		{"over the batch", []int64{3, 20, 2, 2}, []int64{1, 20, 2, 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, z := ramp("x", tc.xDims, 0.5), ramp("z", tc.zDims, -0.3)
			got := runGraph(t, gateGraph(tc.xDims, tc.zDims, tc.pool), z, x)
			want := gateReference(tc.xDims, tc.zDims, tc.pool, x, z)
			if len(got) != len(want) {
				t.Fatalf("%d values, want %d", len(got), len(want))
			}
			for k := range want {
				if math.Abs(float64(got[k]-want[k])) > 1e-5+1e-5*math.Abs(float64(want[k])) {
					t.Fatalf("value %d: %g, want %g", k, got[k], want[k])
				}
			}
		})
	}
}

// gateReference is gateGraph's output on the host.
func gateReference(xDims, zDims []int64, pool bool, x, z *onnx.Tensor) []float32 {
	xf, _ := x.Float32s()
	zf, _ := z.Float32s()
	c, plane := int(xDims[1]), int(xDims[2]*xDims[3])
	g := func(n, ch, p int) float32 {
		img := zf[(n%int(zDims[0])*c+ch)*plane:][:plane]
		v := max(img[p], 0)
		if pool {
			v = 0
			for _, u := range img {
				v += u
			}
			v /= float32(plane)
		}
		return min(max(0.2*v+0.5, 0), 1)
	}
	want := make([]float32, len(xf))
	for k := range want {
		n, ch, p := k/(c*plane), k/plane%c, k%plane
		want[k] = max(xf[k], 0) * g(n, ch, p)
	}
	return want
}

// TestBroadcastRefused checks that operands the engine cannot broadcast
// are refused naming the node and the reason: along the channels, which
// sit on the lanes. (One along some of the rows is expanded first, see
// TestBroadcastPartialRows.)
func TestBroadcastRefused(t *testing.T) {
	for _, tc := range []struct {
		zDims []int64
		why   string
	}{
		{[]int64{1, 1, 3, 5}, "lanes"},
	} {
		g := gateGraph([]int64{1, 20, 3, 5}, tc.zDims, false)
		_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
		if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), `"gate"`) || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%v: %v, want unsupported naming the node and %q", tc.zDims, err, tc.why)
		}
	}
}

// TestBroadcastLinearGate runs a gate computed by fully connected layers
// on the pooled features and reshaped to [1,C,1,1], as Keras-style
// squeeze-and-excitation writes it: the Gemm's [1,C] output is stored as
// the [1,C,1,1] gate would be.
func TestBroadcastLinearGate(t *testing.T) {
	const c = 20
	dims := []int64{1, c, 3, 5}
	w := ramp("w", []int64{c, c}, 0.01)
	shape, err := onnx.NewInt("shape", onnx.Int64, []int64{4}, []int64{1, c, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", dims...)},
		Initializers: []*onnx.Tensor{w, shape},
		Nodes: []*onnx.Node{
			{Name: "relu", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"a"}},
			{Name: "pool", OpType: "GlobalAveragePool", Inputs: []string{"a"}, Outputs: []string{"p"}},
			{Name: "flat", OpType: "Flatten", Inputs: []string{"p"}, Outputs: []string{"f"}},
			{Name: "fc", OpType: "Gemm", Inputs: []string{"f", "w"}, Outputs: []string{"z"}, Attrs: []*onnx.Attribute{{Name: "transB", Type: onnx.AttrInt, I: 1}}},
			{Name: "hs", OpType: "HardSigmoid", Inputs: []string{"z"}, Outputs: []string{"h"}},
			{Name: "shape", OpType: "Reshape", Inputs: []string{"h", "shape"}, Outputs: []string{"g"}},
			{Name: "gate", OpType: "Mul", Inputs: []string{"a", "g"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}
	x := ramp("x", dims, 0.5)
	got := runGraph(t, g, x)
	xf, _ := x.Float32s()
	wf, _ := w.Float32s()
	plane := len(xf) / c
	pooled := make([]float64, c)
	for k, v := range xf {
		pooled[k/plane] += float64(max(v, 0)) / float64(plane)
	}
	for k, v := range xf {
		o := k / plane
		var z float64
		for i := range c {
			z += float64(wf[o*c+i]) * pooled[i]
		}
		want := float64(max(v, 0)) * min(max(0.2*z+0.5, 0), 1)
		if math.Abs(float64(got[k])-want) > 1e-5+1e-4*math.Abs(want) {
			t.Fatalf("value %d: %g, want %g", k, got[k], want)
		}
	}
}

// TestBroadcastGateInConv multiplies a 1×1 Conv's output, one row of six
// pixels per image for a batch of three (tiles holding several images),
// by a gate computed before it, which the Conv's epilogue reads.
func TestBroadcastGateInConv(t *testing.T) {
	xd, gd := []int64{3, 16, 1, 6}, []int64{3, 20, 1, 1}
	w := ramp("w", []int64{20, 16, 1, 1}, 0.1)
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("z", gd...), vinfo("x", xd...)},
		Initializers: []*onnx.Tensor{w},
		Nodes: []*onnx.Node{
			{Name: "relu", OpType: "Relu", Inputs: []string{"z"}, Outputs: []string{"g"}},
			{Name: "conv", OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"a"}},
			{Name: "gate", OpType: "Mul", Inputs: []string{"g", "a"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}
	x, z := ramp("x", xd, 0.5), ramp("z", gd, 0.7)
	got := runGraph(t, g, z, x)
	xf, _ := x.Float32s()
	zf, _ := z.Float32s()
	wf, _ := w.Float32s()
	for n := range 3 {
		for o := range 20 {
			for p := range 6 {
				var s float64
				for i := range 16 {
					s += float64(wf[o*16+i]) * float64(xf[(n*16+i)*6+p])
				}
				want := s * float64(max(zf[n*20+o], 0))
				if k := (n*20+o)*6 + p; math.Abs(float64(got[k])-want) > 1e-5+1e-5*math.Abs(want) {
					t.Fatalf("image %d channel %d pixel %d: %g, want %g", n, o, p, got[k], want)
				}
			}
		}
	}
}
