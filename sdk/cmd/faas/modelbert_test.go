package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// bertModel is the generated BERT encoder: INT64 input_ids,
// attention_mask and token_type_ids [batch, seq].
var bertModel = filepath.Join("..", "..", "alidnn", "onnxtest", "testdata", "generated", "bert_encoder")

// TestModelRunIntegerInputs runs the BERT encoder from its INT64 TensorProto
// files, as an ONNX model and as a compiled program (which keeps the
// embedding tables the runtime gathers from), refuses an id beyond the
// vocabulary naming the input, and benchmarks it on inputs of its own.
func TestModelRunIntegerInputs(t *testing.T) {
	set := filepath.Join(bertModel, "test_data_set_1")
	args := func(model, out string, ins ...string) []string {
		a := []string{"model", "run", model, "--output", out}
		for _, in := range ins {
			a = append(a, "--input", in)
		}
		return a
	}
	ins := []string{filepath.Join(set, "input_0.pb"), filepath.Join(set, "input_1.pb"), filepath.Join(set, "input_2.pb")}
	prog := filepath.Join(t.TempDir(), "bert.prog")
	if _, stderr, code := run(t, "", "model", "compile", filepath.Join(bertModel, "model.onnx"), "-o", prog, "--shape", "batch=1", "--shape", "seq=16"); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	want, err := onnx.ReadTensor(filepath.Join(set, "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	w, _ := want.Float32s()
	for _, model := range []string{filepath.Join(bertModel, "model.onnx"), prog} {
		out := filepath.Join(t.TempDir(), "out.pb")
		if _, stderr, code := run(t, "", args(model, out, ins...)...); code != 0 {
			t.Fatalf("run %s: exit %d: %s", model, code, stderr)
		}
		got, err := onnx.ReadTensor(out)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := got.Float32s()
		if len(g) != len(w) {
			t.Fatalf("run %s: %d values, want %d", model, len(g), len(w))
		}
		for k := range w {
			if d := math.Abs(float64(g[k] - w[k])); d > 1e-5+1e-3*math.Abs(float64(w[k])) {
				t.Fatalf("run %s: value %d: %g, want %g", model, k, g[k], w[k])
			}
		}
	}
	ids, err := onnx.ReadTensor(ins[0])
	if err != nil {
		t.Fatal(err)
	}
	v, _ := ids.Int64s()
	v[5] = 100 // the vocabulary has 100 words
	bad, err := onnx.NewInt(ids.Name, onnx.Int64, ids.Dims, v)
	if err != nil {
		t.Fatal(err)
	}
	badPath := filepath.Join(t.TempDir(), "ids.pb")
	writeTensor(t, badPath, bad)
	_, stderr, code := run(t, "", args(prog, filepath.Join(t.TempDir(), "out.pb"), badPath, ins[1], ins[2])...)
	if code == 0 || !strings.Contains(stderr, `"input_ids"`) || !strings.Contains(stderr, "out of") {
		t.Fatalf("id 100: exit %d: %s", code, stderr)
	}
	// faas model bench makes its own inputs: ids below each table's rows
	// (two token types).
	if _, stderr, code := run(t, "", "model", "bench", prog, "--batch", "1", "--duration", "100ms", "--json"); code != 0 {
		t.Fatalf("bench: exit %d: %s", code, stderr)
	}
}

func writeTensor(t *testing.T, path string, x *onnx.Tensor) {
	t.Helper()
	b, err := onnx.EncodeTensor(x)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
