package alidnn_test

import (
	"context"
	"fmt"
	"log"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// A tenant's program: compile a model, open a slot loaded with the AliDNN
// engine through faasd, and run it. Run may be called from many goroutines;
// the session batches them.
func ExampleOpen() {
	ctx := context.Background()
	m, err := onnx.ReadModel("model.onnx")
	if err != nil {
		log.Fatal(err)
	}
	prog, err := alidnn.Compile(m)
	if err != nil {
		log.Fatal(err)
	}
	c, err := faas.Dial(ctx, "", faas.WithToken("faas_…")) // $FAAS_AGENT or /run/faas/faasd.sock
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	dev, err := c.Open(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	s, err := alidnn.Open(ctx, alidnn.Agent(dev), prog)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	in, err := onnx.ReadTensor("input_0.pb")
	if err != nil {
		log.Fatal(err)
	}
	in.Name = prog.Inputs[0].Name
	res, err := s.Run(ctx, in)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Outputs[0].Dims, res.Stats.DeviceNS(), "ns on the engine")
}
