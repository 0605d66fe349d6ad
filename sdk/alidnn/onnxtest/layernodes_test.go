package onnxtest_test

import "fmt"

// The node sequences transformer layers are written with, as torch.onnx
// writes them; the cases name their tensors.

// linearNodes is nn.Linear: in · w + b, the product named out_mm.
func linearNodes(in, w, b, out string) []node {
	return []node{
		{op: "MatMul", inputs: []string{in, w}, outputs: []string{out + "_mm"}},
		{op: "Add", inputs: []string{out + "_mm", b}, outputs: []string{out}},
	}
}

// viewNodes reshapes in to its first two dimensions followed by the
// constant tail, as torch.onnx writes x.view(x.size()[:-1] + tail): Shape,
// Slice (of the constants lead_start and lead_end), Concat, Reshape.
func viewNodes(in, out, tail string) []node {
	return []node{
		{op: "Shape", inputs: []string{in}, outputs: []string{out + "_shape"}},
		{op: "Slice", inputs: []string{out + "_shape", "lead_start", "lead_end"}, outputs: []string{out + "_lead"}},
		{op: "Concat", inputs: []string{out + "_lead", tail}, outputs: []string{out + "_to"}, attrs: []attr{iAttr("axis", 0)}},
		{op: "Reshape", inputs: []string{in, out + "_to"}, outputs: []string{out}},
	}
}

// headNodes splits in's hidden axis by the constant split and moves the
// heads ahead of the tokens: [B, S, H·D] → [B, H, S, D].
func headNodes(in, out string) []node {
	return append(viewNodes(in, out+"_split", "split"),
		node{op: "Transpose", inputs: []string{out + "_split"}, outputs: []string{out}, attrs: []attr{isAttr("perm", 0, 2, 1, 3)}})
}

// encoderLayerDims adds the weights' shapes of layers encoder layers of
// hidden size h and feed-forward size f to d, named lN.wq … lN.be2 as the
// cases' layers read them.
func encoderLayerDims(d map[string][]int64, layers int, h, f int64) {
	for l := range layers {
		p := fmt.Sprintf("l%d.", l)
		for _, m := range []string{"q", "k", "v", "o"} {
			d[p+"w"+m], d[p+"b"+m] = []int64{h, h}, []int64{h}
		}
		d[p+"w1"], d[p+"b1"], d[p+"w2"], d[p+"b2"] = []int64{h, f}, []int64{f}, []int64{f, h}, []int64{h}
		d[p+"g1"], d[p+"be1"], d[p+"g2"], d[p+"be2"] = []int64{h}, []int64{h}, []int64{h}, []int64{h}
	}
}
