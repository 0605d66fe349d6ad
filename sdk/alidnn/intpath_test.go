package alidnn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestInt32Arith runs ONNX's INT16 and UINT16 Mul and UINT32 Add, Sub,
// Mul and Equal on the engine's int32 lanes where they wrap around
// (−32768·−1, 65535·65535, 2³²−1 + 1, 0 − 1, 2³¹·2), and refuses what
// neither they nor fp32 hold exactly: UINT32 Max, a UINT32 product or an
// INT32 quotient read on.
func TestInt32Arith(t *testing.T) {
	for _, tc := range []struct {
		typ, out   onnx.DataType
		op         string
		a, b, want []int64
	}{
		{onnx.Int16, onnx.Int16, "Mul", []int64{-32768, 32767, 300, -7, 181},
			[]int64{-1, 32767, 300, 9, 181}, []int64{-32768, 1, 24464, -63, 32761}},
		{onnx.Uint16, onnx.Uint16, "Mul", []int64{65535, 256, 65535, 3},
			[]int64{65535, 256, 2, 0}, []int64{1, 0, 65534, 0}},
		{onnx.Uint32, onnx.Uint32, "Add", []int64{1<<32 - 1, 1 << 31, 5, 1<<31 - 1},
			[]int64{1, 1 << 31, 7, 1}, []int64{0, 0, 12, 1 << 31}},
		{onnx.Uint32, onnx.Uint32, "Sub", []int64{0, 1 << 31, 7, 1<<32 - 1},
			[]int64{1, 1<<32 - 1, 5, 1 << 31}, []int64{1<<32 - 1, 1<<31 + 1, 2, 1<<31 - 1}},
		{onnx.Uint32, onnx.Uint32, "Mul", []int64{1<<32 - 1, 1 << 31, 65536, 3000000000},
			[]int64{1<<32 - 1, 2, 65536, 3}, []int64{1, 0, 0, 9000000000 % (1 << 32)}},
		{onnx.Uint32, onnx.Bool, "Equal", []int64{1<<32 - 1, 1 << 31, 0, 1<<24 + 1},
			[]int64{1<<32 - 1, 0, 1 << 31, 1 << 24}, []int64{1, 0, 0, 0}},
	} {
		n := int64(len(tc.a))
		g := &onnx.Graph{
			Nodes:   []*onnx.Node{{OpType: tc.op, Inputs: []string{"a", "b"}, Outputs: []string{"y"}}},
			Inputs:  []onnx.ValueInfo{typed(vinfo("a", n), tc.typ), typed(vinfo("b", n), tc.typ)},
			Outputs: []onnx.ValueInfo{typed(vinfo("y", n), tc.out)},
		}
		res := runGraphResult(t, g, ints64("a", tc.typ, []int64{n}, tc.a...), ints64("b", tc.typ, []int64{n}, tc.b...))
		if res.Outputs[0].DataType != tc.out {
			t.Fatalf("%v %s: output %v", tc.typ, tc.op, res.Outputs[0].DataType)
		}
		got, err := res.Outputs[0].Int64s()
		if err != nil {
			t.Fatal(err)
		}
		for k := range tc.want {
			if got[k] != tc.want[k] {
				t.Errorf("%v %s %v, %v: %v, want %v", tc.typ, tc.op, tc.a, tc.b, got, tc.want)
				break
			}
		}
	}
	two := func(op string, typ onnx.DataType, more ...*onnx.Node) *onnx.Graph {
		return &onnx.Graph{
			Nodes:   append([]*onnx.Node{{OpType: op, Inputs: []string{"a", "b"}, Outputs: []string{"y"}}}, more...),
			Inputs:  []onnx.ValueInfo{typed(vinfo("a", 3), typ), typed(vinfo("b", 3), typ)},
			Outputs: []onnx.ValueInfo{typed(vinfo("y", 3), typ)},
		}
	}
	mid := two("Mul", onnx.Uint32, castTo("y", "z", onnx.Float))
	mid.Outputs = []onnx.ValueInfo{vinfo("z", 3)}
	for _, tc := range []struct {
		g    *onnx.Graph
		want string
	}{
		{two("Max", onnx.Uint32), `input "a": element type UINT32, read by Max`},
		{mid, "in the middle of the graph: the host wraps the int32 result around UINT32"},
		{two("Div", onnx.Int32, castTo("y", "z", onnx.Float)), `Div of INT32 "a" [3] and "b" [3] in the middle of the graph`},
	} {
		_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 14}}, Graph: tc.g})
		if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one naming %q", err, tc.want)
		}
	}
}

