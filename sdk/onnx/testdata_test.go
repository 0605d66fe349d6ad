package onnx

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
)

// product returns the product of dims, as Len should.
func product(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

// checkTensor fails unless every element of x is readable and there are as
// many as its dims say.
func checkTensor(t *testing.T, where string, x *Tensor) {
	t.Helper()
	var n int
	var err error
	switch {
	case x.DataType.IsFloat():
		var v []float32
		v, err = x.Float32s()
		n = len(v)
	case x.DataType.integer():
		var v []int64
		v, err = x.Int64s()
		n = len(v)
	default:
		// STRING decodes, but neither accessor reads it: both must say so
		// rather than return numbers.
		_, ferr := x.Float32s()
		_, ierr := x.Int64s()
		if ferr == nil || ierr == nil {
			t.Errorf("%s: %v read as numbers (Float32s: %v, Int64s: %v)", where, x.DataType, ferr, ierr)
		}
		return
	}
	if err != nil {
		t.Errorf("%s: %v", where, err)
	} else if int64(n) != product(x.Dims) || x.Len() != product(x.Dims) {
		t.Errorf("%s: %d elements, Len %d, dims %v", where, n, x.Len(), x.Dims)
	}
}

// unsupportedType reports whether err is ReadTensor's refusal of an element
// type this package does not decode, which names the field and the type.
func unsupportedType(err error) bool {
	var e *Error
	return errors.As(err, &e) && strings.HasSuffix(e.Path, "data_type") &&
		strings.HasPrefix(e.Detail, "DataType(") && strings.HasSuffix(e.Detail, ") is not supported")
}

func TestNodeTestData(t *testing.T) {
	models, _ := filepath.Glob(testenv.TestData(t, "onnx", "node", "*", "model.onnx"))
	if len(models) == 0 {
		t.Fatal("no onnx/node/*/model.onnx in the test data")
	}
	for _, path := range models {
		dir := filepath.Dir(path)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			m, err := ReadModel(path)
			if err != nil {
				t.Fatal(err)
			}
			// An _expanded folder holds the operator's function body.
			expanded := strings.Contains(filepath.Base(dir), "_expanded")
			if (len(m.Graph.Nodes) != 1 && !expanded) || m.Opset("") == 0 {
				t.Errorf("%d nodes, opset %d; want one node of the default domain", len(m.Graph.Nodes), m.Opset(""))
			}
			for _, x := range m.Graph.Initializers {
				checkTensor(t, "initializer "+x.Name, x)
			}
			pbs, _ := filepath.Glob(filepath.Join(dir, "test_data_set_*", "*.pb"))
			if len(pbs) == 0 {
				t.Fatal("no test data sets")
			}
			for _, p := range pbs {
				x, err := ReadTensor(p)
				if unsupportedType(err) {
					continue // types this package does not read (complex): refused by name
				}
				if err != nil {
					t.Fatal(err)
				}
				checkTensor(t, filepath.Base(p), x)
				// The graph declares each input and output with the same
				// element type and shape as its test data.
				i := strings.TrimSuffix(filepath.Base(p), ".pb")
				list, k := m.Graph.Inputs, strings.TrimPrefix(i, "input_")
				if strings.HasPrefix(i, "output_") {
					list, k = m.Graph.Outputs, strings.TrimPrefix(i, "output_")
				}
				idx := int(k[0] - '0')
				if idx >= len(list) {
					t.Fatalf("%s: graph has %d of them", p, len(list))
				}
				vi := list[idx]
				if vi.ElemType != x.DataType || len(vi.Dims) != len(x.Dims) {
					t.Errorf("%s: %v %v, graph declares %s as %v %v", filepath.Base(p), x.DataType, x.Dims, vi.Name, vi.ElemType, vi.Dims)
				}
				for j, d := range vi.Dims {
					if d.Param == "" && j < len(x.Dims) && d.Value != x.Dims[j] {
						t.Errorf("%s: dims %v, graph declares %v", filepath.Base(p), x.Dims, vi.Dims)
					}
				}
			}
		})
	}
}

