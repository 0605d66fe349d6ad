package alidnn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// refNorm is LayerNormalization (or, rms, RMSNormalization) of x of shape
// dims over the axes from a, in float64: Y, and LayerNormalization's Mean
// and InvStdDev, one per leading index.
func refNorm(x []float32, dims []int, a int, scale, bias []float32, rms bool, eps float64) (y, mean, inv []float64) {
	inner := 1
	for _, d := range dims[a:] {
		inner *= d
	}
	for o := 0; o < len(x)/inner; o++ {
		row := x[o*inner : (o+1)*inner]
		m, v := 0.0, 0.0
		if !rms {
			for _, e := range row {
				m += float64(e) / float64(inner)
			}
		}
		for _, e := range row {
			v += (float64(e) - m) * (float64(e) - m) / float64(inner)
		}
		s := 1 / math.Sqrt(v+eps)
		for k, e := range row {
			r := (float64(e) - m) * s * float64(scale[k])
			if bias != nil {
				r += float64(bias[k])
			}
			y = append(y, r)
		}
		mean, inv = append(mean, m), append(inv, s)
	}
	return y, mean, inv
}

// normGraph is op (LayerNormalization with its three outputs and a bias,
// or RMSNormalization) over the axes from axis of src: the input x itself,
// "relu" Relu(x) (laid out as an image) or "matmul" x·w (hidden states).
func normGraph(op string, dims []int64, axis int64, src string, scale, bias *onnx.Tensor) *onnx.Model {
	g := &onnx.Graph{Inputs: []onnx.ValueInfo{vinfo("x", dims...)}, Initializers: []*onnx.Tensor{scale}}
	in := "x"
	switch src {
	case "relu":
		g.Nodes = append(g.Nodes, &onnx.Node{Name: "relu", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"s"}})
		in = "s"
	case "matmul":
		g.Initializers = append(g.Initializers, ramp("w", []int64{dims[len(dims)-1], 40}, 0.07))
		g.Nodes = append(g.Nodes, &onnx.Node{Name: "mm", OpType: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"s"}})
		in = "s"
	}
	attrs := []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: axis}, {Name: "epsilon", Type: onnx.AttrFloat, F: 0.01}}
	n := &onnx.Node{Name: "norm", OpType: op, Inputs: []string{in, "scale"}, Outputs: []string{"y"}, Attrs: attrs}
	if op == "LayerNormalization" {
		g.Initializers = append(g.Initializers, bias)
		n.Inputs = append(n.Inputs, "bias")
		n.Outputs = append(n.Outputs, "mean", "inv")
		g.Outputs = append(g.Outputs, onnx.ValueInfo{Name: "mean"}, onnx.ValueInfo{Name: "inv"})
	}
	g.Nodes = append(g.Nodes, n)
	g.Outputs = append([]onnx.ValueInfo{{Name: "y"}}, g.Outputs...)
	return &onnx.Model{Opsets: []onnx.Opset{{Version: 23}}, Graph: g}
}

// TestNormOverAxes runs LayerNormalization (Y, Mean, InvStdDev) and
// RMSNormalization over the axes from an earlier one, on the stored
// tensor: of an input [2,3,4,5] (laid out as hidden states), of Relu of
// it (laid out as an image: the channels reduced by a 1×1 convolution)
// and of hidden states [1,5,40] a MatMul wrote, against float64.
func TestNormOverAxes(t *testing.T) {
	for _, tc := range []struct {
		src  string
		dims []int64
		axes []int64
	}{
		{"input", []int64{2, 3, 4, 5}, []int64{0, 1, 2}},
		{"relu", []int64{2, 3, 4, 5}, []int64{0, 1, 2, -2}},
		{"relu", []int64{2, 3, 5}, []int64{0, 1}},
		{"matmul", []int64{1, 5, 8}, []int64{1}},
	} {
		x := randTensor("x", tc.dims, 11)
		xf, _ := x.Float32s()
		in, dims := xf, make([]int, len(tc.dims))
		for k, d := range tc.dims {
			dims[k] = int(d)
		}
		switch tc.src {
		case "relu":
			in = make([]float32, len(xf))
			for k, v := range xf {
				in[k] = max(v, 0)
			}
		case "matmul":
			in = matmulRef(xf, 5, 8, 40)
			dims = []int{1, 5, 40}
		}
		for _, axis := range tc.axes {
			a := (int(axis) + len(dims)) % len(dims)
			inner := make([]int64, 0, len(dims)-a)
			for _, d := range dims[a:] {
				inner = append(inner, int64(d))
			}
			scale, bias := randTensor("scale", inner, 2), randTensor("bias", inner, 3)
			sf, _ := scale.Float32s()
			bf, _ := bias.Float32s()
			for _, op := range []string{"LayerNormalization", "RMSNormalization"} {
				t.Run(fmt.Sprintf("%s%v/%s/axis%d", tc.src, tc.dims, op, axis), func(t *testing.T) {
					p, err := alidnn.Compile(normGraph(op, tc.dims, axis, tc.src, scale, bias))
					if err != nil {
						t.Fatal(err)
					}
					res := runResult(t, p, x)
					rms := op == "RMSNormalization"
					b := bf
					if rms {
						b = nil
					}
					y, mean, inv := refNorm(in, dims, a, sf, b, rms, float64(float32(0.01)))
					want := [][]float64{y, mean, inv}
					for k, out := range res.Outputs {
						got, err := out.Float32s()
						if err != nil {
							t.Fatal(err)
						}
						checkCloseRel(t, got, want[k], 1e-4)
					}
				})
			}
		}
	}
}

// matmulRef is x [m,k] · ramp("w", [k,n], 0.07) in float32 values.
func matmulRef(x []float32, m, k, n int) []float32 {
	wf, _ := ramp("w", []int64{int64(k), int64(n)}, 0.07).Float32s()
	out := make([]float32, m*n)
	for i := range m {
		for j := range n {
			s := 0.0
			for l := range k {
				s += float64(x[i*k+l]) * float64(wf[l*n+j])
			}
			out[i*n+j] = float32(s)
		}
	}
	return out
}

func checkCloseRel(t *testing.T, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for k := range want {
		if !(bothNaN(got[k], want[k]) || math.Abs(float64(got[k])-want[k]) <= tol+tol*math.Abs(want[k])) {
			t.Fatalf("value %d: %g, want %g", k, got[k], want[k])
		}
	}
}
