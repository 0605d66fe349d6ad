package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/onnx"
)

func faas(t *testing.T, args ...string) (string, int) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		out.WriteString(err.Error())
	}
	return out.String(), exitCode(err)
}

func TestModelTest(t *testing.T) {
	node := testenv.TestData(t, "onnx", "node")
	out, code := faas(t, "model", "test", filepath.Join(node, "test_relu"), filepath.Join(node, "test_conv_with_strides_padding"))
	if code != 0 || strings.Count(out, "PASS ") != 2 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// A folder whose expected output is wrong fails with exit code 1.
	bad := t.TempDir()
	src := filepath.Join(node, "test_relu")
	if err := os.CopyFS(bad, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	want, err := onnx.ReadTensor(filepath.Join(src, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := want.Float32s()
	f[3] += 0.5
	if err := onnx.WriteTensor(filepath.Join(bad, "test_data_set_0", "output_0.pb"), onnx.NewFloat32(want.Name, want.Dims, f)); err != nil {
		t.Fatal(err)
	}
	out, code = faas(t, "model", "test", "--json", bad)
	var lines []struct {
		Pass  bool
		Worst float64
	}
	if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "]")+1]), &lines); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if code != 1 || len(lines) != 1 || lines[0].Pass || lines[0].Worst <= 1 {
		t.Fatalf("corrupted expectation: exit %d, %s", code, out)
	}
	// A folder that is not a backend test is a failure too, not a crash.
	if out, code := faas(t, "model", "test", t.TempDir()); code != 1 || !strings.Contains(out, "FAIL") {
		t.Fatalf("empty folder: exit %d, %s", code, out)
	}
}

func TestModelTestInt8(t *testing.T) {
	out, code := faas(t, "model", "test", "--int8", testenv.TestData(t, "onnx", "models", "mnist"))
	if code != 0 || !strings.Contains(out, "PASS mnist") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestModelCompileInt8 compiles MNIST quantised on one calibration sample
// into a program file and runs it on the other sample: the digit is the
// reference's. Bad flags are usage errors.
func TestModelCompileInt8(t *testing.T) {
	dir := testenv.TestData(t, "onnx", "models", "mnist")
	model := filepath.Join(dir, "model.onnx")
	prog := filepath.Join(t.TempDir(), "mnist8.prog")
	if out, code := faas(t, "model", "compile", model, "-o", prog, "--int8", "--calib", filepath.Join(dir, "test_data_set_0"), "--float-node", "Convolution28"); code != 0 {
		t.Fatalf("compile --int8: exit %d: %s", code, out)
	}
	res := filepath.Join(t.TempDir(), "out.pb")
	if out, code := faas(t, "model", "run", prog, "--input", filepath.Join(dir, "test_data_set_1", "input_0.pb"), "--output", res); code != 0 {
		t.Fatalf("run: exit %d: %s", code, out)
	}
	got, err := onnx.ReadTensor(res)
	if err != nil {
		t.Fatal(err)
	}
	want, err := onnx.ReadTensor(filepath.Join(dir, "test_data_set_1", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := got.Float32s()
	w, _ := want.Float32s()
	if slices.Equal(g, w) || argmax(g) != argmax(w) {
		t.Errorf("int8 logits %v, want fp32's top-1 of %v (and not its exact numbers)", g, w)
	}
	for _, args := range [][]string{
		{"--int8"}, // no calibration sample
		{"--float-node", "Convolution28"},
		{"--int8", "--calib", t.TempDir()}, // no input_0.pb
		{"--int8", "--calib", filepath.Join(dir, "test_data_set_0"), "--batch", "4"},
	} {
		if out, code := faas(t, append([]string{"model", "compile", model, "-o", prog}, args...)...); code != 2 {
			t.Errorf("compile %q: exit %d, want 2: %s", args, code, out)
		}
	}
}

func argmax(v []float32) int {
	k := 0
	for i := range v {
		if v[i] > v[k] {
			k = i
		}
	}
	return k
}

func TestModelCompileAndRun(t *testing.T) {
	dir := testenv.TestData(t, "onnx", "models", "mnist")
	tmp := t.TempDir()
	prog := filepath.Join(tmp, "mnist.prog")
	if out, code := faas(t, "model", "compile", filepath.Join(dir, "model.onnx"), "-o", prog); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, out)
	}
	res := filepath.Join(tmp, "out.pb")
	out, code := faas(t, "model", "run", prog, "--input", filepath.Join(dir, "test_data_set_1", "input_0.pb"), "--output", res, "--json")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, out)
	}
	var r struct {
		DeviceNS uint64 `json:"device_ns"`
		HostNS   int64  `json:"host_ns"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.DeviceNS == 0 || r.HostNS == 0 {
		t.Fatalf("run --json: %q (%v)", out, err)
	}
	got, err := onnx.ReadTensor(res)
	if err != nil {
		t.Fatal(err)
	}
	want, err := onnx.ReadTensor(filepath.Join(dir, "test_data_set_1", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := got.Float32s()
	w, _ := want.Float32s()
	for k := range w {
		if d := g[k] - w[k]; d > 5e-3 || d < -5e-3 {
			t.Fatalf("logit %d: %g, want %g", k, g[k], w[k])
		}
	}
	// --int8 with a node kept in fp32 (mnist's first convolution); a name
	// no node has is refused, naming it.
	onnxModel, in0 := filepath.Join(dir, "model.onnx"), filepath.Join(dir, "test_data_set_1", "input_0.pb")
	if out, code := faas(t, "model", "run", onnxModel, "--input", in0, "--int8", "--float-node", "Convolution28"); code != 0 {
		t.Fatalf("run --int8 --float-node Convolution28: exit %d: %s", code, out)
	}
	if out, code := faas(t, "model", "run", onnxModel, "--input", in0, "--int8", "--float-node", "Convolution29"); code != 2 || !strings.Contains(out, `no node named ["Convolution29"]`) {
		t.Fatalf("run --float-node Convolution29: exit %d: %s", code, out)
	}
	// Usage errors exit 2.
	if _, code := faas(t, "model", "run", onnxModel, "--input", in0, "--float-node", "Convolution28"); code != 2 {
		t.Fatalf("run --float-node without --int8: exit %d, want 2", code)
	}
	if _, code := faas(t, "model", "run", prog); code != 2 {
		t.Fatalf("run without --input: exit %d, want 2", code)
	}
	if _, code := faas(t, "model", "run", filepath.Join(tmp, "missing.onnx"), "--input", res); code != 2 {
		t.Fatalf("missing model: exit %d, want 2", code)
	}
}