func TestNodeConvTestData(t *testing.T) {
	m, err := ReadModel(testenv.TestData(t, "onnx", "node", "test_basic_conv_with_padding", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	n := m.Graph.Nodes[0]
	pads, err := n.Ints("pads")
	if n.OpType != "Conv" || err != nil || !slices.Equal(pads, []int64{1, 1, 1, 1}) {
		t.Errorf("node %+v: pads %v, %v", n, pads, err)
	}
	// Weights are a graph input, with their data in input_1.pb.
	w, err := ReadTensor(testenv.TestData(t, "onnx", "node", "test_basic_conv_with_padding", "test_data_set_0", "input_1.pb"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := w.Float32s()
	if err != nil || !slices.Equal(w.Dims, []int64{1, 1, 3, 3}) || len(v) != 9 || v[0] != 1 {
		t.Errorf("weights %v %v, %v", w.Dims, v, err)
	}
}

func TestMNIST(t *testing.T) {
	m, err := ReadModel(testenv.TestData(t, "onnx", "models", "mnist", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Opset("") != 8 {
		t.Errorf("opset %d, want 8", m.Opset(""))
	}
	g := m.Graph
	in := g.Inputs[0]
	if in.Name != "Input3" || in.ElemType != Float || !slices.Equal(in.Dims, []Dim{{Value: 1}, {Value: 1}, {Value: 28}, {Value: 28}}) {
		t.Errorf("input %+v", in)
	}
	if len(g.Outputs) != 1 || g.Outputs[0].Name != "Plus214_Output_0" {
		t.Errorf("outputs %+v", g.Outputs)
	}
	ops := map[string]int{}
	for _, n := range g.Nodes {
		ops[n.OpType]++
		if n.OpType == "Conv" {
			if pad, err := n.String("auto_pad", "NOTSET"); pad != "SAME_UPPER" || err != nil {
				t.Errorf("%s: auto_pad %q, %v", n.Name, pad, err)
			}
		}
	}
	for _, op := range []string{"Conv", "Add", "Relu", "MaxPool", "Reshape", "MatMul"} {
		if ops[op] == 0 {
			t.Errorf("no %s in %v", op, ops)
		}
	}
	if len(g.Initializers) == 0 {
		t.Fatal("no initializers")
	}
	for _, x := range g.Initializers {
		checkTensor(t, "initializer "+x.Name, x)
	}
	for _, set := range []string{"test_data_set_0", "test_data_set_1"} {
		x, err := ReadTensor(testenv.TestData(t, "onnx", "models", "mnist", set, "input_0.pb"))
		if err != nil || !slices.Equal(x.Dims, []int64{1, 1, 28, 28}) {
			t.Fatalf("%s input: %v", set, err)
		}
		y, err := ReadTensor(testenv.TestData(t, "onnx", "models", "mnist", set, "output_0.pb"))
		if err != nil || !slices.Equal(y.Dims, []int64{1, 10}) {
			t.Fatalf("%s output: %v", set, err)
		}
		checkTensor(t, set, x)
		checkTensor(t, set, y)
	}
}

// TestModelsTestData decodes every other model and test data set.
func TestModelsTestData(t *testing.T) {
	for _, rel := range [][]string{
		{"onnx", "models", "mnist_quantized", "model_quantized.onnx"},
		{"onnx", "light", "light_resnet50", "model.onnx"},
	} {
		path := testenv.TestData(t, rel...)
		t.Run(rel[2], func(t *testing.T) {
			m, err := ReadModel(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Graph.Nodes) == 0 {
				t.Error("no nodes")
			}
			for _, x := range m.Graph.Initializers {
				checkTensor(t, "initializer "+x.Name, x)
			}
			for _, n := range m.Graph.Nodes {
				for _, a := range n.Attrs {
					if a.T != nil {
						checkTensor(t, n.Name+"."+a.Name, a.T)
					}
				}
			}
			pbs, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "test_data_set_*", "*.pb"))
			for _, p := range pbs {
				x, err := ReadTensor(p)
				if unsupportedType(err) {
					continue // types this package does not read (complex): refused by name
				}
				if err != nil {
					t.Fatal(err)
				}
				checkTensor(t, p, x)
			}
		})
	}
}

func BenchmarkDecodeMNIST(b *testing.B) {
	data, err := os.ReadFile(testenv.TestData(b, "onnx", "models", "mnist", "model.onnx"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
