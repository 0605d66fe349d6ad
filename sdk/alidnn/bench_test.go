package alidnn_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// BenchmarkResNet50 times one inference of light_resnet50 in fp32 on the
// in-process engine (inputs up, run, outputs down) and reports the modeled
// device time.
func BenchmarkResNet50(b *testing.B) {
	dir := testenv.TestData(b, "onnx", "light", "light_resnet50")
	m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		b.Fatal(err)
	}
	prog, err := alidnn.Compile(m)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s, err := alidnn.Load(ctx, local(b), prog)
	if err != nil {
		b.Fatal(err)
	}
	in, _ := readSet(b, filepath.Join(dir, "test_data_set_0"))
	in.Name = m.Graph.Inputs[0].Name
	var dev uint64
	for b.Loop() {
		res, err := s.Run(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		dev = res.Stats.DeviceNS()
	}
	b.ReportMetric(float64(dev)/1e6, "device-ms")
	b.ReportMetric(float64(prog.MACs)/1e9, "GMAC")
}

// BenchmarkResNet50Naive is BenchmarkResNet50's baseline: ResNet-50's
// multiply-accumulates (4.09 G) as straightforward fp32 dot products of 576
// terms in Go, with no data movement — a host running the network in the
// obvious way.
func BenchmarkResNet50Naive(b *testing.B) {
	const macs = 4_089_184_256 // light_resnet50's convolutions and FC, as compiled
	const k = 576
	x := make([]float32, k)
	w := make([]float32, k)
	for i := range x {
		x[i], w[i] = float32(i%7)*0.1, float32(i%5)*0.2
	}
	var sink float32
	for b.Loop() {
		for range macs / k {
			var s float32
			for i := range k {
				s += x[i] * w[i]
			}
			sink += s
		}
	}
	if sink == 1 {
		b.Log(sink)
	}
}
