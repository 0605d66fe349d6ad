package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestEqualInt32 compares INT32 graph inputs [2,3,16] — equal pairs,
// neighbours past 2²⁴ that fp32 would merge (16777216 and 16777217), the
// extremes, pairs whose wrapped difference overflows — with each other,
// with a row [16] broadcast, and with a constant scalar, against Go's ==.
func TestEqualInt32(t *testing.T) {
	pairs := [][2]int64{{0, 0}, {16777216, 16777217}, {16777217, 16777217}, {math.MinInt32, math.MaxInt32}, {math.MaxInt32, math.MaxInt32},
		{math.MinInt32, math.MinInt32}, {-1, math.MaxInt32}, {1 << 30, -(1 << 30)}, {123456789, 123456788}, {-5, 5}, {7, 7}, {2147483646, -2}}
	n := 96
	xs, ys := make([]int64, n), make([]int64, n)
	for k := range n {
		xs[k], ys[k] = int64(k%5), int64(k%3)
		if p := pairs[k%len(pairs)]; k%2 == 0 {
			xs[k], ys[k] = p[0], p[1]
		}
	}
	in := func(name string, dims []int64, v []int64) (*onnx.Tensor, onnx.ValueInfo) {
		tt, err := onnx.NewInt(name, onnx.Int32, dims, v)
		if err != nil {
			t.Fatal(err)
		}
		vi := onnx.ValueInfo{Name: name, ElemType: onnx.Int32}
		for _, d := range dims {
			vi.Dims = append(vi.Dims, onnx.Dim{Value: d})
		}
		return tt, vi
	}
	for _, c := range []struct {
		name string
		y    []int64
		dims []int64
		k    bool // y a constant scalar
	}{{"same shape", ys, []int64{2, 3, 16}, false}, {"broadcast row", ys[16:32], []int64{16}, false}, {"constant", []int64{16777217}, nil, true}} {
		t.Run(c.name, func(t *testing.T) {
			xt, xv := in("x", []int64{2, 3, 16}, xs)
			yt, yv := in("y", c.dims, c.y)
			g := &onnx.Graph{
				Inputs:  []onnx.ValueInfo{xv},
				Nodes:   []*onnx.Node{{Name: "eq", OpType: "Equal", Inputs: []string{"x", "y"}, Outputs: []string{"c"}}},
				Outputs: []onnx.ValueInfo{{Name: "c"}},
			}
			ins := []*onnx.Tensor{xt}
			if c.k {
				g.Initializers = []*onnx.Tensor{yt}
			} else {
				g.Inputs = append(g.Inputs, yv)
				ins = append(ins, yt)
			}
			for k, v := range runBool(t, g, ins...) {
				y := c.y[k%len(c.y)]
				if want := xs[k] == y; v != 0 != want {
					t.Fatalf("element %d: %d == %d gave %d", k, xs[k], y, v)
				}
			}
		})
	}
}
