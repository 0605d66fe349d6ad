package onnxtest_test

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	engine "github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// BenchmarkBERTBase runs BERT-base (12 layers, hidden 768, 12 heads,
// intermediate 3072, vocabulary 30522; random weights) on one sequence of
// 128 tokens, in fp32 and int8, on the in-process engine: one inference
// an iteration. It reports the modeled device time against the array's
// bound for every multiply-accumulate of the model (see transformerBound),
// tokens/s per chip at the modeled time, and the compile time beside the
// wall time of one inference (ns/op, and infer-ms).
func BenchmarkBERTBase(b *testing.B) {
	const seq = 128
	s := bertBase
	m := decodeGraph(b, "bert_base", bertGraph(s, newBertWeights(s)))
	ids, types, mask := make([]int64, seq), make([]int64, seq), make([]int64, seq)
	for k := range ids {
		ids[k] = int64(k*7919+101) % s.vocab
		types[k] = int64(k / (seq / 2))
		mask[k] = 1
	}
	d := []int64{1, seq}
	ins := []*onnx.Tensor{intTensor("input_ids", onnx.Int64, d, ids), intTensor("token_type_ids", onnx.Int64, d, types),
		intTensor("attention_mask", onnx.Int64, d, mask)}
	macs := encoderMACs(s.layers, seq, s.hidden, s.ff) + s.hidden*s.hidden // and the pooler
	want := map[string][]int64{"last_hidden_state": {1, seq, s.hidden}, "pooler_output": {1, s.hidden}}
	benchTransformer(b, m, ins, want, macs, seq, "tokens/s", alidnn.WithShape("batch", 1), alidnn.WithShape("seq", seq))
}

// BenchmarkViTB16 is BenchmarkBERTBase for ViT-B/16 at 224×224 (12 layers,
// hidden 768, 12 heads, MLP 3072, 197 tokens, 1000 classes; random
// weights), one image, reporting images/s per chip.
func BenchmarkViTB16(b *testing.B) {
	s := vitBase
	m := decodeGraph(b, "vit_b16", vitGraph(s, newVitWeights(s), false))
	dims := []int64{1, s.channels, s.img, s.img}
	img := mapF(data(dims, 3), func(v float32) float32 { return v * 0.4 })
	ins := []*onnx.Tensor{onnx.NewFloat32("pixel_values", dims, img)}
	patch := s.grid() * s.grid() * s.hidden * s.channels * s.patch * s.patch
	macs := patch + encoderMACs(s.layers, s.tokens(), s.hidden, s.ff) + s.hidden*s.classes
	want := map[string][]int64{"last_hidden_state": {1, s.tokens(), s.hidden}, "logits": {1, s.classes}}
	benchTransformer(b, m, ins, want, macs, 1, "images/s", alidnn.WithShape("batch", 1))
}

// encoderMACs counts the multiply-accumulates of layers encoder layers
// over tokens tokens: the query, key, value and output projections
// (4·S·H²), the MLP (2·S·H·F), and attention's scores Q·Kᵀ and context
// P·V (S²·D a head each, 2·S²·H over the heads).
func encoderMACs(layers, tokens, hidden, ff int64) int64 {
	S, H := tokens, hidden
	return layers * (4*S*H*H + 2*S*H*ff + 2*S*S*H)
}

