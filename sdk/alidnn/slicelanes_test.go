package alidnn_test

import (
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestSliceLanes slices a computed [5, 6, 40] along its last axis, on the
// lanes, from 37 down to 3 by −5 (across the 16-lane blocks) and along the
// first by −2: the picks and the 0/1 selection MatMul give the values
// exactly.
func TestSliceLanes(t *testing.T) {
	g := sliceGraph([]int64{37, 4}, []int64{2, -10}, []int64{-1, 0}, []int64{-5, -2})
	g.Inputs = []onnx.ValueInfo{vinfo("x", 5, 6, 40)}
	x := ramp("x", []int64{5, 6, 40}, 0.25)
	got := runGraph(t, g, x)
	xf, _ := x.Float32s()
	var want []float64
	for _, i := range []int{4, 2, 0} {
		for j := range 6 {
			for l := 37; l > 2; l -= 5 {
				want = append(want, float64(max(xf[(i*6+j)*40+l], 0)))
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for k := range want {
		if float64(got[k]) != want[k] {
			t.Fatalf("element %d: %v, want %v", k, got[k], want[k])
		}
	}
}
