package alidnn

import (
	"context"
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Quantize compiles an fp32 model to int8 by post-training quantisation:
// it compiles the model in fp32, runs it on dev over the calibration inputs,
// records the largest magnitude of every tensor the engine writes, and
// compiles again with int8 GEMM layers at those scales (symmetric per-tensor
// activations, per-channel weights). Layers whose consumers need floats
// (graph outputs, Softmax, element-wise sums of tensors, LRN) dequantise.
// A dynamically quantised model's DynamicQuantizeLinear scales are
// calibrated on the same run (see Calibrate). The runs load programs from
// the start of dev's window, over whatever it holds.
func Quantize(ctx context.Context, dev Device, m *onnx.Model, calib [][]*onnx.Tensor, opts ...Option) (*Program, error) {
	return quantize(ctx, localFor(dev), m, calib, opts)
}

// QuantizeOn is Quantize calibrating on eng: an engine simulated in
// the process, or a faasd slot or attachment (alidnn.Agent), as TensorRT
// calibrates on the GPU it builds for. Its sessions are closed when done.
func QuantizeOn(ctx context.Context, eng Engine, m *onnx.Model, calib [][]*onnx.Tensor, opts ...Option) (*Program, error) {
	return quantize(ctx, func() Engine { return eng }, m, calib, opts)
}

// quantize is Quantize with each calibration run on an engine of engines.
func quantize(ctx context.Context, engines func() Engine, m *onnx.Model, calib [][]*onnx.Tensor, opts []Option) (*Program, error) {
	r, bounds, err := measure(ctx, engines, m, calib, append(slices.Clip(opts), measureChainInputs()))
	if err != nil {
		return nil, fmt.Errorf("quantize: %w", err)
	}
	abs := make(map[string]float32, len(r))
	for name, s := range r {
		abs[name] = s.absMax()
	}
	return Compile(m, append(opts, withRanges(abs), withBounds(bounds))...)
}

// localFor returns a fresh in-process Engine on dev for one calibration
// run (see Load): each starts at the beginning of dev's window.
func localFor(dev Device) func() Engine {
	return func() Engine { return NewLocal(dev) }
}

// Calibrate compiles a dynamically quantised model, as onnxruntime's
// quantize_dynamic writes one (DynamicQuantizeLinear → MatMulInteger), its
// other layers as they are: it runs the model on dev over the calibration
// inputs, records the range of each DynamicQuantizeLinear's input, and
// compiles it with the scales and zero points DynamicQuantizeLinear
// computes from those ranges fixed (the engine takes quantisation
// parameters at compile time; see dynquant.go, which also says why it runs
// the model once per level of DynamicQuantizeLinear).
func Calibrate(ctx context.Context, dev Device, m *onnx.Model, calib [][]*onnx.Tensor, opts ...Option) (*Program, error) {
	_, bounds, err := measure(ctx, localFor(dev), m, calib, opts)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	return Compile(m, append(opts, withBounds(bounds))...)
}

// measure runs the model on engines over the calibration inputs once per level
// of DynamicQuantizeLinear (at least once), and returns the ranges, 0
// included, of every graph input and layer output the engine holds in fp32
// in the last run, and of every DynamicQuantizeLinear's input by name.
func measure(ctx context.Context, engines func() Engine, m *onnx.Model, calib [][]*onnx.Tensor, opts []Option) (ranges, bounds map[string]valueRange, err error) {
	if len(calib) == 0 {
		return nil, nil, fmt.Errorf("no calibration inputs")
	}
	levels, depth := dynamicLevels(m.Graph)
	bounds = map[string]valueRange{}
	for lvl := 0; lvl < max(depth, 1); lvl++ {
		var passed map[string]string
		ranges, passed, err = measureOnce(ctx, engines(), m, calib, append(opts, forCalibration(), withBounds(bounds)))
		if err != nil {
			return nil, nil, err
		}
		for in, l := range levels {
			if l != lvl {
				continue
			}
			r, ok := ranges[passed[in]]
			if !ok {
				return nil, nil, fmt.Errorf("DynamicQuantizeLinear of %q: its input is not a tensor the engine holds in fp32, to measure", in)
			}
			bounds[in] = r
		}
	}
	return ranges, bounds, nil
}

// measureOnce compiles the model with opts, runs it on eng over the
// calibration inputs and returns the range of every graph input and layer
// output the engine holds in fp32, and the DynamicQuantizeLinear inputs the
// compilation passed through (see compiler.passed).
func measureOnce(ctx context.Context, eng Engine, m *onnx.Model, calib [][]*onnx.Tensor, opts []Option) (map[string]valueRange, map[string]string, error) {
	c := newCompiler(m, opts)
	if err := c.build(); err != nil {
		return nil, nil, err
	}
	p, err := c.emit()
	if err != nil {
		return nil, nil, err
	}
	// Every layer output and graph input is a tensor to measure.
	var probes []*value
	probes = append(probes, c.inputs...)
	for _, l := range c.layers {
		probes = append(probes, l.out)
	}
	s, err := Open(ctx, eng, p, WithBatch(1), WithPipeline(1))
	if err != nil {
		return nil, nil, err
	}
	defer s.Close(ctx)
	ranges := map[string]valueRange{}
	for k, in := range calib {
		if _, err := s.Run(ctx, in...); err != nil {
			return nil, nil, fmt.Errorf("calibration input %d: %w", k, err)
		}
		for _, v := range probes {
			if v.elem != f32 {
				continue
			}
			buf := make([]byte, v.lay.bytes(f32))
			if err := s.readAct(ctx, buf, v.addr&^actTag); err != nil {
				return nil, nil, err
			}
			r := ranges[v.name]
			for _, f := range unpackF32(v.lay, buf) {
				r.lo, r.hi = min(r.lo, f), max(r.hi, f)
			}
			ranges[v.name] = r
		}
	}
	return ranges, c.passed, nil
}

// withRanges switches fp32 GEMM layers to int8 with the calibrated ranges
// (max |x| per value name); Quantize measures them.
func withRanges(r map[string]float32) Option {
	return func(o *options) { o.int8, o.ranges = true, r }
}

// withBounds fixes DynamicQuantizeLinear's scales and zero points from the
// calibrated ranges (min and max per value name).
func withBounds(b map[string]valueRange) Option {
	return func(o *options) { o.bounds = b }
}

// measureChainInputs ends, in the calibration run of a post-training
// quantisation, the layers whose outputs start activation chains, so that
// their ranges are measured for the chains' tables (see lutfuse.go).
func measureChainInputs() Option {
	return func(o *options) { o.chainInputs = true }
}

// forCalibration compiles the model for a run that measures the ranges:
// DynamicQuantizeLinear without a range passes its input through (see
// dynquant.go).
func forCalibration() Option {
	return func(o *options) { o.calibrating = true }
}
