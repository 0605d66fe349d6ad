package alidnn

import (
	"errors"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

func graph(inputs []onnx.ValueInfo, inits []*onnx.Tensor, nodes ...*onnx.Node) *onnx.Model {
	return &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs: inputs, Initializers: inits, Nodes: nodes,
		Outputs: []onnx.ValueInfo{{Name: nodes[len(nodes)-1].Outputs[0]}},
	}}
}

func vi(name string, dims ...int64) onnx.ValueInfo {
	v := onnx.ValueInfo{Name: name, ElemType: onnx.Float}
	for _, d := range dims {
		v.Dims = append(v.Dims, onnx.Dim{Value: d})
	}
	return v
}

// TestCompileErrors checks that models the engine cannot run are refused
// with errors naming the node and what is wrong.
func TestCompileErrors(t *testing.T) {
	x := vi("x", 1, 2, 8, 8)
	training, err := onnx.NewInt("t", onnx.Bool, nil, []int64{1})
	if err != nil {
		t.Fatal(err)
	}
	pads, err := onnx.NewInt("pads", onnx.Int64, []int64{8}, []int64{0, 0, 1, 1, 0, 0, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		m    *onnx.Model
		want []string
	}{
		{"unknown operator", graph([]onnx.ValueInfo{x}, nil, &onnx.Node{Name: "lstm1", OpType: "LSTM", Inputs: []string{"x"}, Outputs: []string{"y"}}),
			[]string{"LSTM", `"lstm1"`}},
		{"3-D conv", graph([]onnx.ValueInfo{vi("x", 1, 2, 4, 8, 8)}, []*onnx.Tensor{onnx.NewFloat32("w", []int64{4, 2, 3, 3, 3}, make([]float32, 216))},
			&onnx.Node{Name: "c", OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"y"}}), []string{"Conv", `"c"`, "rank-5", "1-D and 2-D"}},
		{"weights not constant", graph([]onnx.ValueInfo{x, vi("w", 4, 2, 3, 3)}, nil, &onnx.Node{Name: "c", OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"y"}}),
			[]string{"weights", "constant"}},
		{"symbolic batch", graph([]onnx.ValueInfo{{Name: "x", ElemType: onnx.Float, Dims: []onnx.Dim{{Param: "N"}, {Value: 2}}}}, nil,
			&onnx.Node{Name: "r", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}}), []string{`input "x"`, `"N"`}},
		{"foreign domain", graph([]onnx.ValueInfo{x}, nil, &onnx.Node{Name: "q", OpType: "QuickGelu", Domain: "com.microsoft", Inputs: []string{"x"}, Outputs: []string{"y"}}),
			[]string{"com.microsoft"}},
		{"dilated pooling of integers", graph([]onnx.ValueInfo{{Name: "x", ElemType: onnx.Uint8, Dims: []onnx.Dim{{Value: 1}, {Value: 2}, {Value: 8}, {Value: 8}}}}, nil,
			&onnx.Node{Name: "p", OpType: "MaxPool", Inputs: []string{"x"}, Outputs: []string{"y"},
				Attrs: []*onnx.Attribute{{Name: "kernel_shape", Type: onnx.AttrInts, Ints: []int64{2, 2}}, {Name: "dilations", Type: onnx.AttrInts, Ints: []int64{2, 2}}}}),
			[]string{"MaxPool", `"p"`, "dilated", "integer"}},
		// The channels on the lanes would become the outer axis, each
		// value an element of its own.
		{"transpose of a computed tensor across lanes", graph([]onnx.ValueInfo{vi("x", 2, 2, 8, 8)}, nil,
			&onnx.Node{Name: "r", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"r"}},
			&onnx.Node{Name: "t", OpType: "Transpose", Inputs: []string{"r"}, Outputs: []string{"t"},
				Attrs: []*onnx.Attribute{{Name: "perm", Type: onnx.AttrInts, Ints: []int64{1, 0, 2, 3}}}},
			&onnx.Node{Name: "s", OpType: "Relu", Inputs: []string{"t"}, Outputs: []string{"y"}}), []string{"Transpose", `"t"`, "lanes", "Relu"}},
		{"pad before relu", graph([]onnx.ValueInfo{x}, []*onnx.Tensor{pads},
			&onnx.Node{Name: "p", OpType: "Pad", Inputs: []string{"x", "pads"}, Outputs: []string{"p"}},
			&onnx.Node{Name: "r", OpType: "Relu", Inputs: []string{"p"}, Outputs: []string{"y"}}), []string{"Relu", `"r"`, "Pad", "Conv"}},
		{"pad before maxpool", graph([]onnx.ValueInfo{x}, []*onnx.Tensor{pads},
			&onnx.Node{Name: "p", OpType: "Pad", Inputs: []string{"x", "pads"}, Outputs: []string{"p"}},
			&onnx.Node{Name: "m", OpType: "MaxPool", Inputs: []string{"p"}, Outputs: []string{"y"}, Attrs: []*onnx.Attribute{{Name: "kernel_shape", Type: onnx.AttrInts, Ints: []int64{2, 2}}}}),
			[]string{"MaxPool", `"m"`, "Pad", "AveragePool"}},
		{"pad reflect", graph([]onnx.ValueInfo{x}, []*onnx.Tensor{pads}, &onnx.Node{Name: "p", OpType: "Pad", Inputs: []string{"x", "pads"}, Outputs: []string{"y"},
			Attrs: []*onnx.Attribute{{Name: "mode", Type: onnx.AttrString, S: []byte("reflect")}}}), []string{"Pad", `"p"`, "reflect"}},
		{"pad as output", graph([]onnx.ValueInfo{x}, []*onnx.Tensor{pads}, &onnx.Node{Name: "p", OpType: "Pad", Inputs: []string{"x", "pads"}, Outputs: []string{"y"}}),
			[]string{`"y"`, "Pad"}},
		{"clip bound computed", graph([]onnx.ValueInfo{x, vi("lo")}, nil, &onnx.Node{Name: "c", OpType: "Clip", Inputs: []string{"x", "lo"}, Outputs: []string{"y"}}),
			[]string{"Clip", `"c"`, "min", `"lo"`, "constant"}},
		{"dropout training", graph([]onnx.ValueInfo{x}, []*onnx.Tensor{training}, &onnx.Node{Name: "d", OpType: "Dropout", Inputs: []string{"x", "", "t"}, Outputs: []string{"y"}}),
			[]string{"Dropout", `"d"`, "training", `"t"`}},
		{"div broadcasting the dividend", graph([]onnx.ValueInfo{x, vi("z", 1, 2, 1, 8)}, nil,
			&onnx.Node{Name: "d", OpType: "Div", Inputs: []string{"z", "x"}, Outputs: []string{"y"}}), []string{"Div", `"d"`, `"z"`, "second operand"}},
		{"pooling window beyond POOL's", graph([]onnx.ValueInfo{vi("x", 1, 2, 32, 32)}, nil,
			&onnx.Node{Name: "p", OpType: "AveragePool", Inputs: []string{"x"}, Outputs: []string{"y"}, Attrs: []*onnx.Attribute{{Name: "kernel_shape", Type: onnx.AttrInts, Ints: []int64{8, 16}}}}),
			[]string{"AveragePool", `"p"`, "8×16", "15"}},
		{"pow by exponents broadcast against the base", graph([]onnx.ValueInfo{vi("x", 1, 2, 1, 8), vi("p", 1, 1, 8, 1)}, nil,
			&onnx.Node{Name: "p", OpType: "Pow", Inputs: []string{"x", "p"}, Outputs: []string{"y"}}), []string{"Pow", `"p"`, "broadcasts both", "[1 2 8 8]"}},
		{"pow by a large integer", graph([]onnx.ValueInfo{x}, []*onnx.Tensor{onnx.NewFloat32("e", nil, []float32{17})},
			&onnx.Node{Name: "p", OpType: "Pow", Inputs: []string{"x", "e"}, Outputs: []string{"y"}}), []string{"Pow", `"p"`, "17", "multiply"}},
		{"flatten of a transposed tensor dropping the batch", graph([]onnx.ValueInfo{x}, nil,
			&onnx.Node{Name: "r", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"r"}},
			&onnx.Node{Name: "t", OpType: "Transpose", Inputs: []string{"r"}, Outputs: []string{"t"},
				Attrs: []*onnx.Attribute{{Name: "perm", Type: onnx.AttrInts, Ints: []int64{0, 2, 1, 3}}}},
			&onnx.Node{Name: "f", OpType: "Flatten", Inputs: []string{"t"}, Outputs: []string{"y"},
				Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 2}}}), []string{"Flatten", `"f"`, "Transpose", `"t"`, "lanes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Compile(c.m)
			if err == nil {
				t.Fatal("compiled")
			}
			if !errors.Is(err, ErrUnsupported) {
				t.Errorf("%v does not wrap ErrUnsupported", err)
			}
			for _, s := range c.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%v does not mention %s", err, s)
				}
			}
		})
	}
}

