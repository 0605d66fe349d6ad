package main

import (
	"fmt"
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

// TestModelRunDynamicInt8 runs the BERT encoder as quantize_dynamic writes
// it: faas model run calibrates its DynamicQuantizeLinear scales on the
// inputs, and every last_hidden_state row meets the int8 rule (cosine ≥
// 0.99) against the quantised graph's reference; faas model compile, which
// has no inputs to calibrate on, refuses it naming DynamicQuantizeLinear.
func TestModelRunDynamicInt8(t *testing.T) {
	dir := filepath.Join("..", "..", "alidnn", "onnxtest", "testdata", "generated", "bert_encoder_dynamic_int8")
	set := filepath.Join(dir, "test_data_set_0")
	out := filepath.Join(t.TempDir(), "out.pb")
	a := []string{"model", "run", filepath.Join(dir, "model.onnx"), "--output", out}
	for k := range 3 {
		a = append(a, "--input", filepath.Join(set, fmt.Sprintf("input_%d.pb", k)))
	}
	if _, stderr, code := run(t, "", a...); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	got, err := onnx.ReadTensor(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := onnx.ReadTensor(filepath.Join(set, "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := got.Float32s()
	w, _ := want.Float32s()
	if len(g) != len(w) || len(w) == 0 {
		t.Fatalf("%d values, want %d", len(g), len(w))
	}
	const h = 64
	for r := 0; r < len(w); r += h {
		var gw, gg, ww float64
		for k := r; k < r+h; k++ {
			gw += float64(g[k]) * float64(w[k])
			gg += float64(g[k]) * float64(g[k])
			ww += float64(w[k]) * float64(w[k])
		}
		if c := gw / math.Sqrt(gg*ww); c < 0.99 {
			t.Fatalf("row %d: cosine %.5f < 0.99", r/h, c)
		}
	}
	prog := filepath.Join(t.TempDir(), "bert.prog")
	_, stderr, code := run(t, "", "model", "compile", filepath.Join(dir, "model.onnx"), "-o", prog, "--shape", "batch=2", "--shape", "seq=16")
	if code == 0 || !strings.Contains(stderr, "DynamicQuantizeLinear") {
		t.Fatalf("compile: exit %d: %s; want refused naming DynamicQuantizeLinear", code, stderr)
	}
}
