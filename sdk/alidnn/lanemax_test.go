package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// extremeGraph is op(x) over the last axis, kept, added to z (of x's
// shape), which broadcasts the row's value to the row as the graph
// declares it; or, with w, MatMul(x − op(x), w).
func extremeGraph(op string, dims []int64, w *onnx.Tensor) *onnx.Graph {
	axes, _ := onnx.NewInt("axes", onnx.Int64, []int64{1}, []int64{-1})
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", dims...), vinfo("z", dims...)},
		Initializers: []*onnx.Tensor{axes},
		Nodes: []*onnx.Node{
			{Name: "red", OpType: op, Inputs: []string{"x", "axes"}, Outputs: []string{"m"}},
			{Name: "add", OpType: "Add", Inputs: []string{"m", "z"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}
	if w != nil {
		g.Inputs = g.Inputs[:1]
		g.Initializers = append(g.Initializers, w)
		g.Nodes[1] = &onnx.Node{Name: "sub", OpType: "Sub", Inputs: []string{"x", "m"}, Outputs: []string{"d"}}
		g.Nodes = append(g.Nodes, &onnx.Node{Name: "mm", OpType: "MatMul", Inputs: []string{"d", "w"}, Outputs: []string{"y"}})
	}
	return g
}

// TestReduceMaxMinInfinities runs ReduceMax and ReduceMin (opset 18) over
// rows of finite values, of −∞ only, with +∞ and −∞, and of −∞ and finite
// values, against the extremes written out: exact, infinities included.
func TestReduceMaxMinInfinities(t *testing.T) {
	inf := float32(math.Inf(1))
	rows := [][]float32{{1, -2, 3.5, 0, -1}, {-inf, -inf, -inf, -inf, -inf}, {2, inf, -inf, 0, 1}, {-inf, -7, -inf, -3, -inf}}
	maxes := []float64{3.5, math.Inf(-1), math.Inf(1), -3}
	mins := []float64{-2, math.Inf(-1), math.Inf(-1), math.Inf(-1)}
	var xf []float32
	for _, r := range rows {
		xf = append(xf, r...)
	}
	x := onnx.NewFloat32("x", []int64{4, 5}, xf)
	z := onnx.NewFloat32("z", []int64{4, 5}, make([]float32, 20))
	for op, ext := range map[string][]float64{"ReduceMax": maxes, "ReduceMin": mins} {
		t.Run(op, func(t *testing.T) {
			got := runModel(t, &onnx.Model{Opsets: []onnx.Opset{{Version: 18}}, Graph: extremeGraph(op, []int64{4, 5}, nil)}, x, z)
			var want []float64
			for _, e := range ext {
				for range 5 {
					want = append(want, e)
				}
			}
			checkExact(t, got, want)
		})
	}
}

// TestReduceMaxIntoMatMul subtracts the row maximum of 5 and of 20 values
// (one lane block and two) and multiplies by w, which reads the padding
// lanes too: they must stay finite. Against float64.
func TestReduceMaxIntoMatMul(t *testing.T) {
	for _, C := range []int64{5, 20} {
		x, w := ramp("x", []int64{3, C}, 0.7), ramp("w", []int64{C, 4}, 0.1)
		got := runModel(t, &onnx.Model{Opsets: []onnx.Opset{{Version: 18}}, Graph: extremeGraph("ReduceMax", []int64{3, C}, w)}, x)
		xf, _ := x.Float32s()
		wf, _ := w.Float32s()
		var want []float64
		for r := range 3 {
			row := xf[r*int(C):][:C]
			m := math.Inf(-1)
			for _, v := range row {
				m = math.Max(m, float64(v))
			}
			for o := range 4 {
				s := 0.0
				for k, v := range row {
					s += (float64(v) - m) * float64(wf[k*4+o])
				}
				want = append(want, s)
			}
		}
		checkClose(t, got, want)
	}
}
