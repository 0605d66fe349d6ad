package alidnn_test

import (
	"errors"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestConcatTokens concatenates along the tokens of hidden states [N,S,H]
// that a MatMul wrote (hidden on the lanes): a ViT's class token, a
// constant [1,1,H] expanded to the batch (folded), in front of the
// patches, a constant after them, and a second computed tensor; exactly,
// against the engine's own h, and read on by a MatMul.
func TestConcatTokens(t *testing.T) {
	const N, S, K, H = 2, 16, 20, 32
	axis := func(a int64) []*onnx.Attribute { return []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: a}} }
	cls := ramp("cls", []int64{1, 1, H}, 0.25)
	tail := ramp("tail", []int64{N, 2, H}, -0.5)
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{ramp("w", []int64{K, H}, 0.125), ramp("w2", []int64{H, H}, 0.0625), cls, tail,
			ints64("to", onnx.Int64, []int64{3}, N, 1, H)},
		Nodes: []*onnx.Node{
			{OpType: "MatMul", Name: "h", Inputs: []string{"x", "w"}, Outputs: []string{"h"}},
			{OpType: "Relu", Name: "h2", Inputs: []string{"h"}, Outputs: []string{"h2"}},
			{OpType: "Expand", Name: "cls_n", Inputs: []string{"cls", "to"}, Outputs: []string{"cls_n"}},
			{OpType: "Concat", Name: "y", Inputs: []string{"cls_n", "h", "tail", "h2"}, Outputs: []string{"y"}, Attrs: axis(1)},
			{OpType: "MatMul", Name: "z", Inputs: []string{"y", "w2"}, Outputs: []string{"z"}},
		},
		Inputs:  []onnx.ValueInfo{vinfo("x", N, S, K)},
		Outputs: []onnx.ValueInfo{vinfo("y", N, 2*S+3, H), vinfo("z", N, 2*S+3, H), vinfo("h", N, S, H)},
	}
	res := runGraphResult(t, g, ramp("x", []int64{N, S, K}, 0.5))
	y, _ := res.Outputs[0].Float32s()
	z, _ := res.Outputs[1].Float32s()
	h, _ := res.Outputs[2].Float32s()
	cv, _ := cls.Float32s()
	tv, _ := tail.Float32s()
	const T = 2*S + 3
	for b := range N {
		for i := range T {
			for j := range H {
				var want float32
				switch {
				case i == 0:
					want = cv[j]
				case i <= S:
					want = h[(b*S+i-1)*H+j]
				case i <= S+2:
					want = tv[(b*2+i-S-1)*H+j]
				default:
					want = max(0, h[(b*S+i-S-3)*H+j])
				}
				if got := y[(b*T+i)*H+j]; got != want {
					t.Fatalf("y[%d][%d][%d] = %v, want %v", b, i, j, got, want)
				}
			}
		}
	}
	w2, _ := g.Initializers[1].Float32s()
	for r := range N * T {
		for j := range H {
			var want float64
			for k := range H {
				want += float64(y[r*H+k]) * float64(w2[k*H+j])
			}
			if d := float64(z[r*H+j]) - want; d > 1e-4 || d < -1e-4 {
				t.Fatalf("z[%d][%d] = %v, want %v", r, j, z[r*H+j], want)
			}
		}
	}
}

// A Concat along the lanes of tensors a MatMul wrote, whose first is not
// a whole number of 16-lane blocks, would need the lanes realigned, which
// only the NCHW layout's path does: refused naming the node.
func TestConcatTokensLanesRefused(t *testing.T) {
	const N, S, K = 1, 4, 16
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{ramp("w", []int64{K, 20}, 0.125), ramp("v", []int64{K, 16}, 0.125)},
		Nodes: []*onnx.Node{
			{OpType: "MatMul", Name: "a", Inputs: []string{"x", "w"}, Outputs: []string{"a"}},
			{OpType: "MatMul", Name: "b", Inputs: []string{"x", "v"}, Outputs: []string{"b"}},
			{OpType: "Concat", Name: "lanes_cat", Inputs: []string{"a", "b"}, Outputs: []string{"y"},
				Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: -1}}},
		},
		Inputs:  []onnx.ValueInfo{vinfo("x", N, S, K)},
		Outputs: []onnx.ValueInfo{vinfo("y", N, S, 36)},
	}
	_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
	if !errors.Is(err, alidnn.ErrUnsupported) {
		t.Fatalf("got %v, want ErrUnsupported", err)
	}
	t.Log(err)
}
