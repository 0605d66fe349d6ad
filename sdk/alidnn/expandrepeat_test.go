package alidnn_test

import (
	"errors"
	"fmt"
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
// channels (a Concat of channels), its rows and its outer axis, against
// float64.
func TestExpandRepeatComputed(t *testing.T) {
	for _, tc := range []struct{ dims, shape []int64 }{
		{[]int64{2, 1, 4}, []int64{2, 3, 4}},
		{[]int64{2, 3, 1, 5}, []int64{2, 3, 4, 5}},
		{[]int64{1, 3, 5}, []int64{4, 3, 5}},
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
