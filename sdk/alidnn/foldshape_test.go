package alidnn

import (
	"fmt"
	"math"
	"strings"
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

// TestFoldShapeLogic folds the operators torch writes over the shapes of
// a transformer: Range for position ids, Expand, Equal and Where of
// expand(-1), ConstantOfShape, comparisons and logic, Size, a Cast to
// Bool, Pow for the attention scale, Neg and Abs of integers, Trilu for
// causal masks; and refuses the ones that cannot be folded, naming why.
func TestFoldShapeLogic(t *testing.T) {
	ints := func(name string, v ...int64) *value { return constInt(name, onnx.Int64, []int{len(v)}, v) }
	scalar := func(name string, v int64) *value { return constInt(name, onnx.Int64, nil, []int64{v}) }
	fscalar := func(name string, v float32) *value { return constFloat(name, nil, []float32{v}) }
	node := func(op string, ins ...string) *onnx.Node { return &onnx.Node{OpType: op, Inputs: ins} }
	// x is [2,3] = 0..5.
	x := constInt("x", onnx.Int64, []int{2, 3}, []int64{0, 1, 2, 3, 4, 5})
	cases := []struct {
		name   string
		n      *onnx.Node
		consts []*value
		shape  []int
		want   string // the values, as fmt prints them
		err    string
	}{
		{"range", node("Range", "s", "l", "d"), []*value{scalar("s", 0), scalar("l", 5), scalar("d", 2)}, []int{3}, "[0 2 4]", ""},
		{"range down", node("Range", "s", "l", "d"), []*value{scalar("s", 3), scalar("l", -1), scalar("d", -2)}, []int{2}, "[3 1]", ""},
		{"range empty", node("Range", "s", "l", "d"), []*value{scalar("s", 4), scalar("l", 2), scalar("d", 1)}, []int{0}, "[]", ""},
		{"range float", node("Range", "s", "l", "d"), []*value{fscalar("s", 0.5), fscalar("l", 2), fscalar("d", 0.5)}, []int{3}, "[0.5 1 1.5]", ""},
		{"range delta 0", node("Range", "s", "l", "d"), []*value{scalar("s", 0), scalar("l", 5), scalar("d", 0)}, nil, "", "delta 0"},
		{"range NaN", node("Range", "s", "l", "d"), []*value{fscalar("s", 0), fscalar("l", float32(math.NaN())), fscalar("d", 1)}, nil, "", "too large"},
		{"range of mixed types", node("Range", "s", "l", "d"), []*value{scalar("s", 0), fscalar("l", 2), scalar("d", 1)}, nil, "", "one type"},
		{"range of a vector", node("Range", "v", "l", "d"), []*value{ints("v", 0, 1), scalar("l", 5), scalar("d", 1)}, nil, "", `"v"`},
		{"expand rows", node("Expand", "r", "s"), []*value{ints("r", 7, 8, 9), ints("s", 2, 3)}, []int{2, 3}, "[7 8 9 7 8 9]", ""},
		{"expand keeps dims", node("Expand", "x", "s"), []*value{ints("s", 2, 1, 1)}, []int{2, 2, 3}, "[0 1 2 3 4 5 0 1 2 3 4 5]", ""},
		{"expand column", node("Expand", "c", "s"), []*value{constInt("c", onnx.Int64, []int{2, 1}, []int64{1, 2}), ints("s", 1, 3)}, []int{2, 3}, "[1 1 1 2 2 2]", ""},
		{"expand negative", node("Expand", "x", "s"), []*value{ints("s", -1, 3)}, nil, "", "negative"},
		{"expand mismatch", node("Expand", "x", "s"), []*value{ints("s", 4, 3)}, nil, "", "do not broadcast"},
		{"expand too large", node("Expand", "x", "s"), []*value{ints("s", 1<<20, 1<<20, 1, 3)}, nil, "", "too large"},
		{"equal", node("Equal", "s", "m"), []*value{ints("s", 2, -1, -1), scalar("m", -1)}, []int{3}, "[0 1 1]", ""},
		{"less broadcast", node("Less", "r", "c"), []*value{ints("r", 0, 1, 2), constInt("c", onnx.Int64, []int{2, 1}, []int64{1, 2})}, []int{2, 3}, "[1 0 0 1 1 0]", ""},
		{"greater or equal float", node("GreaterOrEqual", "f", "g"), []*value{constFloat("f", []int{2}, []float32{0.5, 1}), fscalar("g", 1)}, []int{2}, "[0 1]", ""},
		{"and", node("And", "a", "b"), []*value{ints("a", 1, 1, 0), ints("b", 1, 0, 0)}, []int{3}, "[1 0 0]", ""},
		{"not", node("Not", "a"), []*value{ints("a", 1, 0)}, []int{2}, "[0 1]", ""},
		{"where", node("Where", "c", "o", "s"), []*value{ints("c", 0, 1, 1), scalar("o", 1), ints("s", 2, -1, -1)}, []int{3}, "[2 1 1]", ""},
		{"size", node("Size", "x"), nil, nil, "[6]", ""},
		{"cast to bool", &onnx.Node{OpType: "Cast", Inputs: []string{"f"}, Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Bool)}}},
			[]*value{constFloat("f", []int{3}, []float32{0.5, 0, -2})}, []int{3}, "[1 0 1]", ""},
		{"pow float", node("Pow", "f", "h"), []*value{constFloat("f", []int{2}, []float32{4, 16}), fscalar("h", -0.5)}, []int{2}, "[0.5 0.25]", ""},
		{"pow int", node("Pow", "a", "e"), []*value{ints("a", 3, -2), ints("e", 2, 3)}, []int{2}, "[9 -8]", ""},
		{"pow int negative", node("Pow", "a", "e"), []*value{ints("a", 3), ints("e", -1)}, nil, "", "Pow of the integer 3 to -1"},
		{"neg int", node("Neg", "a"), []*value{ints("a", 3, -2)}, []int{2}, "[-3 2]", ""},
		{"abs int", node("Abs", "a"), []*value{ints("a", 3, -2)}, []int{2}, "[3 2]", ""},
		{"tril", &onnx.Node{OpType: "Trilu", Inputs: []string{"o"}, Attrs: []*onnx.Attribute{{Name: "upper", Type: onnx.AttrInt, I: 0}}},
			[]*value{constInt("o", onnx.Int64, []int{3, 3}, []int64{1, 1, 1, 1, 1, 1, 1, 1, 1})}, []int{3, 3}, "[1 0 0 1 1 0 1 1 1]", ""},
		{"triu k=1 stacked", node("Trilu", "o", "one"), []*value{constFloat("o", []int{2, 2, 3}, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), scalar("one", 1)},
			[]int{2, 2, 3}, "[0 2 3 0 0 6 0 8 9 0 0 12]", ""},
		{"matmul of vectors", node("MatMul", "f", "g"), []*value{constFloat("f", []int{2}, []float32{1, 2}), constFloat("g", []int{2}, []float32{3, 4})}, nil, "[11]", ""},
		{"matmul of a vector and a stack", node("MatMul", "f", "g"), []*value{constFloat("f", []int{2}, []float32{1, 2}), constFloat("g", []int{2, 2, 1}, []float32{3, 4, 5, 6})},
			[]int{2, 1}, "[11 17]", ""},
		{"slice of a scalar", node("Slice", "f", "s", "e"), []*value{fscalar("f", 1), ints("s", 0), ints("e", 1)}, nil, "", "Slice of a scalar"},
		{"slice on too many axes", node("Slice", "x", "s", "e"), []*value{ints("s", 0, 0, 0), ints("e", 1, 1, 1)}, nil, "", "on 3 axes"},
		{"concat of scalars", node("Concat", "f", "g"), []*value{fscalar("f", 1), fscalar("g", 2)}, nil, "", "Concat of scalars"},
		{"concat of other widths", node("Concat", "x", "g"), []*value{constFloat("g", []int{1, 2}, []float32{1, 2})}, nil, "", "shapes [2 3] and [1 2]"},
		{"reduceprod of a scalar", &onnx.Node{OpType: "ReduceProd", Inputs: []string{"f"}, Attrs: []*onnx.Attribute{{Name: "axes", Type: onnx.AttrInts, Ints: []int64{0}}}},
			[]*value{fscalar("f", 2)}, nil, "", "ReduceProd of a scalar"},
		{"constant of shape too large", node("ConstantOfShape", "s"), []*value{ints("s", 1<<40, 1<<40)}, nil, "", "too large"},
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
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("fold: %v, want an error saying %q", err, tc.err)
				}
				return
			}
			if !done || err != nil {
				t.Fatalf("fold: %v, %v", done, err)
			}
			got := c.vals["out"]
			vals := fmt.Sprint(got.ints())
			if got.isFloat() {
				vals = fmt.Sprint(got.floats())
			}
			if !eqInts(got.shape, tc.shape) || vals != tc.want {
				t.Errorf("got %v %s, want %v %s", got.shape, vals, tc.shape, tc.want)
			}
		})
	}
}
