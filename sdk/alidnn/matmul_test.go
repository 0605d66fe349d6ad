package alidnn_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// refMatMul is numpy's matmul of stacks of matrices a (shape as) and b
// (shape bs), in float64: the leading axes broadcast, aligned from the
// right.
func refMatMul(a []float32, as []int64, b []float32, bs []int64) ([]float64, []int64) {
	ra, rb := len(as), len(bs)
	M, K, N := as[ra-2], as[ra-1], bs[rb-1]
	r := max(ra, rb) - 2
	lead := make([]int64, r)
	dim := func(s []int64, k int) int64 { // axis k of the leading r, right-aligned
		if i := k - (r - (len(s) - 2)); i >= 0 {
			return s[i]
		}
		return 1
	}
	for k := range lead {
		lead[k] = max(dim(as, k), dim(bs, k))
	}
	mats := int64(1)
	for _, d := range lead {
		mats *= d
	}
	// offset is the matrix of s that output matrix m reads.
	offset := func(s []int64, m int64) int64 {
		off, stride := int64(0), int64(1)
		for k := r - 1; k >= 0; k-- {
			i := m % lead[k]
			m /= lead[k]
			if d := dim(s, k); d > 1 {
				off += i * stride
				stride *= d
			}
		}
		return off
	}
	y := make([]float64, mats*M*N)
	for m := range mats {
		pa, pb := offset(as, m)*M*K, offset(bs, m)*K*N
		for i := range M {
			for j := range N {
				for k := range K {
					y[(m*M+i)*N+j] += float64(a[pa+i*K+k]) * float64(b[pb+k*N+j])
				}
			}
		}
	}
	return y, append(lead, M, N)
}

