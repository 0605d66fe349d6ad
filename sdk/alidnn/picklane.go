package alidnn

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// pickLane0 writes the nodes that reduce in, [..., C] holding one value
// per row broadcast to its lanes (a lane reduction's), to out [..., 1]: a
// MatMul by the column that picks lane 0. The other lanes are zeroed first
// — min and max with rows of NaN at lane 0 and 0 elsewhere, which the
// ALU's min and max take as the identity at lane 0 (they return the other
// operand of a NaN) and as 0 elsewhere whatever the value — as their
// products by the column's zeros would make an infinity NaN. The pick is
// then exact, infinities and NaN included. It counts its reads in uses.
func (c *compiler) pickLane0(in, out string, C int, uses map[string]int) []*onnx.Node {
	p := out + "/pick/"
	keep := make([]float32, C)
	keep[0] = float32(math.NaN())
	col := make([]float32, C)
	col[0] = 1
	c.vals[p+"keep"] = constFloat(p+"keep", []int{C}, keep)
	c.vals[p+"col"] = constFloat(p+"col", []int{C, 1}, col)
	uses[in]++
	uses[p+"lo"], uses[p+"z"] = 1, 1
	return []*onnx.Node{
		{OpType: "Min", Inputs: []string{in, p + "keep"}, Outputs: []string{p + "lo"}},
		{OpType: "Max", Inputs: []string{p + "lo", p + "keep"}, Outputs: []string{p + "z"}},
		{OpType: "MatMul", Inputs: []string{p + "z", p + "col"}, Outputs: []string{out}},
	}
}
