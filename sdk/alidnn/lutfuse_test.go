package alidnn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestLutChains quantises an MLP (MatMul, bias, an activation written as
// exporters write it, MatMul) and checks that the activation became one
// ALU lut between the two int8 GEMMs, and that the int8 model stays
// within 5% of the fp32 model's largest output. Where the activation's
// input is also read by something else (a graph output), or the chain is
// a ReLU, which the integer accumulator applies exactly, there is no lut.

func TestLutChains(t *testing.T) {
	const S, K, F = 8, 32, 64
	scalar := func(name string, v float32) *onnx.Tensor { return onnx.NewFloat32(name, nil, []float32{v}) }
	node := func(op string, out string, in ...string) *onnx.Node {
		return &onnx.Node{OpType: op, Name: out, Inputs: in, Outputs: []string{out}}
	}
	consts := []*onnx.Tensor{scalar("half", 0.5), scalar("one", 1), scalar("sqrt2", math.Sqrt2), scalar("three", 3),
		scalar("c", 0.044715), scalar("k", float32(math.Sqrt(2/math.Pi)))}
	cases := []struct {
		name  string
		opset int64
		chain []*onnx.Node // from "h" to "a"
		lut   bool
	}{
		{"gelu erf as torch.onnx writes it", 17, []*onnx.Node{node("Div", "d", "h", "sqrt2"), node("Erf", "e", "d"),
			node("Add", "e1", "e", "one"), node("Mul", "m", "h", "e1"), node("Mul", "a", "m", "half")}, true},
		{"gelu tanh (gelu_new)", 17, []*onnx.Node{node("Pow", "p", "h", "three"), node("Mul", "pc", "p", "c"),
			node("Add", "s", "h", "pc"), node("Mul", "sk", "s", "k"), node("Tanh", "th", "sk"), node("Add", "t1", "th", "one"),
			node("Mul", "hh", "h", "half"), node("Mul", "a", "hh", "t1")}, true},
		{"Gelu operator", 20, []*onnx.Node{node("Gelu", "a", "h")}, true},
		{"SiLU", 17, []*onnx.Node{node("Sigmoid", "sg", "h"), node("Mul", "a", "h", "sg")}, true},
		{"HardSwish", 17, []*onnx.Node{node("HardSwish", "a", "h")}, true},
		{"Relu stays integer", 17, []*onnx.Node{node("Relu", "a", "h")}, false},
		// x·σ(x) + x is a function of x too.
		{"SiLU plus its input", 17, []*onnx.Node{node("Sigmoid", "sg", "h"), node("Mul", "m", "h", "sg"),
			node("Add", "a", "m", "h")}, true},
		{"input also a graph output", 17, []*onnx.Node{node("Sigmoid", "sg", "h"), node("Mul", "a", "h", "sg")}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := wave("x", []int64{1, S, K}, 3, 0.7)
			nodes := []*onnx.Node{node("MatMul", "h0", "x", "w1"), node("Add", "h", "h0", "b1")}
			nodes = append(nodes, tc.chain...)
			nodes = append(nodes, node("MatMul", "y", "a", "w2"))
			g := &onnx.Graph{
				Initializers: append([]*onnx.Tensor{ramp("w1", []int64{K, F}, 0.05), ramp("b1", []int64{F}, 0.1), ramp("w2", []int64{F, 16}, 0.05)}, consts...),
				Nodes:        nodes,
				Inputs:       []onnx.ValueInfo{vinfo("x", 1, S, K)},
				Outputs:      []onnx.ValueInfo{vinfo("y", 1, S, 16)},
			}
			if tc.name == "input also a graph output" {
				g.Outputs = append(g.Outputs, vinfo("h", 1, S, F))
			}
			m := &onnx.Model{Opsets: []onnx.Opset{{Version: tc.opset}}, Graph: g}
			p8, want, got := quantizedPair(t, m, x)
			luts := 0
			for _, in := range p8.Insns {
				if in.Op == isa.OpALU && in.Alu == isa.AluLut {
					luts++
				}
			}
			if (luts > 0) != tc.lut {
				t.Errorf("%d lut instructions; want lut %v", luts, tc.lut)
			}
			checkWithin(t, fmt.Sprintf("%d luts", luts), got, want, 0.05)
		})
	}
}
