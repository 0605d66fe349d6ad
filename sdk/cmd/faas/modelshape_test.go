package main

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// symbolicModel is a generated folder whose input is x [batch, seq, 32],
// with data sets of shapes [2, 3, 32] and [1, 5, 32].
var symbolicModel = filepath.Join("..", "..", "alidnn", "onnxtest", "testdata", "generated", "symbolic_batch_and_sequence")

// TestModelCompileShape compiles a model with a symbolic batch and
// sequence length: refused unbound, naming the dimension and the flag;
// bound by --shape (by symbolic name and by input), it runs a data set of
// those shapes to its expected output. faas model test binds each set's
// shapes, faas model run those of its --input.
func TestModelCompileShape(t *testing.T) {
	model := filepath.Join(symbolicModel, "model.onnx")
	prog := filepath.Join(t.TempDir(), "sym.prog")
	_, stderr, code := run(t, "", "model", "compile", model, "-o", prog)
	if code != 2 || !strings.Contains(stderr, `input "x"`) || !strings.Contains(stderr, `"batch"`) || !strings.Contains(stderr, "--shape batch=N") {
		t.Fatalf("unbound: exit %d: %s", code, stderr)
	}
	for _, bind := range [][]string{{"--shape", "batch=1", "--shape", "seq=5"}, {"--shape", "x=1x5x32"}} {
		if _, stderr, code := run(t, "", append([]string{"model", "compile", model, "-o", prog}, bind...)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", bind, code, stderr)
		}
		checkRun(t, prog, filepath.Join(symbolicModel, "test_data_set_1"))
	}
	checkRun(t, model, filepath.Join(symbolicModel, "test_data_set_0"))
	if stdout, stderr, code := run(t, "", "model", "test", symbolicModel); code != 0 || !strings.Contains(stdout, "PASS") {
		t.Fatalf("model test: exit %d: %s%s", code, stdout, stderr)
	}
	for _, c := range []struct{ flag, want string }{
		{"x", "want NAME=DIMS"},
		{"=1x5", "want NAME=DIMS"},
		{"x=1xAx32", `dimension "A"`},
		{"x=1x0x32", `dimension "0"`},
		{"x=1x5x16", "dimension 2 is 32"},
		{"sequence=5", `no input and no symbolic dimension "sequence"`},
	} {
		if _, stderr, code := run(t, "", "model", "compile", model, "-o", prog, "--shape", c.flag); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("--shape %s: exit %d: %s (want %q)", c.flag, code, stderr, c.want)
		}
	}
}

// checkRun runs model on set's input_0.pb and compares the output with
// its output_0.pb within the fp32 tolerance.
func checkRun(t *testing.T, model, set string) {
	t.Helper()
	res := filepath.Join(t.TempDir(), "out.pb")
	if _, stderr, code := run(t, "", "model", "run", model, "--input", filepath.Join(set, "input_0.pb"), "--output", res); code != 0 {
		t.Fatalf("run %s on %s: exit %d: %s", model, set, code, stderr)
	}
	got, err := onnx.ReadTensor(res)
	if err != nil {
		t.Fatal(err)
	}
	want, err := onnx.ReadTensor(filepath.Join(set, "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Dims, want.Dims) {
		t.Fatalf("run %s on %s: shape %v, want %v", model, set, got.Dims, want.Dims)
	}
	g, _ := got.Float32s()
	w, _ := want.Float32s()
	for k := range w {
		if d := math.Abs(float64(g[k] - w[k])); d > 1e-5+1e-3*math.Abs(float64(w[k])) {
			t.Fatalf("run %s on %s: value %d: %g, want %g", model, set, k, g[k], w[k])
		}
	}
}
