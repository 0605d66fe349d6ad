package alidnn_test

import (
	"context"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// BenchmarkElementwiseLowerings runs one operator on x and y [64,256] on
// the in-process engine and reports the modeled device time and the
// program's instructions: what the comparisons, Floor and Pow by
// per-element exponents cost beside an Add and a Pow by a constant.
func BenchmarkElementwiseLowerings(b *testing.B) {
	x, y := ramp("x", []int64{64, 256}, 0.37), ramp("y", []int64{64, 256}, 0.21)
	for _, c := range []struct{ name, op, second string }{
		{"Add", "Add", "y"}, {"Less", "Less", "y"}, {"Greater", "Greater", "y"}, {"LessOrEqual", "LessOrEqual", "y"},
		{"Round", "Round", ""}, {"Floor", "Floor", ""}, {"Ceil", "Ceil", ""},
		{"PowConstant", "Pow", "e"}, {"PowTensor", "Pow", "y"},
	} {
		b.Run(c.name, func(b *testing.B) {
			g := &onnx.Graph{
				Inputs:       []onnx.ValueInfo{vinfo("x", 64, 256), vinfo("y", 64, 256)},
				Initializers: []*onnx.Tensor{onnx.NewFloat32("e", nil, []float32{2.5})},
				Nodes:        []*onnx.Node{{Name: "op", OpType: c.op, Inputs: []string{"x"}, Outputs: []string{"z"}}},
				Outputs:      []onnx.ValueInfo{{Name: "z"}},
			}
			if c.second != "" {
				g.Nodes[0].Inputs = append(g.Nodes[0].Inputs, c.second)
			}
			prog, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			s, err := alidnn.Load(ctx, local(b), prog)
			if err != nil {
				b.Fatal(err)
			}
			var dev uint64
			for b.Loop() {
				res, err := s.Run(ctx, x, y)
				if err != nil {
					b.Fatal(err)
				}
				dev = res.Stats.DeviceNS()
			}
			b.ReportMetric(float64(dev)/1e3, "device-us")
			b.ReportMetric(float64(len(prog.Insns)), "insns")
		})
	}
}