// TestMatMulBroadcast runs MatMul with broadcast leading axes against
// numpy's semantics: where the engine can compute it (B's stacks spread
// over A's; A's repeated, [3,1,3,4] × [1,2,4,2] making [3,2,3,2], when A
// is a graph input the host packs broadcast; constants folded; both
// operands computed, either's stacks repeated on the engine) the shape
// and the numbers are numpy's; where a computed A's matrices would have
// to be repeated under constant weights, the compiler refuses with the
// node and the shapes.
func TestMatMulBroadcast(t *testing.T) {
	cases := []struct {
		name       string
		as, bs     []int64
		aIn, bIn   bool // a graph input (else an initializer)
		reluA      bool // A is Relu(a), computed on the device
		readTwice  bool // a Relu reads the input a as well
		refusedFor []string
	}{
		{name: "A's stacks repeated", as: []int64{3, 1, 3, 4}, bs: []int64{1, 2, 4, 2}, aIn: true},
		{name: "computed A's stacks repeated", as: []int64{3, 1, 3, 4}, bs: []int64{1, 2, 4, 2}, aIn: true, reluA: true,
			refusedFor: []string{`"mm"`, "[3 1 3 4]", "[1 2 4 2]", "[3 2]"}},
		{name: "A's stacks repeated, A read twice", as: []int64{3, 1, 3, 4}, bs: []int64{1, 2, 4, 2}, aIn: true, readTwice: true,
			refusedFor: []string{`"mm"`, "[3 1 3 4]", "[1 2 4 2]"}},
		{name: "A a matrix, B a stack", as: []int64{3, 4}, bs: []int64{2, 4, 5}, aIn: true},
		{name: "A's stacks repeated under B's", as: []int64{2, 1, 3, 16}, bs: []int64{3, 16, 5}, aIn: true},
		{name: "constants", as: []int64{3, 1, 3, 4}, bs: []int64{1, 2, 4, 2}},
		{name: "B spread over A", as: []int64{3, 2, 3, 4}, bs: []int64{1, 2, 4, 2}, aIn: true},
		{name: "B of higher rank", as: []int64{3, 4}, bs: []int64{1, 1, 4, 2}, aIn: true},
		{name: "B's stacks under A's", as: []int64{2, 3, 3, 4}, bs: []int64{3, 4, 2}, aIn: true},
		{name: "computed operands", as: []int64{2, 1, 16, 16}, bs: []int64{1, 2, 16, 16}, aIn: true, bIn: true},
		{name: "computed operands of odd sizes", as: []int64{3, 5, 7}, bs: []int64{2, 1, 7, 16}, aIn: true, bIn: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := ramp("a", tc.as, 0.25), ramp("b", tc.bs, -0.5)
			g := &onnx.Graph{
				Nodes:   []*onnx.Node{{Name: "mm", OpType: "MatMul", Inputs: []string{"a", "b"}, Outputs: []string{"y"}}},
				Outputs: []onnx.ValueInfo{{Name: "y"}},
			}
			if tc.reluA {
				g.Nodes = append([]*onnx.Node{{Name: "r", OpType: "Relu", Inputs: []string{"a"}, Outputs: []string{"ar"}}}, g.Nodes...)
				g.Nodes[1].Inputs[0] = "ar"
			}
			if tc.readTwice {
				g.Nodes = append(g.Nodes, &onnx.Node{Name: "r", OpType: "Relu", Inputs: []string{"a"}, Outputs: []string{"z"}})
			}
			var ins []*onnx.Tensor
			for _, op := range []struct {
				t  *onnx.Tensor
				in bool
			}{{a, tc.aIn}, {b, tc.bIn}} {
				if op.in {
					g.Inputs = append(g.Inputs, vinfo(op.t.Name, op.t.Dims...))
					ins = append(ins, op.t)
				} else {
					g.Initializers = append(g.Initializers, op.t)
				}
			}
			p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
			if tc.refusedFor != nil {
				if !errors.Is(err, alidnn.ErrUnsupported) {
					t.Fatalf("compiled to %v, want ErrUnsupported", p.Outputs[0].Shape)
				}
				for _, w := range tc.refusedFor {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %s", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := runOutput(t, p, ins...)
			af, _ := a.Float32s()
			bf, _ := b.Float32s()
			want, shape := refMatMul(af, tc.as, bf, tc.bs)
			if !slices.Equal(got.Dims, shape) {
				t.Fatalf("shape %v, want %v", got.Dims, shape)
			}
			gf, err := got.Float32s()
			if err != nil {
				t.Fatal(err)
			}
			for k, w := range want {
				if d := math.Abs(float64(gf[k]) - w); d > 1e-5+1e-3*math.Abs(w) {
					t.Fatalf("value %d: %g, want %g", k, gf[k], w)
				}
			}
		})
	}
}

// runOutput runs p once on a fresh in-process engine and returns its
// first output.
func runOutput(t *testing.T, p *alidnn.Program, ins ...*onnx.Tensor) *onnx.Tensor {
	t.Helper()
	return runResult(t, p, ins...).Outputs[0]
}

// runResult runs p once on a fresh in-process engine.
func runResult(t *testing.T, p *alidnn.Program, ins ...*onnx.Tensor) *alidnn.Result {
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
	return res
}

// runGraphResult compiles g (opset 13) and runs it once on a fresh
// in-process engine.
func runGraphResult(t *testing.T, g *onnx.Graph, ins ...*onnx.Tensor) *alidnn.Result {
	t.Helper()
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return runResult(t, p, ins...)
}

// TestComputedMatMulBatchNorm normalises the product of two computed
// matrices per column, in fp32 and quantised: the weights are computed on
// the device, so the normalisation cannot be folded into them and runs in
// the epilogue (folding scaled only the constant weights there are none
// of, leaving the product unscaled). A negative scale checks the sign.
func TestComputedMatMulBatchNorm(t *testing.T) {
	const M, K, N = 5, 16, 16
	a, b := wave("a", []int64{M, K}, 1, 0.3), wave("b", []int64{K, N}, 1, 1.9)
	scale, shift := make([]float32, N), make([]float32, N)
	for j := range N {
		scale[j], shift[j] = float32(j%5)-2.5, float32(j)*0.1
	}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{onnx.NewFloat32("s", []int64{N}, scale), onnx.NewFloat32("sh", []int64{N}, shift),
			onnx.NewFloat32("mean", []int64{N}, make([]float32, N)), onnx.NewFloat32("var", []int64{N}, fillF(N, 1))},
		Nodes: []*onnx.Node{
			{Name: "ra", OpType: "Relu", Inputs: []string{"a"}, Outputs: []string{"ar"}},
			{Name: "rb", OpType: "Relu", Inputs: []string{"b"}, Outputs: []string{"br"}},
			{Name: "mm", OpType: "MatMul", Inputs: []string{"ar", "br"}, Outputs: []string{"p"}},
			{Name: "bn", OpType: "BatchNormalization", Inputs: []string{"p", "s", "sh", "mean", "var"}, Outputs: []string{"y"},
				Attrs: []*onnx.Attribute{{Name: "epsilon", Type: onnx.AttrFloat, F: 0}}},
		},
		Inputs:  []onnx.ValueInfo{vinfo("a", M, K), vinfo("b", K, N)},
		Outputs: []onnx.ValueInfo{vinfo("y", M, N)},
	}
	af, _ := a.Float32s()
	bf, _ := b.Float32s()
	want := make([]float64, M*N)
	var big float64
	for i := range M {
		for j := range N {
			var s float64
			for k := range K {
				s += float64(max(af[i*K+k], 0)) * float64(max(bf[k*N+j], 0))
			}
			want[i*N+j] = s*float64(scale[j]) + float64(shift[j])
			big = max(big, math.Abs(want[i*N+j]))
		}
	}
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g}
	dev := local(t)
	p32, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	p8, err := alidnn.Quantize(context.Background(), dev, m, [][]*onnx.Tensor{{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    *alidnn.Program
		tol  float64 // of the largest |output|
	}{{"fp32", p32, 1e-5}, {"int8", p8, 0.02}} {
		got := runProgram(t, dev, c.p, a, b)
		for k, w := range want {
			if d := math.Abs(float64(got[k]) - w); d > c.tol*big {
				t.Errorf("%s: y[%d] = %g, want %g", c.name, k, got[k], w)
			}
		}
	}
}
