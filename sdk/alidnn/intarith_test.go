package alidnn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestIntArith runs ONNX's integer Add, Sub, Mul and Div on INT8 and
// UINT8 inputs where they wrap around (127 + 1, 0 − 1, 200·2, −128·−1) and
// truncate toward zero (−7/2, 7/−2), INT16 Add, UINT16 Sub, and Div of
// both (−32768/−1 wraps, 65535/65534 truncates); Mul of an INT16 input
// staged as fp32 (read by an Add too, see intpath.go) and arithmetic read
// on in the graph are refused.
func TestIntArith(t *testing.T) {
	run := func(typ onnx.DataType, op string, a, b []int64) []int64 {
		t.Helper()
		g := &onnx.Graph{
			Nodes:   []*onnx.Node{{OpType: op, Inputs: []string{"a", "b"}, Outputs: []string{"y"}}},
			Inputs:  []onnx.ValueInfo{typed(vinfo("a", int64(len(a))), typ), typed(vinfo("b", int64(len(a))), typ)},
			Outputs: []onnx.ValueInfo{typed(vinfo("y", int64(len(a))), typ)},
		}
		res := runGraphResult(t, g, ints64("a", typ, []int64{int64(len(a))}, a...), ints64("b", typ, []int64{int64(len(a))}, b...))
		if res.Outputs[0].DataType != typ {
			t.Fatalf("%v %s: output %v", typ, op, res.Outputs[0].DataType)
		}
		got, err := res.Outputs[0].Int64s()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, tc := range []struct {
		typ        onnx.DataType
		op         string
		a, b, want []int64
	}{
		{onnx.Int8, "Add", []int64{127, -128, 5}, []int64{1, -1, -9}, []int64{-128, 127, -4}},
		{onnx.Uint8, "Sub", []int64{0, 255, 7}, []int64{1, 0, 9}, []int64{255, 255, 254}},
		{onnx.Uint8, "Mul", []int64{200, 16, 3}, []int64{2, 16, 5}, []int64{144, 0, 15}},
		{onnx.Int8, "Mul", []int64{-128, -128, 11}, []int64{-1, -128, -12}, []int64{-128, 0, 124}},
		{onnx.Int8, "Div", []int64{-7, 7, -128, 127}, []int64{2, -2, -1, 3}, []int64{-3, -3, -128, 42}},
		{onnx.Uint8, "Div", []int64{255, 7, 0}, []int64{254, 8, 3}, []int64{1, 0, 0}},
		{onnx.Int16, "Add", []int64{32767, -32768}, []int64{1, -1}, []int64{-32768, 32767}},
		{onnx.Uint16, "Sub", []int64{0, 65535}, []int64{1, 65535}, []int64{65535, 0}},
		{onnx.Int16, "Div", []int64{-32768, 32767, -32768, 32767, -32767, 7},
			[]int64{-1, -2, 32767, 32767, 3, -2}, []int64{-32768, -16383, -1, 1, -10922, -3}},
		{onnx.Uint16, "Div", []int64{65535, 65534, 65535, 65533, 65535},
			[]int64{65534, 65535, 1, 3, 256}, []int64{1, 0, 65535, 21844, 255}},
	} {
		got := run(tc.typ, tc.op, tc.a, tc.b)
		for k := range tc.want {
			if got[k] != tc.want[k] {
				t.Errorf("%v %s %v, %v: %v, want %v", tc.typ, tc.op, tc.a, tc.b, got, tc.want)
				break
			}
		}
	}
	for _, tc := range []struct {
		g    *onnx.Graph
		want string
	}{
		{&onnx.Graph{
			Nodes: []*onnx.Node{{OpType: "Mul", Inputs: []string{"a", "b"}, Outputs: []string{"y"}},
				{OpType: "Add", Inputs: []string{"a", "b"}, Outputs: []string{"z"}}},
			Inputs:  []onnx.ValueInfo{typed(vinfo("a", 3), onnx.Int16), typed(vinfo("b", 3), onnx.Int16)},
			Outputs: []onnx.ValueInfo{typed(vinfo("y", 3), onnx.Int16), typed(vinfo("z", 3), onnx.Int16)},
		}, "ONNX's 16-bit integer Mul is not exact in fp32"},
		{&onnx.Graph{
			Nodes: []*onnx.Node{{OpType: "Add", Inputs: []string{"a", "b"}, Outputs: []string{"s"}},
				castTo("s", "y", onnx.Float)},
			Inputs:  []onnx.ValueInfo{typed(vinfo("a", 3), onnx.Int8), typed(vinfo("b", 3), onnx.Int8)},
			Outputs: []onnx.ValueInfo{vinfo("y", 3)},
		}, "in the middle of the graph: the host wraps the result around INT8"},
	} {
		_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 14}}, Graph: tc.g})
		if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one naming %q", err, tc.want)
		}
	}
}
