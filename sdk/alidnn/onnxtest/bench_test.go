package onnxtest_test

import (
	"context"
	"testing"

	engine "github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// BenchmarkMobileNetV2 times one inference of MobileNet-v2 (random weights,
// fp32, 224×224, batch 1) on the in-process engine and reports the modeled
// device time; BenchmarkMobileNetV2Compile reports its bound.
func BenchmarkMobileNetV2(b *testing.B) {
	n := mobilenetV2()
	m, x := randomNet(b, n)
	prog, err := alidnn.Compile(m)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s, err := alidnn.Load(ctx, local(b), prog)
	if err != nil {
		b.Fatal(err)
	}
	in := onnx.NewFloat32("x", n.inputDims(), to32(x))
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

// BenchmarkMobileNetV2Int8 is BenchmarkMobileNetV2 post-training
// quantised to int8, calibrated on the benchmark's input (as
// BenchmarkBERTBase/int8 is), and reports the array's int8 bound beside
// the modeled time: the program's multiply-accumulates at the 16×16
// array's int8 rate.
func BenchmarkMobileNetV2Int8(b *testing.B) {
	n := mobilenetV2()
	m, x := randomNet(b, n)
	in := onnx.NewFloat32("x", n.inputDims(), to32(x))
	ctx := context.Background()
	dev := local(b)
	prog, err := alidnn.Quantize(ctx, dev, m, [][]*onnx.Tensor{{in}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := alidnn.Load(ctx, dev, prog)
	if err != nil {
		b.Fatal(err)
	}
	var ns uint64
	for b.Loop() {
		res, err := s.Run(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		ns = res.Stats.DeviceNS()
	}
	cfg := engine.Default
	b.ReportMetric(float64(ns)/1e6, "device-ms")
	b.ReportMetric(float64(prog.MACs)/float64(cfg.BlockIn*cfg.BlockOut)/float64(cfg.ClockMHz)/1e3, "bound-ms")
}

// BenchmarkMobileNetV2Compile times compiling MobileNet-v2 for fp32 and
// reports the array's bound for the program, as BenchmarkResNet50Compile
// does: its multiply-accumulates (depthwise ones included, each counted
// once) at the 16×16 array's fp32 rate and the engine clock.
func BenchmarkMobileNetV2Compile(b *testing.B) {
	m, _ := randomNet(b, mobilenetV2())
	var prog *alidnn.Program
	var err error
	for b.Loop() {
		if prog, err = alidnn.Compile(m); err != nil {
			b.Fatal(err)
		}
	}
	cfg := engine.Default
	perCycle := float64(cfg.BlockIn*cfg.BlockOut) / float64(cfg.FP32Rate)
	b.ReportMetric(float64(prog.MACs)/perCycle/float64(cfg.ClockMHz)/1e3, "bound-ms")
	b.ReportMetric(float64(len(prog.Insns)), "insns")
}