// decodeGraph encodes g as an ONNX model and reads it back, as the
// compiler would read an exporter's file.
func decodeGraph(b *testing.B, name string, g graph) *onnx.Model {
	buf, err := encodeModel(name, 17, g)
	if err != nil {
		b.Fatal(err)
	}
	m, err := onnx.Decode(buf)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// benchTransformer runs m's fp32 and int8 sub-benchmarks. macs are the
// model's multiply-accumulates, items what one inference delivers (tokens
// or images, per unit), want the outputs' shapes.
func benchTransformer(b *testing.B, m *onnx.Model, ins []*onnx.Tensor, want map[string][]int64, macs, items int64, unit string, opts ...alidnn.Option) {
	b.Run("fp32", func(b *testing.B) {
		dev := bigLocal(b)
		start := time.Now()
		prog, err := alidnn.Compile(m, opts...)
		if err != nil {
			b.Fatal(err)
		}
		compile := time.Since(start)
		runTransformer(b, dev, prog, ins, want, macs, items, unit, engine.Default.FP32Rate)
		b.ReportMetric(ms(compile), "compile-ms") // after b.Loop, which drops earlier metrics
	})
	b.Run("int8", func(b *testing.B) {
		dev := bigLocal(b)
		start := time.Now()
		prog, err := alidnn.Quantize(context.Background(), dev, m, [][]*onnx.Tensor{ins}, opts...)
		if err != nil {
			b.Fatal(err)
		}
		quantize := time.Since(start)
		runTransformer(b, dev, prog, ins, want, macs, items, unit, 1)
		// Quantize compiles in fp32, runs the calibration input and
		// compiles again: more than a compilation.
		b.ReportMetric(ms(quantize), "quantize-ms")
	})
}

// runTransformer loads prog on dev and runs ins once an iteration,
// checking the outputs' shapes, then reports the modeled device time, the
// array's bound for macs at rate (cycles per multiply-accumulate lane,
// engine.Config.FP32Rate for fp32, 1 for int8), their ratio, items per
// second at the modeled time, and the mean wall time of a run.
func runTransformer(b *testing.B, dev *model.Local, prog *alidnn.Program, ins []*onnx.Tensor, want map[string][]int64, macs, items int64, unit string, rate int) {
	ctx := context.Background()
	s, err := alidnn.Load(ctx, dev, prog)
	if err != nil {
		b.Fatal(err)
	}
	var dev64 uint64
	var wall time.Duration
	n := 0
	for b.Loop() {
		res, err := s.Run(ctx, ins...)
		if err != nil {
			b.Fatal(err)
		}
		checkShapes(b, res.Outputs, want)
		dev64, wall, n = res.Stats.DeviceNS(), wall+res.HostTime, n+1
	}
	bound := transformerBound(macs, rate)
	device := float64(dev64) / 1e6
	b.ReportMetric(device, "device-ms")
	b.ReportMetric(bound, "bound-ms")
	b.ReportMetric(device/bound, "x-bound")
	b.ReportMetric(float64(items)/(device/1e3), unit)
	b.ReportMetric(ms(wall)/float64(n), "infer-ms")
	b.ReportMetric(float64(macs)/1e9, "GMAC")
}

// transformerBound is the time in ms the 16×16 array needs for macs
// multiply-accumulates at the engine clock, one lane in rate retiring a
// cycle (the fp32 datapath's rate is 4): the time no schedule can beat.
func transformerBound(macs int64, rate int) float64 {
	cfg := engine.Default
	perCycle := float64(cfg.BlockIn*cfg.BlockOut) / float64(rate)
	return float64(macs) / perCycle / float64(cfg.ClockMHz) / 1e3
}

// checkShapes fails b unless outs are exactly want's tensors, of want's
// shapes, every value finite.
func checkShapes(b *testing.B, outs []*onnx.Tensor, want map[string][]int64) {
	if len(outs) != len(want) {
		b.Fatalf("%d outputs, want %d", len(outs), len(want))
	}
	for _, t := range outs {
		w, ok := want[t.Name]
		if !ok || !slices.Equal(t.Dims, w) {
			b.Fatalf("output %q of shape %v, want %v", t.Name, t.Dims, w)
		}
		v, err := t.Float32s()
		if err != nil {
			b.Fatal(err)
		}
		for k, f := range v {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				b.Fatalf("output %q[%d] = %v", t.Name, k, f)
			}
		}
	}
}

// bigLocal is an in-process engine with 2 GiB of device memory: BERT-base
// holds 440 MB of fp32 weights.
func bigLocal(b *testing.B) *model.Local {
	dev, err := model.NewLocal(2 << 30)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dev.Close() })
	return dev
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
