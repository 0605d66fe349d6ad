package alidnn_test

import (
	"context"
	"fmt"
	"log"

	"github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Compile a model once and run it on the AliDNN engine simulated in this
// process: the same Session API as against faasd (Open with
// alidnn.Agent), without an agent, for development and tests.
func ExampleNewLocal() {
	// y = relu(x · Wᵀ + b), with W 2×4.
	w := onnx.NewFloat32("W", []int64{2, 4}, []float32{1, 2, 3, 4, -1, -1, -1, -1})
	b := onnx.NewFloat32("b", []int64{2}, []float32{0.5, 0.5})
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{{Name: "x", ElemType: onnx.Float, Dims: []onnx.Dim{{Value: 1}, {Value: 4}}}},
		Initializers: []*onnx.Tensor{w, b},
		Nodes: []*onnx.Node{
			{Name: "fc", OpType: "Gemm", Inputs: []string{"x", "W", "b"}, Outputs: []string{"h"},
				Attrs: []*onnx.Attribute{{Name: "transB", Type: onnx.AttrInt, I: 1}}},
			{Name: "act", OpType: "Relu", Inputs: []string{"h"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}
	prog, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
	if err != nil {
		log.Fatal(err)
	}
	sim, err := model.NewLocal(64 << 20) // a simulated board, engine loaded
	if err != nil {
		log.Fatal(err)
	}
	defer sim.Close()
	ctx := context.Background()
	s, err := alidnn.Open(ctx, alidnn.NewLocal(sim), prog)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	res, err := s.Run(ctx, onnx.NewFloat32("x", []int64{1, 4}, []float32{1, 1, 1, 1}))
	if err != nil {
		log.Fatal(err)
	}
	y, err := res.Outputs[0].Float32s()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Outputs[0].Name, res.Outputs[0].Dims, y)
	// Output: y [1 2] [10.5 0]
}
