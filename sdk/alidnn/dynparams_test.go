package alidnn

import (
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestDynamicParams checks DynamicQuantizeLinear's scale and zero point
// against ONNX's formula worked by hand: 0 is always in the range, the zero
// point rounds half to even and saturates to uint8.
func TestDynamicParams(t *testing.T) {
	for _, c := range []struct {
		r valueRange
		s float32
		z int64
	}{
		{valueRange{-1, 1}, 2.0 / 255, 127},          // −min/s is 127.49999 in float32
		{valueRange{0, 5.1}, 0.02, 0},                // positives: min is 0
		{valueRange{2, 5.1}, 0.02, 0},                // 0 is in the range
		{valueRange{-5.1, -1}, 0.02, 255},            // negatives: max is 0
		{valueRange{-1.53125, 14.40625}, 0.0625, 24}, // 24.5 exactly, to even
		{valueRange{-1.59375, 14.34375}, 0.0625, 26}, // 25.5 exactly, to even
		{valueRange{0, 0}, 1.0 / 255, 0},             // zeros: no division by zero
	} {
		s, z := dynamicParams(c.r)
		if d := s/c.s - 1; d > 1e-6 || d < -1e-6 || z != c.z {
			t.Errorf("range %v: scale %g, zero point %d; want %g, %d", c.r, s, z, c.s, c.z)
		}
	}
}

// TestDynamicLevels: a DynamicQuantizeLinear's level is one more than the
// highest upstream, through any operators; two reading one tensor share
// its level.
func TestDynamicLevels(t *testing.T) {
	n := func(op string, in []string, out ...string) *onnx.Node {
		return &onnx.Node{OpType: op, Inputs: in, Outputs: out}
	}
	g := &onnx.Graph{Nodes: []*onnx.Node{
		n("DynamicQuantizeLinear", []string{"x"}, "xq", "xs", "xz"),
		n("MatMulInteger", []string{"xq", "w", "xz"}, "a"),
		n("Cast", []string{"a"}, "af"),
		n("Relu", []string{"af"}, "r"),
		n("DynamicQuantizeLinear", []string{"r"}, "rq", "rs", "rz"),
		n("DynamicQuantizeLinear", []string{"x"}, "xq2", "xs2", "xz2"),
		n("Add", []string{"x", "x"}, "u"), // downstream of no DynamicQuantizeLinear
		n("DynamicQuantizeLinear", []string{"u"}, "uq", "us", "uz"),
		n("Mul", []string{"rs", "u"}, "v"),
		n("DynamicQuantizeLinear", []string{"v"}, "vq", "vs", "vz"),
	}}
	levels, depth := dynamicLevels(g)
	want := map[string]int{"x": 0, "r": 1, "u": 0, "v": 2}
	if depth != 3 || len(levels) != len(want) {
		t.Fatalf("levels %v, depth %d; want %v, 3", levels, depth, want)
	}
	for in, l := range want {
		if levels[in] != l {
			t.Errorf("level of %s: %d, want %d", in, levels[in], l)
		}
	}
}

// TestFoldDynamicQuantize: DynamicQuantizeLinear of a constant folds to
// ONNX's example (onnx's test_dynamicquantizelinear input and outputs).
func TestFoldDynamicQuantize(t *testing.T) {
	c := &compiler{vals: map[string]*value{}, uses: map[string]int{}}
	n := &onnx.Node{OpType: "DynamicQuantizeLinear", Inputs: []string{"x"}, Outputs: []string{"y", "s", "z"}}
	c.foldDynamicQuantize(n, constFloat("x", []int{6}, []float32{0, 2, -3, -2.5, 1.34, 0.5}))
	y, s, z := c.vals["y"].ints(), c.vals["s"].floats()[0], c.vals["z"].ints()[0]
	want := []int64{153, 255, 0, 26, 221, 179}
	for k := range want {
		if y[k] != want[k] {
			t.Fatalf("y %v, want %v", y, want)
		}
	}
	if s != 0.019607844 || z != 153 {
		t.Errorf("scale %v, zero point %d; want 0.019607844, 153", s, z)
	}
}
