package alidnn_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestEmptyInput binds an input's middle dimension to 0: ReduceSum over it
// folds to zeros, ReduceMax to −∞, a Split along the last axis to two
// parts, one of them empty, all returned typed; the runtime still wants
// the input, of its empty shape.
func TestEmptyInput(t *testing.T) {
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{ints64("axes", onnx.Int64, []int64{1}, 1), ints64("sizes", onnx.Int64, []int64{2}, 4, 0)},
		Nodes: []*onnx.Node{
			{OpType: "ReduceSum", Inputs: []string{"x", "axes"}, Outputs: []string{"sum"}},
			{OpType: "ReduceMax", Inputs: []string{"x"}, Outputs: []string{"max"}, Attrs: []*onnx.Attribute{{Name: "axes", Type: onnx.AttrInts, Ints: []int64{1}}, attrInt("keepdims", 0)}},
			{OpType: "Split", Inputs: []string{"x", "sizes"}, Outputs: []string{"a", "b"}, Attrs: []*onnx.Attribute{attrInt("axis", 2)}},
		},
		Inputs:  []onnx.ValueInfo{{Name: "x", ElemType: onnx.Float, Dims: []onnx.Dim{{Value: 2}, {Param: "n"}, {Value: 4}}}},
		Outputs: []onnx.ValueInfo{vinfo("sum", 2, 1, 4), vinfo("max", 2, 4), vinfo("a"), vinfo("b")},
	}
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 17}}, Graph: g}, alidnn.WithShape("x", 2, 0, 4))
	if err != nil {
		t.Fatal(err)
	}
	x := onnx.NewFloat32("x", []int64{2, 0, 4}, nil)
	res := runResult(t, p, x)
	want := []struct {
		dims []int64
		v    float32
	}{{[]int64{2, 1, 4}, 0}, {[]int64{2, 4}, float32(math.Inf(-1))}, {[]int64{2, 0, 4}, 0}, {[]int64{2, 0, 0}, 0}}
	for k, w := range want {
		o := res.Outputs[k]
		f, err := o.Float32s()
		if err != nil || o.DataType != onnx.Float || len(o.Dims) != len(w.dims) || int64(len(f)) != o.Len() {
			t.Fatalf("output %d: %v %v %v (%v)", k, o.DataType, o.Dims, f, err)
		}
		for j, d := range w.dims {
			if o.Dims[j] != d {
				t.Errorf("output %d: dims %v, want %v", k, o.Dims, w.dims)
			}
		}
		for _, v := range f {
			if v != w.v {
				t.Errorf("output %d: %v, want all %v", k, f, w.v)
				break
			}
		}
	}
	s, err := alidnn.Load(context.Background(), local(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background(), onnx.NewFloat32("x", []int64{2, 1, 4}, make([]float32, 8))); !errors.Is(err, alidnn.ErrInput) {
		t.Errorf("a non-empty x: %v, want ErrInput", err)
	}
}

// TestEmptyInputForBatch: an input [N, 0] in a program compiled for 2
// samples is checked per sample and folds; each Run gets its sample of the
// folded output.
func TestEmptyInputForBatch(t *testing.T) {
	g := &onnx.Graph{
		Nodes:   []*onnx.Node{{OpType: "ReduceMin", Inputs: []string{"x"}, Outputs: []string{"m"}, Attrs: []*onnx.Attribute{{Name: "axes", Type: onnx.AttrInts, Ints: []int64{1}}}}},
		Inputs:  []onnx.ValueInfo{{Name: "x", ElemType: onnx.Float, Dims: []onnx.Dim{{Param: "N"}, {Param: "k"}}}},
		Outputs: []onnx.ValueInfo{{Name: "m", ElemType: onnx.Float, Dims: []onnx.Dim{{Param: "N"}, {Value: 1}}}},
	}
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g}, alidnn.ForBatch(2), alidnn.WithShape("x", 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := alidnn.Open(ctx, alidnn.NewLocal(local(t)), p, alidnn.WithBatch(2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	res, err := s.Run(ctx, onnx.NewFloat32("x", []int64{1, 0}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := res.Outputs[0].Float32s(); len(f) != 1 || !math.IsInf(float64(f[0]), 1) {
		t.Errorf("min over nothing: %v %v, want [[+Inf]]", res.Outputs[0].Dims, f)
	}
	if _, err := s.Run(ctx, onnx.NewFloat32("x", []int64{1, 1}, []float32{3})); !errors.Is(err, alidnn.ErrInput) {
		t.Errorf("a sample [1 1]: %v, want ErrInput", err)
	}
}
