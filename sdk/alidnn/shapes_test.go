package alidnn_test

import (
	"errors"
	"math"
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
		{"negative", []onnx.ValueInfo{x}, []alidnn.Option{alidnn.WithShape("x", 2, -1, 16)}, false,
			[]string{"dimension 1 is -1"}},
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

// transformerShapes is the shape arithmetic torch.onnx writes for a
// transformer block of input x [batch, seq, 32] with both free: the
// batch and sequence length read with Shape → Gather → Unsqueeze and
// joined with Concat for Reshapes (x.view(b, t, -1), and the split into
// 2 heads of 8), position ids from Range → Unsqueeze → Expand, an
// all-ones attention mask from ConstantOfShape made additive (0 where
// attended), and expand(b, -1, -1)'s Equal → Where. y = Relu(x · W +
// position) split into heads, W [32, 16].
func transformerShapes(w *onnx.Tensor) *onnx.Model {
	i64 := func(name string, dims []int64, v ...int64) *onnx.Tensor {
		t, _ := onnx.NewInt(name, onnx.Int64, dims, v)
		return t
	}
	node := func(op string, ins []string, out string, attrs ...*onnx.Attribute) *onnx.Node {
		return &onnx.Node{Name: out, OpType: op, Inputs: ins, Outputs: []string{out}, Attrs: attrs}
	}
	ones, _ := onnx.NewInt("one", onnx.Int64, []int64{1}, []int64{1})
	axis0 := &onnx.Attribute{Name: "axis", Type: onnx.AttrInt, I: 0}
	toFloat := &onnx.Attribute{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}
	return &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs: []onnx.ValueInfo{symbolic("x", "batch", "seq", 32)},
		Initializers: []*onnx.Tensor{w, i64("i0", nil, 0), i64("i1", nil, 1), i64("ax0", []int64{1}, 0), i64("heads", []int64{2}, 2, 8),
			i64("minus1", []int64{1}, -1), i64("start", nil, 0), i64("step", nil, 1), i64("three", []int64{1}, 3), i64("m1", nil, -1),
			onnx.NewFloat32("big", nil, []float32{-10000}), onnx.NewFloat32("fone", nil, []float32{1})},
		Nodes: []*onnx.Node{
			node("Shape", []string{"x"}, "s"),
			node("Gather", []string{"s", "i0"}, "b", axis0),
			node("Gather", []string{"s", "i1"}, "t", axis0),
			node("Unsqueeze", []string{"b", "ax0"}, "bu"),
			node("Unsqueeze", []string{"t", "ax0"}, "tu"),
			node("Concat", []string{"bu", "tu", "minus1"}, "merge", axis0),
			node("Reshape", []string{"x", "merge"}, "xm"),
			// position ids, expanded over the batch with expand(b, -1, -1)
			node("Range", []string{"start", "t", "step"}, "pos"),
			node("Unsqueeze", []string{"pos", "ax0"}, "pos1"),
			node("Unsqueeze", []string{"pos1", "minus1"}, "pos2"),
			node("Concat", []string{"bu", "minus1", "minus1"}, "want", axis0),
			node("ConstantOfShape", []string{"three"}, "c3", &onnx.Attribute{Name: "value", Type: onnx.AttrTensor, T: ones}),
			node("Mul", []string{"c3", "m1"}, "neg"),
			node("Equal", []string{"want", "neg"}, "free"),
			node("Where", []string{"free", "c3", "want"}, "eshape"),
			node("Expand", []string{"pos2", "eshape"}, "posb"),
			node("Cast", []string{"posb"}, "posf", toFloat),
			// the additive mask: (1 - ones) · -10000, zero
			node("Concat", []string{"bu", "tu"}, "bt", axis0),
			node("ConstantOfShape", []string{"bt"}, "mask", &onnx.Attribute{Name: "value", Type: onnx.AttrTensor, T: onnx.NewFloat32("v", []int64{1}, []float32{1})}),
			node("Sub", []string{"fone", "mask"}, "inv"),
			node("Mul", []string{"inv", "big"}, "madd"),
			node("Unsqueeze", []string{"madd", "minus1"}, "madd3"),
			node("Add", []string{"posf", "madd3"}, "bias"),
			node("MatMul", []string{"xm", "w"}, "h"),
			node("Add", []string{"h", "bias"}, "hp"),
			node("Relu", []string{"hp"}, "r"),
			node("Concat", []string{"bu", "tu", "heads"}, "split", axis0),
			node("Reshape", []string{"r", "split"}, "y"),
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}}
}

// TestTransformerShapesFold compiles transformerShapes for bound shapes —
// by input, and by the symbolic names — and checks the runs against the
// arithmetic in float64; unbound, it names the free dimension.
func TestTransformerShapesFold(t *testing.T) {
	w := ramp("w", []int64{32, 16}, 0.125)
	wf, _ := w.Float32s()
	for _, tc := range []struct {
		name       string
		batch, seq int
		opts       []alidnn.Option
	}{
		{"by input", 2, 3, []alidnn.Option{alidnn.WithShape("x", 2, 3, 32)}},
		{"by name", 1, 5, []alidnn.Option{alidnn.WithShape("batch", 1), alidnn.WithShape("seq", 5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := alidnn.Compile(transformerShapes(w), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			x := ramp("x", []int64{int64(tc.batch), int64(tc.seq), 32}, 0.5)
			got := runOutput(t, p, x)
			if want := []int64{int64(tc.batch), int64(tc.seq), 2, 8}; !slices.Equal(got.Dims, want) {
				t.Fatalf("shape %v, want %v", got.Dims, want)
			}
			gf, _ := got.Float32s()
			xf, _ := x.Float32s()
			for r := range tc.batch * tc.seq {
				for j := range 16 {
					s := float64(r % tc.seq)
					for k := range 32 {
						s += float64(xf[r*32+k]) * float64(wf[k*16+j])
					}
					want := max(s, 0)
					if g := float64(gf[r*16+j]); math.Abs(g-want) > 1e-5+1e-3*math.Abs(want) {
						t.Fatalf("row %d column %d: %g, want %g", r, j, g, want)
					}
				}
			}
		})
	}
	_, err := alidnn.Compile(transformerShapes(w), alidnn.WithShape("batch", 1))
	if err == nil || !strings.Contains(err.Error(), `"seq"`) || !strings.Contains(err.Error(), "--shape seq=N") {
		t.Errorf("unbound seq: %v", err)
	}
}
