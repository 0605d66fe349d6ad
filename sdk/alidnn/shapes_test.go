package alidnn_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// symbolic is a float input whose dimensions are sizes (> 0) or symbolic
// names.
func symbolic(name string, dims ...any) onnx.ValueInfo {
	v := onnx.ValueInfo{Name: name, ElemType: onnx.Float, Dims: []onnx.Dim{}}
	for _, d := range dims {
		switch d := d.(type) {
		case int:
			v.Dims = append(v.Dims, onnx.Dim{Value: int64(d)})
		case string:
			v.Dims = append(v.Dims, onnx.Dim{Param: d})
		}
	}
	return v
}

// reluModel is Relu of inputs, the first one's.
func reluModel(inputs ...onnx.ValueInfo) *onnx.Model {
	return &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs:  inputs,
		Nodes:   []*onnx.Node{{Name: "r", OpType: "Relu", Inputs: []string{inputs[0].Name}, Outputs: []string{"y"}}},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}}
}

// TestWithShapeBinds compiles inputs with free dimensions for the shapes
// WithShape binds: by input, by symbolic name (shared between inputs), the
// input's binding winning over its dimensions', and ForBatch over a bound
// 1.
func TestWithShapeBinds(t *testing.T) {
	x := symbolic("x", "batch", "seq", 16)
	z := symbolic("z", "batch", 4)
	cases := []struct {
		name   string
		ins    []onnx.ValueInfo
		opts   []alidnn.Option
		shapes [][]int
	}{
		{"by input", []onnx.ValueInfo{x}, []alidnn.Option{alidnn.WithShape("x", 2, 3, 16)}, [][]int{{2, 3, 16}}},
		{"by name", []onnx.ValueInfo{x, z}, []alidnn.Option{alidnn.WithShape("batch", 2), alidnn.WithShape("seq", 5)},
			[][]int{{2, 5, 16}, {2, 4}}},
		{"input wins", []onnx.ValueInfo{x, z}, []alidnn.Option{alidnn.WithShape("batch", 2), alidnn.WithShape("seq", 5), alidnn.WithShape("x", 3, 1, 16)},
			[][]int{{3, 1, 16}, {2, 4}}},
		{"unknown rank", []onnx.ValueInfo{{Name: "u", ElemType: onnx.Float}}, []alidnn.Option{alidnn.WithShape("u", 2, 7)}, [][]int{{2, 7}}},
		{"batch over a bound 1", []onnx.ValueInfo{x}, []alidnn.Option{alidnn.WithShape("batch", 1), alidnn.WithShape("seq", 3), alidnn.ForBatch(4)},
			[][]int{{4, 3, 16}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := alidnn.Compile(reluModel(tc.ins...), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]int
			for _, b := range p.Inputs {
				got = append(got, b.Shape)
			}
			if !slices.EqualFunc(got, tc.shapes, slices.Equal) {
				t.Errorf("inputs %v, want %v", got, tc.shapes)
			}
			if want := tc.shapes[0]; !slices.Equal(p.Outputs[0].Shape, want) {
				t.Errorf("output %v, want %v", p.Outputs[0].Shape, want)
			}
		})
	}
}

// TestWithShapeErrors: a free dimension left unbound, and bindings that
// do not fit the model, are refused naming the input, the dimension and
// the binding.
func TestWithShapeErrors(t *testing.T) {
	x := symbolic("x", "batch", "seq", 16)
	cases := []struct {
		name        string
		ins         []onnx.ValueInfo
		opts        []alidnn.Option
		unsupported bool
		want        []string
	}{
		{"unbound", []onnx.ValueInfo{x}, []alidnn.Option{alidnn.WithShape("seq", 3)}, true,
			[]string{`input "x" [batch seq 16]`, "dimension 0", `"batch"`, "--shape batch=N", "--shape x=NxNx16"}},
		{"unbound second", []onnx.ValueInfo{x}, []alidnn.Option{alidnn.WithShape("batch", 3)}, true,
			[]string{`input "x"`, "dimension 1", `"seq"`, "--shape seq=N"}},
		{"unnamed", []onnx.ValueInfo{{Name: "x", ElemType: onnx.Float, Dims: []onnx.Dim{{Value: 1}, {}}}}, nil, true,
			[]string{`input "x" [1 ?]`, "dimension 1 has no size and no name", "--shape x=1xN"}},
		{"contradicts a fixed dimension", []onnx.ValueInfo{x}, []alidnn.Option{alidnn.WithShape("x", 2, 3, 8)}, false,
			[]string{`input "x"`, "dimension 2 is 16", "x=2x3x8", "makes it 8"}},
		{"rank", []onnx.ValueInfo{x}, []alidnn.Option{alidnn.WithShape("x", 2, 16)}, false,
			[]string{`input "x"`, "3 dimensions", "x=2x16"}},
		{"unknown name", []onnx.ValueInfo{x}, []alidnn.Option{alidnn.WithShape("sequence", 3)}, false,
			[]string{"sequence=3", "no input and no symbolic dimension", "inputs: x", "batch, seq"}},
		{"symbolic with two sizes", []onnx.ValueInfo{x}, []alidnn.Option{alidnn.WithShape("seq", 3, 4)}, false,
			[]string{"seq=3x4", "one size"}},
		{"not positive", []onnx.ValueInfo{x}, []alidnn.Option{alidnn.WithShape("x", 2, 0, 16)}, false,
			[]string{"x=2x0x16", "dimension 1 is 0"}},
		{"against the batch", []onnx.ValueInfo{x}, []alidnn.Option{alidnn.WithShape("x", 2, 3, 16), alidnn.ForBatch(4)}, false,
			[]string{`input "x"`, "bound to 2", "batch to 4"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := alidnn.Compile(reluModel(tc.ins...), tc.opts...)
			if err == nil {
				t.Fatal("compiled")
			}
			t.Log(err)
			if errors.Is(err, alidnn.ErrUnsupported) != tc.unsupported {
				t.Errorf("%v: ErrUnsupported %v, want %v", err, !tc.unsupported, tc.unsupported)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %s", err, w)
				}
			}
		})
	}
}
