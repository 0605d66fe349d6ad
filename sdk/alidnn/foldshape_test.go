package alidnn

import (
	"fmt"
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestFoldShapeArithmetic folds the shape operators on small constants,
// edge cases included: Slice with negative and out-of-range bounds and a
// negative step, Gather along axis 1 with a negative index, ReduceProd
// without keepdims, and Shape with negative start and end.
func TestFoldShapeArithmetic(t *testing.T) {
	// x is [2,3] = 0..5.
	x := constInt("x", onnx.Int64, []int{2, 3}, []int64{0, 1, 2, 3, 4, 5})
	ints := func(name string, v ...int64) *value { return constInt(name, onnx.Int64, []int{len(v)}, v) }
	attr := func(name string, v int64) *onnx.Attribute {
		return &onnx.Attribute{Name: name, Type: onnx.AttrInt, I: v}
	}
	cases := []struct {
		name   string
		n      *onnx.Node
		consts []*value
		shape  []int
		want   []int64
	}{
		{"slice to the end", &onnx.Node{OpType: "Slice", Inputs: []string{"x", "s", "e", "a"}},
			[]*value{ints("s", 1), ints("e", math.MaxInt64), ints("a", 1)}, []int{2, 2}, []int64{1, 2, 4, 5}},
		{"slice negative start", &onnx.Node{OpType: "Slice", Inputs: []string{"x", "s", "e"}},
			[]*value{ints("s", -1, -2), ints("e", 2, 3)}, []int{1, 2}, []int64{4, 5}},
		{"slice reversed", &onnx.Node{OpType: "Slice", Inputs: []string{"x", "s", "e", "a", "st"}},
			[]*value{ints("s", -1), ints("e", math.MinInt64), ints("a", -1), ints("st", -2)}, []int{2, 2}, []int64{2, 0, 5, 3}},
		{"slice empty", &onnx.Node{OpType: "Slice", Inputs: []string{"x", "s", "e", "a"}},
			[]*value{ints("s", 2), ints("e", 1), ints("a", 1)}, []int{2, 0}, []int64{}},
		{"gather axis 1", &onnx.Node{OpType: "Gather", Inputs: []string{"x", "i"}, Attrs: []*onnx.Attribute{attr("axis", 1)}},
			[]*value{ints("i", -1, 0)}, []int{2, 2}, []int64{2, 0, 5, 3}},
		{"gather scalar", &onnx.Node{OpType: "Gather", Inputs: []string{"x", "i"}},
			[]*value{constInt("i", onnx.Int64, nil, []int64{1})}, []int{3}, []int64{3, 4, 5}},
		{"reduceprod axis 1", &onnx.Node{OpType: "ReduceProd", Inputs: []string{"x"}, Attrs: []*onnx.Attribute{
			{Name: "axes", Type: onnx.AttrInts, Ints: []int64{1}}, attr("keepdims", 0)}}, nil, []int{2}, []int64{0, 60}},
		{"reduceprod all", &onnx.Node{OpType: "ReduceProd", Inputs: []string{"y"}},
			[]*value{ints("y", 2, 3, 4)}, []int{1}, []int64{24}},
		{"shape start end", &onnx.Node{OpType: "Shape", Inputs: []string{"x"}, Attrs: []*onnx.Attribute{attr("start", -1), attr("end", 5)}},
			nil, []int{1}, []int64{3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &compiler{vals: map[string]*value{"x": x}, uses: map[string]int{}, opsetVer: 18}
			for _, v := range tc.consts {
				v.isConst = true
				c.vals[v.name] = v
			}
			tc.n.Outputs = []string{"out"}
			done, err := c.fold(tc.n)
			if !done || err != nil {
				t.Fatalf("fold: %v, %v", done, err)
			}
			got := c.vals["out"]
			if !eqInts(got.shape, tc.shape) || fmt.Sprint(got.ints()) != fmt.Sprint(tc.want) {
				t.Errorf("got %v %v, want %v %v", got.shape, got.ints(), tc.shape, tc.want)
			}
		})
	}
}
