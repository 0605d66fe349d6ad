package alidnn_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// alexNetBlocks is AlexNet's (bvlc_alexnet's) front on an h×h image: Conv
// 11×11/4 to 96 channels → Relu → LRN → MaxPool 3/2 → Conv 5×5 pad 2 to 256
// channels → Relu → LRN → MaxPool 3/2, with LRN's size 5, α 1e-4, β 0.75,
// bias 1. (AlexNet's second Conv has group 2, which the engine does not
// run; an ungrouped one keeps the shapes.) Without conv1 the input is
// conv1's output, of h×h pixels.
func alexNetBlocks(h int64, conv1 bool) *onnx.Model {
	w1 := ramp("w1", []int64{96, 3, 11, 11}, 0.01)
	b1 := ramp("b1", []int64{96}, 0.1)
	w2 := ramp("w2", []int64{256, 96, 5, 5}, 0.002)
	b2 := ramp("b2", []int64{256}, 0.1)
	ints := func(name string, v ...int64) *onnx.Attribute {
		return &onnx.Attribute{Name: name, Type: onnx.AttrInts, Ints: v}
	}
	lrn := func(name, in, out string) *onnx.Node {
		return &onnx.Node{Name: name, OpType: "LRN", Inputs: []string{in}, Outputs: []string{out}, Attrs: []*onnx.Attribute{
			{Name: "size", Type: onnx.AttrInt, I: 5}, {Name: "alpha", Type: onnx.AttrFloat, F: 1e-4},
			{Name: "beta", Type: onnx.AttrFloat, F: 0.75}, {Name: "bias", Type: onnx.AttrFloat, F: 1}}}
	}
	pool := func(name, in, out string) *onnx.Node {
		return &onnx.Node{Name: name, OpType: "MaxPool", Inputs: []string{in}, Outputs: []string{out},
			Attrs: []*onnx.Attribute{ints("kernel_shape", 3, 3), ints("strides", 2, 2)}}
	}
	in, inits := vinfo("c1", 1, 96, h, h), []*onnx.Tensor{w2, b2}
	var nodes []*onnx.Node
	if conv1 {
		in, inits = vinfo("x", 1, 3, h, h), append(inits, w1, b1)
		nodes = append(nodes, &onnx.Node{Name: "conv1", OpType: "Conv", Inputs: []string{"x", "w1", "b1"}, Outputs: []string{"c1"},
			Attrs: []*onnx.Attribute{ints("kernel_shape", 11, 11), ints("strides", 4, 4)}})
	}
	return &onnx.Model{Opsets: []onnx.Opset{{Version: 9}}, Graph: &onnx.Graph{
		Inputs:       []onnx.ValueInfo{in},
		Initializers: inits,
		Nodes: append(nodes,
			&onnx.Node{Name: "relu1", OpType: "Relu", Inputs: []string{"c1"}, Outputs: []string{"r1"}},
			lrn("norm1", "r1", "n1"),
			pool("pool1", "n1", "p1"),
			&onnx.Node{Name: "conv2", OpType: "Conv", Inputs: []string{"p1", "w2", "b2"}, Outputs: []string{"c2"}, Attrs: []*onnx.Attribute{ints("kernel_shape", 5, 5), ints("pads", 2, 2, 2, 2)}},
			&onnx.Node{Name: "relu2", OpType: "Relu", Inputs: []string{"c2"}, Outputs: []string{"r2"}},
			lrn("norm2", "r2", "n2"),
			pool("pool2", "n2", "y"),
		),
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}}
}

// TestLRNAlexNet compiles AlexNet's LRN blocks at full size (from conv1's
// 54×54 output on bvlc_alexnet's 224×224 image), and runs them after conv1
// on a small image against float64 on the host.
func TestLRNAlexNet(t *testing.T) {
	if _, err := alidnn.Compile(alexNetBlocks(54, false)); err != nil {
		t.Fatalf("full size: %v", err)
	}
	m := alexNetBlocks(39, true)              // conv1 8×8, pool1 3×3, pool2 1×1
	x := ramp("x", []int64{1, 3, 39, 39}, 30) // pixel values as Caffe feeds them
	got := runModel(t, m, x)

	init := map[string][]float32{}
	for _, i := range m.Graph.Initializers {
		init[i.Name], _ = i.Float32s()
	}
	xf, _ := x.Float32s()
	a := conv(f64(xf), 3, 39, f64(init["w1"]), f64(init["b1"]), 96, 11, 4, 0)
	a = maxPool(lrnRef(relu(a.v), a), 3, 2)
	b := conv(a.v, 96, a.h, f64(init["w2"]), f64(init["b2"]), 256, 5, 1, 2)
	b = maxPool(lrnRef(relu(b.v), b), 3, 2)
	if len(got) != len(b.v) {
		t.Fatalf("%d values, want %d", len(got), len(b.v))
	}
	for k, w := range b.v {
		if d := math.Abs(float64(got[k]) - w); d > 1e-5+1e-3*math.Abs(w) {
			t.Fatalf("value %d: %g, want %g", k, got[k], w)
		}
	}
}

