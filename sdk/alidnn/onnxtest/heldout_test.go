package onnxtest_test

import (
	"context"
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
)

// Helpers of the trained transformers' held-out tests.

// runSets runs p on each data set's inputs: every set's outputs.
func runSets(t *testing.T, dev alidnn.Device, p *alidnn.Program, sets []dataSet) [][][]float32 {
	t.Helper()
	ctx := context.Background()
	// A Load overwrites the device's previous program: one at a time.
	s, err := alidnn.Load(ctx, dev, p)
	if err != nil {
		t.Fatal(err)
	}
	var out [][][]float32
	for _, set := range sets {
		res, err := s.Run(ctx, set.ins...)
		if err != nil {
			t.Fatal(err)
		}
		var fs [][]float32
		for _, o := range res.Outputs {
			f, err := o.Float32s()
			if err != nil {
				t.Fatal(err)
			}
			fs = append(fs, f)
		}
		out = append(out, fs)
	}
	return out
}

// worstRelError is the largest |got − want| relative to the largest
// |want|.
func worstRelError(got, want []float32) float64 {
	var big, worst float64
	for k := range want {
		big = max(big, math.Abs(float64(want[k])))
		e := math.Abs(float64(got[k]) - float64(want[k]))
		if math.IsNaN(e) {
			e = math.Inf(1)
		}
		worst = max(worst, e)
	}
	return worst / big
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
