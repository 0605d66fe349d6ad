package alidnn

import (
	"context"
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Quantize compiles an fp32 model to int8 by post-training quantisation:
// it compiles the model in fp32, runs it on dev over the calibration inputs,
// records the largest magnitude of every tensor the engine writes, and
// compiles again with int8 GEMM layers at those scales (symmetric per-tensor
// activations, per-channel weights). Layers whose consumers need floats
// (graph outputs, Softmax, element-wise sums of tensors, LRN) dequantise.
func Quantize(ctx context.Context, dev Device, m *onnx.Model, calib [][]*onnx.Tensor, opts ...Option) (*Program, error) {
	if len(calib) == 0 {
		return nil, fmt.Errorf("quantize: no calibration inputs")
	}
	c := newCompiler(m, opts)
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
	ranges := map[string]float32{}
	for k, in := range calib {
		if _, err := s.Run(ctx, in...); err != nil {
			return nil, fmt.Errorf("quantize: calibration input %d: %w", k, err)
		}
		for _, v := range probes {
			if v.elem != f32 {
				continue
			}
			buf := make([]byte, v.lay.bytes(f32))
			if err := s.readAct(ctx, buf, v.addr&^actTag); err != nil {
				return nil, err
			}
			for _, f := range unpackF32(v.lay, buf) {
				ranges[v.name] = max(ranges[v.name], float32(math.Abs(float64(f))))
			}
		}
	}
	return Compile(m, append(opts, withRanges(ranges))...)
}
