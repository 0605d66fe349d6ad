package onnxref_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/internal/onnxref"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestNodeTests runs ONNX's own backend node tests of the operators the
// package implements against upstream's outputs; the others (quantised
// operators, auto_pad, integer graphs, operators it lacks) are refused
// with an error naming the node or input, never run to other numbers.
func TestNodeTests(t *testing.T) {
	dirs, err := filepath.Glob(testenv.TestData(t, "onnx", "node", "test_*"))
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, dir := range dirs {
		m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		ins := map[string]onnxref.Tensor{}
		for k, vi := range m.Graph.Inputs {
			if ins[vi.Name], err = loadTensor(filepath.Join(dir, "test_data_set_0", "input_"+itoa(k)+".pb")); err != nil {
				break // an element type the package has no float64 view of
			}
		}
		if err != nil {
			continue
		}
		got, err := onnxref.Run(m.Graph, m.Opset(""), ins)
		if err != nil {
			if !strings.Contains(err.Error(), "node ") && !strings.Contains(err.Error(), "input ") {
				t.Errorf("%s: %v does not name the node", filepath.Base(dir), err)
			}
			continue
		}
		for k, vo := range m.Graph.Outputs {
			want := readTensor(t, filepath.Join(dir, "test_data_set_0", "output_"+itoa(k)+".pb"))
			compare(t, filepath.Base(dir), got[vo.Name], want, 1e-5)
		}
		ran++
	}
	// Add, AveragePool (but same_upper), BatchNormalization, Conv (but
	// autopad), Flatten, Gemm, GlobalAveragePool, MatMul, MaxPool (but
	// same_upper), Relu, Softmax.
	t.Logf("%d of %d node tests ran", ran, len(dirs))
	if ran < 35 {
		t.Errorf("%d node tests ran, want at least 35", ran)
	}
}

func itoa(k int) string { return string(rune('0' + k)) }

