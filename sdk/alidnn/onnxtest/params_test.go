package onnxtest

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestExpandedBindsOperatorParams: an _expanded folder binds the inputs
// its operator's folder binds (LayerNormalization's scale and bias, read
// there by a Flatten), and only those.
func TestExpandedBindsOperatorParams(t *testing.T) {
	for in, want := range map[string]string{"/d/test_x_expanded": "/d/test_x", "/d/test_x_expanded_ver18/": "/d/test_x", "/d/test_x": ""} {
		if got := expandedOf(in); got != want {
			t.Errorf("expandedOf(%q) = %q, want %q", in, got, want)
		}
	}
	dir := testenv.TestData(t, "onnx", "node", "test_layer_normalization_2d_axis1_expanded")
	m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	var ins []*onnx.Tensor
	for _, name := range realInputs(m.Graph) {
		ins = append(ins, &onnx.Tensor{Name: name})
	}
	bound, runtime := split(dir, m.Graph, ins)
	var names []string
	for _, t := range bound {
		names = append(names, t.Name)
	}
	if !slices.Equal(names, []string{"W", "B"}) || len(runtime) != 1 || runtime[0].Name != "X" {
		t.Errorf("bound %v, %d runtime inputs; want W and B bound, X at run time", names, len(runtime))
	}
}
