package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of ShuffleNet's channel shuffle, Reshape → Transpose → Reshape of
// a computed tensor, which the compiler runs as a channel permutation: 3
// groups of 8 channels, and 4 groups of 10 whose output blocks draw from
// input blocks that straddle 16-channel boundaries.

func init() { caseFamilies = append(caseFamilies, shuffleCases) }

func shuffleCase(name string, groups, c, h, w int) genCase {
	xd := []int64{1, int64(c), int64(h), int64(w)}
	x := data(xd, 31)
	// y[j·groups+i] = relu(x)[i·(c/groups)+j]
	y := make([]float32, len(x))
	per := c / groups
	for i := range groups {
		for j := range per {
			for p := range h * w {
				y[(j*groups+i)*h*w+p] = max(x[(i*per+j)*h*w+p], 0)
			}
		}
	}
	split, err := onnx.NewInt("split", onnx.Int64, []int64{5}, []int64{1, int64(groups), int64(per), int64(h), int64(w)})
	if err != nil {
		panic(err)
	}
	merge, err := onnx.NewInt("merge", onnx.Int64, []int64{4}, xd)
	if err != nil {
		panic(err)
	}
	return genCase{name: name, opset: 13,
		g: graph{
			nodes: []node{
				{op: "Relu", inputs: []string{"x"}, outputs: []string{"r"}},
				{op: "Reshape", inputs: []string{"r", "split"}, outputs: []string{"s"}},
				{op: "Transpose", inputs: []string{"s"}, outputs: []string{"t"}, attrs: []attr{isAttr("perm", 0, 2, 1, 3, 4)}},
				{op: "Reshape", inputs: []string{"t", "merge"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{split, merge},
			inputs:  []valueInfo{fvi("x", xd)},
			outputs: []valueInfo{fvi("y", xd)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", xd, y)},
	}
}

func shuffleCases() []genCase {
	return []genCase{
		shuffleCase("channel_shuffle_3x8", 3, 24, 3, 4),
		shuffleCase("channel_shuffle_4x10", 4, 40, 5, 3),
	}
}
