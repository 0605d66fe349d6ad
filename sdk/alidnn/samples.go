package alidnn

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// A program compiled ForBatch holds Batch samples a run along its inputs'
// and outputs' leading axis; a Session gives each Run one sample of it.
// stack and sample move between the two.

// checkSample checks that t is one sample of the batched input b: b's
// shape with a leading 1.
func checkSample(b Binding, t *onnx.Tensor) error {
	want := slices.Clone(b.Shape)
	want[0] = 1
	if len(t.Dims) != len(want) || t.DataType != b.Type {
		return fmt.Errorf("%w: input %q is %v %v, want one sample, %v %v", ErrInput, b.Name, t.DataType, t.Dims, b.Type, want)
	}
	for k, d := range t.Dims {
		if int(d) != want[k] {
			return fmt.Errorf("%w: input %q has shape %v, want one sample, %v", ErrInput, b.Name, t.Dims, want)
		}
	}
	return nil
}

// stack puts samples (each shaped as b with a leading 1) one after the
// other into a tensor of b's shape; samples missing at the end are zeros.
func stack(b Binding, samples []*onnx.Tensor) (*onnx.Tensor, error) {
	total := 1
	for _, d := range b.Shape {
		total *= d
	}
	per := total / b.Shape[0]
	if b.Type == onnx.String {
		ss := make([][]byte, total) // empty strings for missing samples
		for k, s := range samples {
			v, err := s.Strings()
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrInput, err)
			}
			copy(ss[k*per:(k+1)*per], v)
		}
		return onnx.NewString(b.Name, dims64(b.Shape), ss)
	}
	if b.Type.IsFloat() {
		f := make([]float32, total)
		for k, s := range samples {
			v, err := s.Float32s()
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrInput, err)
			}
			copy(f[k*per:(k+1)*per], v)
		}
		// Exact for the narrow types; a DOUBLE sample is rounded to fp32
		// here as staging would round it.
		return onnx.NewFloat(b.Name, b.Type, dims64(b.Shape), f, true)
	}
	iv := make([]int64, total)
	for k, s := range samples {
		v, err := s.Int64s()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInput, err)
		}
		copy(iv[k*per:(k+1)*per], v)
	}
	return onnx.NewInt(b.Name, b.Type, dims64(b.Shape), iv)
}

// sample returns sample k of t along its leading axis, if t has batch
// samples there, else t itself (an output that does not depend on them).
func sample(t *onnx.Tensor, k, batch int) (*onnx.Tensor, error) {
	if len(t.Dims) == 0 || int(t.Dims[0]) != batch {
		return t, nil
	}
	dims := slices.Clone(t.Dims)
	dims[0] = 1
	per := 1
	for _, d := range dims {
		per *= int(d)
	}
	if t.DataType.IsFloat() {
		// Every output value is an fp32 value converted to the output's
		// type, which converting again keeps.
		f, err := t.Float32s()
		if err != nil {
			return nil, err
		}
		return onnx.NewFloat(t.Name, t.DataType, dims, f[k*per:(k+1)*per], true)
	}
	iv, err := t.Int64s()
	if err != nil {
		return nil, err
	}
	return onnx.NewInt(t.Name, t.DataType, dims, iv[k*per:(k+1)*per])
}
