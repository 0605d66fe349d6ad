package alidnn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// sliceGraph is Slice(Relu(x [4,6,32])) by constant starts, ends, axes and
// steps. x is laid out as 4 images of 6 channels (on the lanes) by 32
// pixels (rows).
func sliceGraph(starts, ends, axes, steps []int64) *onnx.Graph {
	var inits []*onnx.Tensor
	for k, v := range [][]int64{starts, ends, axes, steps} {
		t, err := onnx.NewInt([]string{"starts", "ends", "axes", "steps"}[k], onnx.Int64, []int64{int64(len(v))}, v)
		if err != nil {
			panic(err) // the lengths agree by construction
		}
		inits = append(inits, t)
	}
	return &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", 4, 6, 32)},
		Initializers: inits,
		Nodes: []*onnx.Node{
			{Name: "relu", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"r"}},
			{Name: "slice", OpType: "Slice", Inputs: []string{"r", "starts", "ends", "axes", "steps"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}
}

// TestSliceComputed slices a computed tensor along the axes off the
// lanes: every other image, and pixels 30, 27, … 3 (a negative step),
// against the indices written out.
func TestSliceComputed(t *testing.T) {
	x := ramp("x", []int64{4, 6, 32}, 0.5)
	got := runGraph(t, sliceGraph([]int64{0, 30}, []int64{4, 0}, []int64{0, -1}, []int64{2, -3}), x)
	xf, _ := x.Float32s()
	var want []float64
	for _, i := range []int{0, 2} {
		for j := range 6 {
			for l := 30; l > 0; l -= 3 {
				want = append(want, float64(max(xf[(i*6+j)*32+l], 0)))
			}
		}
	}
	checkClose(t, got, want)
}

// TestSliceRefused: a Slice along the lanes (the channels) is refused
// naming the node and the reason.
func TestSliceRefused(t *testing.T) {
	for _, tc := range []struct {
		starts, ends []int64
		axis         int64
		want         string
	}{
		{[]int64{0}, []int64{3}, 1, "between the lanes"},
	} {
		g := sliceGraph(tc.starts, tc.ends, []int64{tc.axis}, []int64{1})
		_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
		if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), `"slice"`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("axis %d %v..%v: %v, want ErrUnsupported naming \"slice\" and %q", tc.axis, tc.starts, tc.ends, err, tc.want)
		}
	}
}
