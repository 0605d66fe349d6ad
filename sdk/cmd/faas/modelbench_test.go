package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

func TestModelBench(t *testing.T) {
	mnist := filepath.Join(testenv.TestData(t, "onnx", "models", "mnist"), "model.onnx")
	stdout, stderr, code := run(t, "", "model", "bench", mnist, "--batch", "1,4", "--duration", "200ms", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stderr != "" {
		t.Errorf("--json wrote progress to stderr: %q", stderr)
	}
	var got struct {
		Where   string     `json:"where"`
		Results []benchRow `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if len(got.Results) != 2 || got.Results[0].Batch != 1 || got.Results[1].Batch != 4 {
		t.Fatalf("results %+v, want batch 1 then 4", got.Results)
	}
	for _, r := range got.Results {
		if r.Runs <= 0 || r.RunsPerSecond <= 0 || r.P50NS <= 0 || r.P50NS > r.P90NS || r.P90NS > r.P99NS {
			t.Errorf("batch %d: %+v", r.Batch, r)
		}
		if r.DeviceNSRun <= 0 || r.DeviceNSJob < r.DeviceNSRun || r.Jobs <= 0 || r.Jobs > float64(r.Runs) {
			t.Errorf("batch %d: device or jobs %+v", r.Batch, r)
		}
	}
	if r := got.Results[0]; r.DeviceNSJob != r.DeviceNSRun {
		t.Errorf("batch 1 ran %v device ns a job and %v a run, want the same", r.DeviceNSJob, r.DeviceNSRun)
	}

	// The table, with progress on stderr.
	stdout, stderr, code = run(t, "", "model", "bench", mnist, "--batch", "2", "--duration", "100ms")
	if code != 0 || !strings.Contains(stdout, "RUNS/S") || !strings.Contains(stderr, "batch 2:") {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout, stderr)
	}
}

// TestModelBenchCompiledBatch compiles MNIST for 4 samples a run and
// benchmarks the program: it is measured at its own batch only.
func TestModelBenchCompiledBatch(t *testing.T) {
	mnist := filepath.Join(testenv.TestData(t, "onnx", "models", "mnist"), "model.onnx")
	prog := filepath.Join(t.TempDir(), "mnist4.adnn")
	stdout, stderr, code := run(t, "", "model", "compile", mnist, "-o", prog, "--batch", "4", "--json")
	if code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	var info struct {
		Batch int `json:"batch"`
	}
	if err := json.Unmarshal([]byte(stdout), &info); err != nil || info.Batch != 4 {
		t.Fatalf("compile --json: %v, batch %d: %s", err, info.Batch, stdout)
	}
	stdout, stderr, code = run(t, "", "model", "bench", prog, "--batch", "1,16", "--duration", "200ms", "--json")
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, stderr)
	}
	var got struct {
		Results []benchRow `json:"results"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if len(got.Results) != 1 || got.Results[0].Batch != 4 || got.Results[0].Runs <= 0 {
		t.Fatalf("results %+v, want one row at the program's batch 4", got.Results)
	}
	if _, stderr, code = run(t, "", "model", "compile", mnist, "-o", prog, "--batch", "0"); code != 2 || !strings.Contains(stderr, "--batch 0") {
		t.Errorf("compile --batch 0: exit %d: %s", code, stderr)
	}
}

func TestModelBenchFlags(t *testing.T) {
	mnist := filepath.Join(testenv.TestData(t, "onnx", "models", "mnist"), "model.onnx")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--batch", "1,x"}, `"x" is not a batch size`},
		{[]string{"--batch", "0"}, `"0" is not a batch size`},
		{[]string{"--batch", "4,4"}, "4 twice"},
		{[]string{"--batch", ""}, "is not a batch size"},
		{[]string{"--duration", "0s"}, "--duration 0s"},
		{[]string{"--slot", "0", "--attach", "x"}, "choose one"},
	} {
		args := append([]string{"model", "bench", mnist}, tc.args...)
		_, stderr, code := run(t, "", args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	// An unreadable model is bad input, as for the other model commands.
	if _, stderr, code := run(t, "", "model", "bench", filepath.Join(t.TempDir(), "none.onnx"), "--duration", "10ms"); code != 2 {
		t.Errorf("missing model: exit %d, %s", code, stderr)
	}
}

// TestModelBenchStrings benchmarks a program whose STRING input Equal
// compares with its constants: the invented strings are half constants,
// half random bytes, so that Equal finds some.
func TestModelBenchStrings(t *testing.T) {
	k, err := onnx.NewString("k", []int64{4}, [][]byte{[]byte("cat"), []byte("dog"), []byte(""), []byte("\xff")})
	if err != nil {
		t.Fatal(err)
	}
	dims := []onnx.Dim{{Value: 64}, {Value: 4}}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{k},
		Nodes:        []*onnx.Node{{OpType: "Equal", Name: "eq", Inputs: []string{"s", "k"}, Outputs: []string{"eq"}}},
		Inputs:       []onnx.ValueInfo{{Name: "s", ElemType: onnx.String, Dims: dims}},
		Outputs:      []onnx.ValueInfo{{Name: "eq", ElemType: onnx.Bool, Dims: dims}},
	}
	p, err := alidnn.Compile(&onnx.Model{IRVersion: 8, Opsets: []onnx.Opset{{Version: 17}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	in, err := benchInputs(p)
	if err != nil {
		t.Fatal(err)
	}
	strs, err := in[0].Strings()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, s := range strs {
		if slices.ContainsFunc(p.Strings, func(c []byte) bool { return bytes.Equal(c, s) }) {
			found++
		}
	}
	if len(strs) != 256 || found < 64 || found > 192 {
		t.Errorf("%d strings, %d of them the program's constants; want 256, about half", len(strs), found)
	}

	prog := filepath.Join(t.TempDir(), "match.adnn")
	if err := p.WriteFile(prog); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, "", "model", "bench", prog, "--batch", "1", "--duration", "100ms", "--json")
	var got struct {
		Results []benchRow `json:"results"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &got) != nil || len(got.Results) != 1 || got.Results[0].Runs <= 0 {
		t.Fatalf("bench: exit %d: %s%s", code, stdout, stderr)
	}
}
