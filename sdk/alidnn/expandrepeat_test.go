package alidnn_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// expandInputGraph is Expand(x, shape) of a graph input x.
func expandInputGraph(dims, shape []int64) *onnx.Model {
	st, _ := onnx.NewInt("shape", onnx.Int64, []int64{int64(len(shape))}, shape)
	return &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", dims...)},
		Initializers: []*onnx.Tensor{st},
		Nodes:        []*onnx.Node{{Name: "ex", OpType: "Expand", Inputs: []string{"x", "shape"}, Outputs: []string{"y"}}},
		Outputs:      []onnx.ValueInfo{{Name: "y"}},
	}}
}

// refExpand is numpy's broadcast of x of shape dims to out, in float64.
func refExpand(x []float32, dims, out []int64) []float64 {
	k := len(out) - len(dims)
	n := 1
	for _, d := range out {
		n *= int(d)
	}
	y := make([]float64, n)
	idx := make([]int64, len(out))
	for i := range y {
		src := 0
		for a := k; a < len(out); a++ {
			v := idx[a]
			if dims[a-k] == 1 {
				v = 0
			}
			src = src*int(dims[a-k]) + int(v)
		}
		y[i] = float64(x[src])
		for a := len(idx) - 1; a >= 0; a-- {
			if idx[a]++; idx[a] < out[a] {
				break
			}
			idx[a] = 0
		}
	}
	return y
}

// TestExpandRepeat expands along rows and outer axes (copies by Concat),
// with and without the last axis spread along the lanes, against float64.
func TestExpandRepeat(t *testing.T) {
	for _, tc := range []struct{ dims, shape []int64 }{
		{[]int64{3, 1}, []int64{2, 1, 6}},
		{[]int64{2, 1, 5}, []int64{2, 4, 5}},
		{[]int64{1, 3, 5}, []int64{4, 3, 5}},
		{[]int64{3, 20}, []int64{2, 2, 3, 20}},
		{[]int64{2, 1, 1}, []int64{2, 3, 4}},
		{[]int64{1, 1, 2, 1, 3}, []int64{2, 3, 2, 4, 3}},
	} {
		t.Run(fmt.Sprint(tc.dims, tc.shape), func(t *testing.T) {
			x := randTensor("x", tc.dims, 13)
			xf, _ := x.Float32s()
			out := make([]int64, len(tc.shape))
			for a := range out {
				out[a] = tc.shape[a]
				if b := a - (len(tc.shape) - len(tc.dims)); b >= 0 && tc.shape[a] == 1 {
					out[a] = tc.dims[b]
				}
			}
			checkClose(t, runModel(t, expandInputGraph(tc.dims, tc.shape), x), refExpand(xf, tc.dims, out))
		})
	}
}

// TestExpandRepeatComputed expands Abs(x) laid out as an image: along its
// channels (a Concat of channels), its rows (the last axis among them) and
// its outer axis, against float64.
func TestExpandRepeatComputed(t *testing.T) {
	for _, tc := range []struct{ dims, shape []int64 }{
		{[]int64{2, 1, 4}, []int64{2, 3, 4}},
		{[]int64{2, 3, 1, 5}, []int64{2, 3, 4, 5}},
		{[]int64{1, 3, 5}, []int64{4, 3, 5}},
		{[]int64{2, 5, 1}, []int64{2, 5, 20}},
	} {
		t.Run(fmt.Sprint(tc.dims, tc.shape), func(t *testing.T) {
			x := randTensor("x", tc.dims, 17)
			xf, _ := x.Float32s()
			for k, v := range xf {
				xf[k] = max(v, -v)
			}
			got := runGraph(t, expandGraph(tc.dims, tc.shape), x)
			checkClose(t, got, refExpand(xf, tc.dims, tc.shape))
		})
	}
}

// TestExpandRepeatRefused: copies of a vector, which would stack along
// its lanes, are refused naming the node.
func TestExpandRepeatRefused(t *testing.T) {
	_, err := alidnn.Compile(expandInputGraph([]int64{4}, []int64{3, 4}))
	if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), `"ex"`) || !strings.Contains(err.Error(), "vector") {
		t.Fatalf("Compile: %v, want ErrUnsupported naming \"ex\" and the vector", err)
	}
}

// TestBroadcastRepeat subtracts from an image [2,3,4,5] its mean over the
// last axis, [2,3,4,1] — broadcast along part of its rows, which the
// operand is expanded for first — against float64.
func TestBroadcastRepeat(t *testing.T) {
	dims := []int64{2, 3, 4, 5}
	m := reduceAxesGraph("ReduceMean", dims, []int64{-1}, 1, true)
	g := m.Graph
	g.Nodes = append(g.Nodes, &onnx.Node{Name: "sub", OpType: "Sub", Inputs: []string{"r", "y"}, Outputs: []string{"d"}})
	g.Outputs = []onnx.ValueInfo{{Name: "d"}}
	x := randTensor("x", dims, 19)
	xf, _ := x.Float32s()
	want := make([]float64, len(xf))
	for row := 0; row < len(xf)/5; row++ {
		mean := 0.0
		for _, v := range xf[row*5 : row*5+5] {
			mean += float64(max(v, 0)) / 5
		}
		for k, v := range xf[row*5 : row*5+5] {
			want[row*5+k] = float64(max(v, 0)) - mean
		}
	}
	checkClose(t, runModel(t, m, x), want)
}

// TestBroadcastPartialRows combines images [1,2,8,8] and [1,20,3,5] with
// computed operands broadcast along one of their row axes — Min(Relu(x),
// Relu(z)) of z [1,2,1,8], Mul of z [1,20,3,1] — against float64.
func TestBroadcastPartialRows(t *testing.T) {
	for _, tc := range []struct {
		op          string
		xDims, zDim []int64
	}{
		{"Min", []int64{1, 2, 8, 8}, []int64{1, 2, 1, 8}},
		{"Mul", []int64{1, 20, 3, 5}, []int64{1, 20, 3, 1}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			g := &onnx.Graph{
				Inputs: []onnx.ValueInfo{vinfo("x", tc.xDims...), vinfo("z", tc.zDim...)},
				Nodes: []*onnx.Node{
					{Name: "r", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"r"}},
					{Name: "s", OpType: "Relu", Inputs: []string{"z"}, Outputs: []string{"s"}},
					{Name: "m", OpType: tc.op, Inputs: []string{"r", "s"}, Outputs: []string{"y"}},
				},
				Outputs: []onnx.ValueInfo{{Name: "y"}},
			}
			x, z := randTensor("x", tc.xDims, 23), randTensor("z", tc.zDim, 29)
			xf, _ := x.Float32s()
			zf, _ := z.Float32s()
			zb := refExpand(zf, tc.zDim, tc.xDims)
			want := make([]float64, len(xf))
			for k, v := range xf {
				a, b := math.Max(float64(v), 0), math.Max(zb[k], 0)
				if tc.op == "Min" {
					want[k] = math.Min(a, b)
				} else {
					want[k] = float64(float32(a) * float32(b))
				}
			}
			checkClose(t, runGraph(t, g, x, z), want)
		})
	}
}
