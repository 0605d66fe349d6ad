package alidnn

import (
	"context"
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Quantize compiles an fp32 model to int8 by post-training quantisation:
// it compiles the model in fp32, runs it on dev over the calibration inputs,
// records the largest magnitude of every tensor the engine writes, and
// compiles again with int8 GEMM layers at those scales (symmetric per-tensor
// activations, per-channel weights). Layers whose consumers need floats
// (graph outputs, Softmax, element-wise sums of tensors, LRN) dequantise.
// A dynamically quantised model's DynamicQuantizeLinear scales are
// calibrated on the same run (see Calibrate).
func Quantize(ctx context.Context, dev Device, m *onnx.Model, calib [][]*onnx.Tensor, opts ...Option) (*Program, error) {
	r, err := measure(ctx, dev, m, calib, opts)
	if err != nil {
		return nil, fmt.Errorf("quantize: %w", err)
	}
	abs := make(map[string]float32, len(r))
	for name, s := range r {
		abs[name] = s.absMax()
	}
	return Compile(m, append(opts, withRanges(abs), withBounds(r))...)
}

// Calibrate compiles a dynamically quantised model, as onnxruntime's
// quantize_dynamic writes one (DynamicQuantizeLinear → MatMulInteger), its
// other layers as they are: it runs the model on dev over the calibration
// inputs, each DynamicQuantizeLinear passing its input through, records the
// range of each of their inputs, and compiles again with the scales and
// zero points DynamicQuantizeLinear computes from those ranges fixed (the
// engine takes quantisation parameters at compile time; see dynquant.go).
func Calibrate(ctx context.Context, dev Device, m *onnx.Model, calib [][]*onnx.Tensor, opts ...Option) (*Program, error) {
	r, err := measure(ctx, dev, m, calib, opts)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	return Compile(m, append(opts, withBounds(r))...)
}

// measure compiles the model for calibration, runs it on dev over the
// calibration inputs and returns the range, 0 included, of every graph
// input and layer output the engine holds in fp32.
func measure(ctx context.Context, dev Device, m *onnx.Model, calib [][]*onnx.Tensor, opts []Option) (map[string]valueRange, error) {
	if len(calib) == 0 {
		return nil, fmt.Errorf("no calibration inputs")
	}
	c := newCompiler(m, append(opts, forCalibration()))
	if err := c.build(); err != nil {
		return nil, err
	}
	p, err := c.emit()
	if err != nil {
		return nil, err
	}
	// Every layer output and graph input is a tensor to measure.
	var probes []*value
	probes = append(probes, c.inputs...)
	for _, l := range c.layers {
		probes = append(probes, l.out)
	}
	s, err := Load(ctx, dev, p)
	if err != nil {
		return nil, err
	}
	ranges := map[string]valueRange{}
	for k, in := range calib {
		if _, err := s.Run(ctx, in...); err != nil {
			return nil, fmt.Errorf("calibration input %d: %w", k, err)
		}
		for _, v := range probes {
			if v.elem != f32 {
				continue
			}
			buf := make([]byte, v.lay.bytes(f32))
			if err := s.readAct(ctx, buf, v.addr&^actTag); err != nil {
				return nil, err
			}
			r := ranges[v.name]
			for _, f := range unpackF32(v.lay, buf) {
				r.lo, r.hi = min(r.lo, f), max(r.hi, f)
			}
			ranges[v.name] = r
		}
	}
	return ranges, nil
}
