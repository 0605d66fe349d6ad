package onnxtest_test

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of channel Concat whose inputs do not start at 16-channel block
// boundaries of the output, as ShuffleNet's (24 + 216 channels): two
// inputs, and three with the middle one straddling two blocks.

func init() { caseFamilies = append(caseFamilies, shiftedConcatCases) }

func shiftedConcatCase(name string, chans []int, h, w int) genCase {
	var nodes []node
	var inputs []valueInfo
	var ins []*onnx.Tensor
	var names []string
	total := 0
	var parts [][]float32
	for k, ch := range chans {
		d := []int64{1, int64(ch), int64(h), int64(w)}
		x := data(d, float64(40+k))
		in, r := fmt.Sprintf("x%d", k), fmt.Sprintf("r%d", k)
		nodes = append(nodes, node{op: "Relu", inputs: []string{in}, outputs: []string{r}})
		inputs = append(inputs, fvi(in, d))
		ins = append(ins, onnx.NewFloat32(in, d, x))
		names = append(names, r)
		parts = append(parts, mapF(x, func(v float32) float32 { return max(v, 0) }))
		total += ch
	}
	var y []float32
	for _, p := range parts {
		y = append(y, p...) // channels are the outermost axis after the batch of 1
	}
	yd := []int64{1, int64(total), int64(h), int64(w)}
	nodes = append(nodes, node{op: "Concat", inputs: names, outputs: []string{"y"}, attrs: []attr{iAttr("axis", 1)}})
	return genCase{name: name, opset: 13,
		g:    graph{nodes: nodes, inputs: inputs, outputs: []valueInfo{fvi("y", yd)}},
		ins:  ins,
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, y)},
	}
}

func shiftedConcatCases() []genCase {
	return []genCase{
		shiftedConcatCase("concat_unaligned_24_20", []int{24, 20}, 3, 4),
		shiftedConcatCase("concat_unaligned_8_30_10", []int{8, 30, 10}, 2, 5),
	}
}
