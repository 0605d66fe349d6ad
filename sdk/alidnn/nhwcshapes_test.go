package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestNHWCShapes runs a 1×1 Conv (to 4 channels) of NHWC inputs through
// Transpose(0,3,1,2), in shapes where the Transpose moves data (several
// channels) and where it moves only unit axes (one channel, or one
// pixel), against the host.
func TestNHWCShapes(t *testing.T) {
	for _, d := range [][]int64{{1, 1, 9, 3}, {1, 7, 1, 2}, {1, 1, 1, 5}, {1, 5, 4, 1}, {1, 76, 32, 1}} {
		h, w, c := int(d[1]), int(d[2]), int(d[3])
		wt := ramp("w", []int64{4, int64(c), 1, 1}, 0.25)
		g := &onnx.Graph{
			Inputs:       []onnx.ValueInfo{vinfo("x", d...)},
			Initializers: []*onnx.Tensor{wt},
			Nodes: []*onnx.Node{
				{Name: "t", OpType: "Transpose", Inputs: []string{"x"}, Outputs: []string{"xt"}, Attrs: []*onnx.Attribute{{Name: "perm", Type: onnx.AttrInts, Ints: []int64{0, 3, 1, 2}}}},
				{Name: "conv", OpType: "Conv", Inputs: []string{"xt", "w"}, Outputs: []string{"y"}},
			},
			Outputs: []onnx.ValueInfo{{Name: "y"}},
		}
		x := ramp("x", d, 0.5)
		got := runGraph(t, g, x)
		xf, _ := x.Float32s()
		wf, _ := wt.Float32s()
		for o := range 4 {
			for p := range h * w {
				var want float32
				for i := range c {
					want += wf[o*c+i] * xf[p*c+i]
				}
				if k := o*h*w + p; math.Abs(float64(got[k]-want)) > 1e-5 {
					t.Fatalf("%v: channel %d pixel %d: %g, want %g", d, o, p, got[k], want)
				}
			}
		}
	}
}
