package classify_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/classify"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestMNIST classifies MNIST's reference inputs on the in-process engine,
// eight times each at once: the digits are the references' (2 and 0), the
// scores within the test data's tolerance (5e-3), and some runs shared a
// job.
func TestMNIST(t *testing.T) {
	dir := testenv.TestData(t, "onnx", "models", "mnist")
	m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := model.NewLocal(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	ctx := context.Background()
	s, err := alidnn.Open(ctx, alidnn.NewLocal(dev), p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	cases, err := classify.ReadCases(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 2 {
		t.Fatalf("%d reference sets, want 2", len(cases))
	}
	out, err := classify.Run(ctx, s, p, cases, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := classify.Check(out); err != nil {
		t.Error(err)
	}
	batched := false
	for k, o := range out {
		if want := []int{2, 0}[k/8]; o.Class != want || o.Want != want {
			t.Errorf("%s: class %d, reference %d, want %d", o.Case, o.Class, o.Want, want)
		}
		if o.MaxAbsDiff > 5e-3 {
			t.Errorf("%s: scores differ by %g, want ≤ 5e-3", o.Case, o.MaxAbsDiff)
		}
		batched = batched || o.Batch > 1
	}
	if !batched {
		t.Log("no two runs shared a job (possible, if unlikely, on a slow machine)")
	}

	// A wrong reference is a mismatch.
	out[0].Match = false
	if err := classify.Check(out); !errors.Is(err, classify.ErrMismatch) {
		t.Errorf("Check with a mismatch: %v", err)
	}
}
