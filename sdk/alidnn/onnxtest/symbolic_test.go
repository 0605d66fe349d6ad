package onnxtest_test

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// A model with a symbolic batch and sequence length, as torch.onnx writes
// a transformer's input: x [batch, seq, 32]. Its shape arithmetic —
// x.view(b, t, -1) through Shape → Gather → Unsqueeze → Concat, position
// ids through Range → Unsqueeze → Expand → Cast — folds once each data
// set's input shape is bound, and the two sets have different shapes:
// y = Relu(x · W + position), W [32, 16].

func init() { caseFamilies = append(caseFamilies, symbolicCases) }

func symbolicCases() []genCase {
	const k, n = 32, 16
	w := mapF(data([]int64{k, n}, 91), func(v float32) float32 { return v / 20 })
	set := func(b, t int64, seed float64) dataSet {
		xd := []int64{b, t, k}
		x := data(xd, seed)
		y := make([]float32, b*t*n)
		for r := range int(b * t) {
			for j := range n {
				s := float32(r % int(t))
				for i := range k {
					s += x[r*k+i] * w[i*n+j]
				}
				y[r*n+j] = max(s, 0)
			}
		}
		return dataSet{ins: []*onnx.Tensor{onnx.NewFloat32("x", xd, x)}, outs: []*onnx.Tensor{onnx.NewFloat32("y", []int64{b, t, n}, y)}}
	}
	i64 := func(name string, dims []int64, v ...int64) *onnx.Tensor {
		t, err := onnx.NewInt(name, onnx.Int64, dims, v)
		if err != nil {
			panic(err)
		}
		return t
	}
	first, second := set(2, 3, 92), set(1, 5, 93)
	sym := []string{"batch", "seq", ""}
	return []genCase{{name: "symbolic_batch_and_sequence", opset: 13,
		g: graph{
			nodes: []node{
				{op: "Shape", inputs: []string{"x"}, outputs: []string{"s"}},
				{op: "Gather", inputs: []string{"s", "i0"}, outputs: []string{"b"}, attrs: []attr{iAttr("axis", 0)}},
				{op: "Gather", inputs: []string{"s", "i1"}, outputs: []string{"t"}, attrs: []attr{iAttr("axis", 0)}},
				{op: "Unsqueeze", inputs: []string{"b", "ax0"}, outputs: []string{"bu"}},
				{op: "Unsqueeze", inputs: []string{"t", "ax0"}, outputs: []string{"tu"}},
				{op: "Concat", inputs: []string{"bu", "tu", "minus1"}, outputs: []string{"view"}, attrs: []attr{iAttr("axis", 0)}},
				{op: "Reshape", inputs: []string{"x", "view"}, outputs: []string{"xv"}},
				{op: "Range", inputs: []string{"start", "t", "step"}, outputs: []string{"pos"}},
				{op: "Unsqueeze", inputs: []string{"pos", "ax0"}, outputs: []string{"pos1"}},
				{op: "Unsqueeze", inputs: []string{"pos1", "minus1"}, outputs: []string{"pos2"}},
				{op: "Concat", inputs: []string{"bu", "tu", "one"}, outputs: []string{"bt1"}, attrs: []attr{iAttr("axis", 0)}},
				{op: "Expand", inputs: []string{"pos2", "bt1"}, outputs: []string{"posb"}},
				{op: "Cast", inputs: []string{"posb"}, outputs: []string{"posf"}, attrs: []attr{iAttr("to", int64(onnx.Float))}},
				{op: "MatMul", inputs: []string{"xv", "w"}, outputs: []string{"h"}},
				{op: "Add", inputs: []string{"h", "posf"}, outputs: []string{"hp"}},
				{op: "Relu", inputs: []string{"hp"}, outputs: []string{"y"}},
			},
			inits: []*onnx.Tensor{onnx.NewFloat32("w", []int64{k, n}, w), i64("i0", nil, 0), i64("i1", nil, 1), i64("ax0", []int64{1}, 0),
				i64("minus1", []int64{1}, -1), i64("one", []int64{1}, 1), i64("start", nil, 0), i64("step", nil, 1)},
			inputs:  []valueInfo{{name: "x", typ: onnx.Float, dims: []int64{0, 0, k}, params: sym}},
			outputs: []valueInfo{{name: "y", typ: onnx.Float, dims: []int64{0, 0, n}, params: sym}},
		},
		ins: first.ins, outs: first.outs, more: []dataSet{second},
	}}
}
