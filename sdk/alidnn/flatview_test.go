package alidnn_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// flatGraph is LayerNormalization's function body over a Flatten of the
// input x at axis: m = mean(v), y = (v − m)·v − m·m over the flattened
// view v (its rows the leading axes, its lanes the rest), element-wise
// operators reading the view itself.
func flatGraph(dims []int64, axis int64) *onnx.Model {
	ax, _ := onnx.NewInt("axes", onnx.Int64, []int64{1}, []int64{-1})
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", dims...)},
		Initializers: []*onnx.Tensor{ax},
		Nodes: []*onnx.Node{
			{Name: "flat", OpType: "Flatten", Inputs: []string{"x"}, Outputs: []string{"v"}, Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: axis}}},
			{Name: "mean", OpType: "ReduceMean", Inputs: []string{"v", "axes"}, Outputs: []string{"m"}},
			{Name: "sq", OpType: "Mul", Inputs: []string{"v", "v"}, Outputs: []string{"v2"}},
			{Name: "d", OpType: "Sub", Inputs: []string{"v2", "m"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}
	return &onnx.Model{Opsets: []onnx.Opset{{Version: 18}}, Graph: g}
}

// TestFlattenedInput runs element-wise operators and a lane mean on a
// Flatten of a graph input — the input packed as that view: by its own
// axes when the view's lanes are its last axis (storedAs, sameBlocks), as
// the view itself when they hold several — against float64.
func TestFlattenedInput(t *testing.T) {
	for _, tc := range []struct {
		dims []int64
		axis int64
	}{
		{[]int64{2, 3, 5}, 2},
		{[]int64{2, 3, 4, 20}, 3},
		{[]int64{2, 3, 5}, 1},
		{[]int64{2, 3, 4, 5}, 2},
		{[]int64{2, 3, 4, 5}, 1},
	} {
		t.Run(fmt.Sprint(tc.dims, tc.axis), func(t *testing.T) {
			x := randTensor("x", tc.dims, 9)
			xf, _ := x.Float32s()
			K := 1
			for _, d := range tc.dims[tc.axis:] {
				K *= int(d)
			}
			want := make([]float64, len(xf))
			for r := 0; r < len(xf)/K; r++ {
				m := 0.0
				for _, v := range xf[r*K : (r+1)*K] {
					m += float64(v) / float64(K)
				}
				for k, v := range xf[r*K : (r+1)*K] {
					want[r*K+k] = float64(v)*float64(v) - m
				}
			}
			checkClose(t, runModel(t, flatGraph(tc.dims, tc.axis), x), want)
			// The mean as a graph output too: picked from lane 0.
			m := flatGraph(tc.dims, tc.axis)
			m.Graph.Outputs = append(m.Graph.Outputs, onnx.ValueInfo{Name: "m"})
			p, err := alidnn.Compile(m)
			if err != nil {
				t.Fatal(err)
			}
			res := runResult(t, p, x)
			got, _ := res.Outputs[1].Float32s()
			means := make([]float64, len(xf)/K)
			for r := range means {
				means[r] = float64(xf[r*K])*float64(xf[r*K]) - want[r*K]
			}
			checkClose(t, got, means)
		})
	}
}

// TestFlattenedInputRefused: a Flatten whose lanes would hold several of
// the input's axes ([2,3,5] to [2,15]), which an element-wise operator
// reads first, finds the input laid out as an image (its channels on the
// lanes), not as the view, and is refused, not run on the wrong values.
func TestFlattenedInputRefused(t *testing.T) {
	m := flatGraph([]int64{2, 3, 5}, 1)
	g := m.Graph
	g.Nodes = []*onnx.Node{g.Nodes[0], g.Nodes[2]}
	g.Outputs = []onnx.ValueInfo{{Name: "v2"}}
	_, err := alidnn.Compile(m)
	if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), `"sq"`) || !strings.Contains(err.Error(), "after a reshape") {
		t.Fatalf("Compile: %v, want ErrUnsupported naming \"sq\" and the reshape", err)
	}
}