// TestLayoutRoundTrip packs and unpacks tensors of several ranks and
// layouts, including broadcast inputs.
func TestLayoutRoundTrip(t *testing.T) {
	for _, shape := range [][]int{{5}, {3, 20}, {2, 17, 3, 4}, {1, 2, 3, 40}} {
		for _, l := range []layout{convLayout(shape), matLayout(shape)} {
			n := 1
			for _, d := range shape {
				n *= d
			}
			f := make([]float32, n)
			iv := make([]int64, n)
			for k := range f {
				f[k] = float32(k) + 0.5
				iv[k] = int64(k%255) - 127
			}
			if got := unpackF32(l, packF32(l, f, nil)); !equalF(got, f) {
				t.Errorf("%v %+v: fp32 round trip differs", shape, l)
			}
			if got := unpackInt(l, i8, packInt(l, i8, iv, nil)); !equalI(got, iv) {
				t.Errorf("%v %+v: int8 round trip differs", shape, l)
			}
			// Distinct values land in distinct lanes.
			seen := map[int]bool{}
			for _, off := range l.offsets() {
				if seen[off] || off >= l.elems()*lanes {
					t.Fatalf("%v %+v: offset %d reused or out of range", shape, l, off)
				}
				seen[off] = true
			}
		}
	}
	// [3] broadcast to [2, 3]: each row repeats the vector.
	l := convLayout([]int{2, 3})
	got := unpackF32(l, packF32(l, []float32{1, 2, 3}, broadcastIndex([]int{2, 3}, []int{3})))
	if !equalF(got, []float32{1, 2, 3, 1, 2, 3}) {
		t.Errorf("broadcast: %v", got)
	}
}