// TestUint32Order runs Less, LessOrEqual, Greater and GreaterOrEqual of
// UINT32 inputs on pairs whose int32 difference overflows (0 against
// 2³²−1, 2³¹ against 2³¹−1), that differ by 1 above fp32's 2²⁴, and
// that are equal, against Go's unsigned comparison.
func TestUint32Order(t *testing.T) {
	a := []int64{0, 1<<32 - 1, 1 << 31, 1<<31 - 1, 1<<24 + 1, 1<<32 - 2, 3000000000, 1<<32 - 1, 1 << 31, 0, 7}
	b := []int64{1<<32 - 1, 0, 1<<31 - 1, 1 << 31, 1 << 24, 1<<32 - 1, 3000000001, 1<<32 - 1, 1 << 31, 0, 1<<31 + 7}
	cmp := map[string]func(x, y int64) bool{
		"Less":           func(x, y int64) bool { return x < y },
		"LessOrEqual":    func(x, y int64) bool { return x <= y },
		"Greater":        func(x, y int64) bool { return x > y },
		"GreaterOrEqual": func(x, y int64) bool { return x >= y },
	}
	n := int64(len(a))
	for op, f := range cmp {
		g := &onnx.Graph{
			Nodes:   []*onnx.Node{{OpType: op, Inputs: []string{"a", "b"}, Outputs: []string{"y"}}},
			Inputs:  []onnx.ValueInfo{typed(vinfo("a", n), onnx.Uint32), typed(vinfo("b", n), onnx.Uint32)},
			Outputs: []onnx.ValueInfo{typed(vinfo("y", n), onnx.Bool)},
		}
		res := runGraphResult(t, g, ints64("a", onnx.Uint32, []int64{n}, a...), ints64("b", onnx.Uint32, []int64{n}, b...))
		got, err := res.Outputs[0].Int64s()
		if err != nil {
			t.Fatal(err)
		}
		for k := range a {
			want := int64(0)
			if f(a[k], b[k]) {
				want = 1
			}
			if got[k] != want {
				t.Errorf("%s(%d, %d) = %d, want %d", op, a[k], b[k], got[k], want)
			}
		}
	}
}

// TestEqualInt32Constant compares UINT32 and INT32 inputs with constants
// whose negation leaves int32 (4·10⁹, −2³¹): the difference wraps.
func TestEqualInt32Constant(t *testing.T) {
	for _, tc := range []struct {
		typ  onnx.DataType
		k    int64
		x    []int64
		want []int64
	}{
		{onnx.Uint32, 4000000000, []int64{4000000000, 5, 0, 1<<32 - 1}, []int64{1, 0, 0, 0}},
		{onnx.Int32, -1 << 31, []int64{-1 << 31, 0, 1<<31 - 1, -1}, []int64{1, 0, 0, 0}},
	} {
		n := int64(len(tc.x))
		k, err := onnx.NewInt("k", tc.typ, nil, []int64{tc.k})
		if err != nil {
			t.Fatal(err)
		}
		g := &onnx.Graph{
			Nodes:        []*onnx.Node{{OpType: "Equal", Inputs: []string{"x", "k"}, Outputs: []string{"y"}}},
			Inputs:       []onnx.ValueInfo{typed(vinfo("x", n), tc.typ)},
			Outputs:      []onnx.ValueInfo{typed(vinfo("y", n), onnx.Bool)},
			Initializers: []*onnx.Tensor{k},
		}
		res := runGraphResult(t, g, ints64("x", tc.typ, []int64{n}, tc.x...))
		got, err := res.Outputs[0].Int64s()
		if err != nil {
			t.Fatal(err)
		}
		for i := range tc.want {
			if got[i] != tc.want[i] {
				t.Errorf("%v Equal %v, %d: %v, want %v", tc.typ, tc.x, tc.k, got, tc.want)
				break
			}
		}
	}
}