func readTensor(t *testing.T, path string) onnxref.Tensor {
	t.Helper()
	v, err := loadTensor(path)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func loadTensor(path string) (onnxref.Tensor, error) {
	ot, err := onnx.ReadTensor(path)
	if err != nil {
		return onnxref.Tensor{}, err
	}
	return onnxref.FromONNX(ot)
}

func compare(t *testing.T, what string, got, want onnxref.Tensor, tol float64) {
	t.Helper()
	if len(got.V) != len(want.V) || !equalDims(got.Dims, want.Dims) {
		t.Errorf("%s: dims %v, want %v", what, got.Dims, want.Dims)
		return
	}
	for k := range want.V {
		if math.Abs(got.V[k]-want.V[k]) > tol*(1+math.Abs(want.V[k])) {
			t.Errorf("%s: [%d] = %v, want %v", what, k, got.V[k], want.V[k])
			return
		}
	}
}

func equalDims(a, b []int) bool {
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

// run1 runs a one-node graph of op on inputs "a", "b"… (a Tensor without
// values omits its input) and returns its output "y".
func run1(t *testing.T, opset int64, op string, attrs []*onnx.Attribute, ins ...onnxref.Tensor) (onnxref.Tensor, error) {
	t.Helper()
	n := &onnx.Node{Name: "n", OpType: op, Outputs: []string{"y"}, Attrs: attrs}
	m := map[string]onnxref.Tensor{}
	for k, in := range ins {
		name := string(rune('a' + k))
		if in.V == nil {
			n.Inputs = append(n.Inputs, "")
			continue
		}
		n.Inputs = append(n.Inputs, name)
		m[name] = in
	}
	out, err := onnxref.Run(&onnx.Graph{Nodes: []*onnx.Node{n}, Outputs: []onnx.ValueInfo{{Name: "y"}}}, opset, m)
	return out["y"], err
}

func ints(name string, v ...int64) *onnx.Attribute {
	return &onnx.Attribute{Name: name, Type: onnx.AttrInts, Ints: v}
}

func str(name, v string) *onnx.Attribute {
	return &onnx.Attribute{Name: name, Type: onnx.AttrString, S: []byte(v)}
}

func ten(dims []int, v ...float64) onnxref.Tensor { return onnxref.Tensor{Dims: dims, V: v} }

// TestOperators checks the operators no vendored node test covers on
// values worked out by hand.
func TestOperators(t *testing.T) {
	x := ten([]int{1, 1, 2, 2}, 1, 2, 3, 4)
	for _, tc := range []struct {
		name  string
		opset int64
		op    string
		attrs []*onnx.Attribute
		ins   []onnxref.Tensor
		want  onnxref.Tensor
	}{
		{"ConvTranspose stride 2", 11, "ConvTranspose", []*onnx.Attribute{ints("strides", 2, 2)},
			[]onnxref.Tensor{ten([]int{1, 1, 1, 2}, 1, 2), ten([]int{1, 1, 2, 2}, 1, 10, 100, 1000), ten([]int{1}, 0.5)},
			ten([]int{1, 1, 2, 4}, 1.5, 10.5, 2.5, 20.5, 100.5, 1000.5, 200.5, 2000.5)},
		{"Resize nearest by 2", 11, "Resize", []*onnx.Attribute{str("mode", "nearest"), str("coordinate_transformation_mode", "asymmetric"), str("nearest_mode", "floor")},
			[]onnxref.Tensor{ten([]int{1, 1, 1, 2}, 1, 2), {}, ten([]int{4}, 1, 1, 2, 2)},
			ten([]int{1, 1, 2, 4}, 1, 1, 2, 2, 1, 1, 2, 2)},
		{"grouped Conv", 11, "Conv", []*onnx.Attribute{{Name: "group", Type: onnx.AttrInt, I: 2}},
			[]onnxref.Tensor{ten([]int{1, 2, 1, 2}, 1, 2, 3, 4), ten([]int{2, 1, 1, 1}, 10, -1)},
			ten([]int{1, 2, 1, 2}, 10, 20, -3, -4)},
		{"AveragePool 1x2 stride 2", 9, "AveragePool", []*onnx.Attribute{ints("kernel_shape", 1, 2), ints("strides", 1, 2)},
			[]onnxref.Tensor{x}, ten([]int{1, 1, 2, 1}, 1.5, 3.5)},
		{"Transpose", 9, "Transpose", []*onnx.Attribute{ints("perm", 0, 1, 3, 2)}, []onnxref.Tensor{x}, ten([]int{1, 1, 2, 2}, 1, 3, 2, 4)},
		{"Slice opset 9", 9, "Slice", []*onnx.Attribute{ints("axes", 3), ints("starts", 1), ints("ends", 9)}, []onnxref.Tensor{x}, ten([]int{1, 1, 2, 1}, 2, 4)},
		{"Slice step -1", 13, "Slice", nil, []onnxref.Tensor{x, ten([]int{1}, -1), ten([]int{1}, -9), ten([]int{1}, 2), ten([]int{1}, -1)},
			ten([]int{1, 1, 2, 2}, 3, 4, 1, 2)},
		{"Squeeze", 9, "Squeeze", []*onnx.Attribute{ints("axes", 0, 1)}, []onnxref.Tensor{x}, ten([]int{2, 2}, 1, 2, 3, 4)},
		{"Concat axis 2", 9, "Concat", []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 2}}, []onnxref.Tensor{x, x},
			ten([]int{1, 1, 4, 2}, 1, 2, 3, 4, 1, 2, 3, 4)},
		{"Reshape 0 and -1", 9, "Reshape", nil, []onnxref.Tensor{x, ten([]int{3}, 0, -1, 2)}, ten([]int{1, 2, 2}, 1, 2, 3, 4)},
		{"ReduceMean last axis", 9, "ReduceMean", []*onnx.Attribute{ints("axes", -1)}, []onnxref.Tensor{x}, ten([]int{1, 1, 2, 1}, 1.5, 3.5)},
		{"Softmax opset 9 flattens from the axis", 9, "Softmax", []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 2}},
			[]onnxref.Tensor{ten([]int{1, 1, 2, 1}, 0, math.Log(3))}, ten([]int{1, 1, 2, 1}, 0.25, 0.75)},
		{"HardSigmoid", 9, "HardSigmoid", []*onnx.Attribute{{Name: "alpha", Type: onnx.AttrFloat, F: 0.5}},
			[]onnxref.Tensor{ten([]int{3}, -2, 0, 2)}, ten([]int{3}, 0, 0.5, 1)},
		{"Clip opset 11 inputs", 11, "Clip", nil, []onnxref.Tensor{ten([]int{3}, -2, 0, 9), ten(nil, -1), ten(nil, 6)}, ten([]int{3}, -1, 0, 6)},
		{"Pow broadcast", 9, "Pow", nil, []onnxref.Tensor{ten([]int{2}, 3, -2), ten(nil, 2)}, ten([]int{2}, 9, 4)},
		{"Shape", 9, "Shape", nil, []onnxref.Tensor{x}, ten([]int{4}, 1, 1, 2, 2)},
	} {
		got, err := run1(t, tc.opset, tc.op, tc.attrs, tc.ins...)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		compare(t, tc.name, got, tc.want, 1e-12)
	}
}

// TestRefusals: what the package does not implement is an error naming
// the node and the reason, not other numbers.
func TestRefusals(t *testing.T) {
	x := ten([]int{1, 1, 2, 2}, 1, 2, 3, 4)
	for _, tc := range []struct {
		op    string
		attrs []*onnx.Attribute
		ins   []onnxref.Tensor
		want  string
	}{
		{"Resize", []*onnx.Attribute{str("mode", "linear")}, []onnxref.Tensor{x, {}, ten([]int{4}, 1, 1, 2, 2)}, "mode"},
		{"MaxPool", []*onnx.Attribute{ints("kernel_shape", 2, 2), {Name: "ceil_mode", Type: onnx.AttrInt, I: 1}}, []onnxref.Tensor{x}, "ceil_mode"},
		{"Conv", []*onnx.Attribute{str("auto_pad", "SAME_UPPER")}, []onnxref.Tensor{x, ten([]int{1, 1, 1, 1}, 1)}, "auto_pad"},
		{"Gather", nil, []onnxref.Tensor{x, ten(nil, 0)}, "not implemented"},
		{"Add", nil, []onnxref.Tensor{x, ten([]int{3}, 1, 2, 3)}, "broadcast"},
	} {
		_, err := run1(t, 11, tc.op, tc.attrs, tc.ins...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `node 0 (`+tc.op+` "n")`) {
			t.Errorf("%s: %v, want an error naming the node and %q", tc.op, err, tc.want)
		}
	}
}