func equalF(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

func equalI(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

func TestFixedPoint(t *testing.T) {
	for _, r := range []float64{1, 0.5, 0.3, 1e-4, 3.7, 0.0078125} {
		m, s := fixedPoint(r)
		got := float64(m) / float64(uint64(1)<<uint(31+s))
		if m < 1<<30 || m >= 1<<31 || got/r > 1+1e-9 || got/r < 1-1e-9 {
			t.Errorf("fixedPoint(%g) = %d, %d = %g", r, m, s, got)
		}
	}
}

// TestWindowTooWide refuses a pooling window wider than its padded input,
// which integer division would have turned into one output.
func TestWindowTooWide(t *testing.T) {
	m := graph([]onnx.ValueInfo{vi("x", 1, 2, 8, 8)}, nil, &onnx.Node{Name: "p", OpType: "MaxPool", Inputs: []string{"x"}, Outputs: []string{"y"},
		Attrs: []*onnx.Attribute{{Name: "kernel_shape", Type: onnx.AttrInts, Ints: []int64{10, 2}}}})
	_, err := Compile(m)
	if err == nil || !strings.Contains(err.Error(), `"p"`) || !strings.Contains(err.Error(), "window 10 wide") {
		t.Errorf("Compile of a 10-row window on 8 rows: %v, want an error naming the node and the window", err)
	}
}