// TestLRNErrors: LRN the compiler cannot map is refused with
// ErrUnsupported, naming what is wrong.
func TestLRNErrors(t *testing.T) {
	size := &onnx.Attribute{Name: "size", Type: onnx.AttrInt, I: 3}
	scale := onnx.NewFloat32("s", nil, []float32{0.1})
	for _, c := range []struct {
		name  string
		in    onnx.ValueInfo
		nodes []*onnx.Node
		want  string
	}{
		{"rank 2", vinfo("x", 4, 20), []*onnx.Node{{Name: "n", OpType: "LRN", Inputs: []string{"x"}, Outputs: []string{"y"}, Attrs: []*onnx.Attribute{size}}}, "rank-2"},
		{"int8 input", vinfo("x", 1, 20, 2, 2), []*onnx.Node{
			{Name: "q", OpType: "QuantizeLinear", Inputs: []string{"x", "s"}, Outputs: []string{"q"}},
			{Name: "n", OpType: "LRN", Inputs: []string{"q"}, Outputs: []string{"y"}, Attrs: []*onnx.Attribute{size}}}, "dequantize it first"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
				Inputs: []onnx.ValueInfo{c.in}, Initializers: []*onnx.Tensor{scale}, Nodes: c.nodes, Outputs: []onnx.ValueInfo{{Name: "y"}}}})
			if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `LRN "n"`) {
				t.Fatalf("err = %v, want ErrUnsupported naming LRN \"n\" and %q", err, c.want)
			}
		})
	}
	_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs: []onnx.ValueInfo{vinfo("x", 1, 20, 2, 2)}, Nodes: []*onnx.Node{{Name: "n", OpType: "LRN", Inputs: []string{"x"}, Outputs: []string{"y"}}},
		Outputs: []onnx.ValueInfo{{Name: "y"}}}})
	if err == nil || !strings.Contains(err.Error(), "size") {
		t.Fatalf("LRN without size: err = %v, want one naming size", err)
	}
}

// img is a [c][h][h] image in float64.
type img struct {
	v    []float64
	c, h int
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for k, x := range v {
		out[k] = float64(x)
	}
	return out
}

func relu(v []float64) []float64 {
	out := make([]float64, len(v))
	for k, x := range v {
		out[k] = max(x, 0)
	}
	return out
}

// conv is a square convolution of x [c][h][h] by w [m][c][k][k] with stride
// s and padding p on every side, plus b.
func conv(x []float64, c, h int, w, b []float64, m, k, s, p int) img {
	oh := (h+2*p-k)/s + 1
	y := make([]float64, m*oh*oh)
	for o := range m {
		for i := range oh {
			for j := range oh {
				sum := b[o]
				for ci := range c {
					for ki := range k {
						for kj := range k {
							ii, jj := i*s+ki-p, j*s+kj-p
							if ii >= 0 && ii < h && jj >= 0 && jj < h {
								sum += x[(ci*h+ii)*h+jj] * w[((o*c+ci)*k+ki)*k+kj]
							}
						}
					}
				}
				y[(o*oh+i)*oh+j] = sum
			}
		}
	}
	return img{y, m, oh}
}

// lrnRef is LRN with AlexNet's parameters on v, shaped as like.
func lrnRef(v []float64, like img) img {
	const size, alpha, beta, bias = 5, 1e-4, 0.75, 1.0
	s := like.h * like.h
	y := make([]float64, len(v))
	for k := range v {
		c, p := k/s, k%s
		sum := 0.0
		for i := max(0, c-(size-1)/2); i <= min(like.c-1, c+size/2); i++ {
			sum += v[i*s+p] * v[i*s+p]
		}
		y[k] = v[k] / math.Pow(bias+alpha/size*sum, beta)
	}
	return img{y, like.c, like.h}
}

func maxPool(x img, k, s int) img {
	oh := (x.h-k)/s + 1
	y := make([]float64, x.c*oh*oh)
	for c := range x.c {
		for i := range oh {
			for j := range oh {
				m := math.Inf(-1)
				for ki := range k {
					for kj := range k {
						m = max(m, x.v[(c*x.h+i*s+ki)*x.h+j*s+kj])
					}
				}
				y[(c*oh+i)*oh+j] = m
			}
		}
	}
	return img{y, x.c, oh}
}
