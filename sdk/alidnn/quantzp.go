package alidnn

// QuantizeLinear with a zero point per channel. The engine's quantisation
// rounds x/s half to even, adds one zero point for all lanes and
// saturates to int8 in one step, so a zero point per lane added after it
// would miss the values that saturation clipped. Instead v = round(x/s)
// is rebuilt in fp32 from two quantisations of x that saturate at either
// end, clamp(v, 0, 255) = sat8(v − 128) + 128 and clamp(v, −255, 0) =
// sat8(v + 127) − 127, whose sum is clamp(v, −255, 255): every lane's
// window [−128 − z, 127 − z] of a device zero point z in [−128, 127] lies
// within it. Adding z (integers, exact in fp32) and quantising at scale 1
// gives sat8(v + z), QuantizeLinear's value, exactly. Two layers read x:
// one writes clamp(v, 0, 255) in fp32, the other computes clamp(v, −255,
// 0), adds it and z and quantises.

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// quantizePerChannelZP quantises the fp32 tensor x at the per-lane scales s
// and zero points z (of type typ) to a tensor of that type.
func (c *compiler) quantizePerChannelZP(x *value, s []float32, z []int64, typ onnx.DataType) (*value, error) {
	// Both layers read x's storage, which no fused step may take over.
	x.root().uses++
	la, err := c.moveLayer(x)
	if err != nil {
		return nil, err
	}
	if !la.accFP {
		return nil, fmt.Errorf("QuantizeLinear of a non-float tensor %s: %w", x, ErrUnsupported)
	}
	ones := fill(len(s), 1)
	la.steps = append(la.steps, step{kind: sQuantize, fp: true, rowF: s, zp: -128}, step{kind: sDequantize, rowF: ones, zp: -128})
	a := c.rename(la, onnx.Float)
	a.uses = 1
	lb, err := c.moveLayer(x)
	if err != nil {
		return nil, err
	}
	zd := make([]float32, len(z))
	for k, v := range z {
		zd[k] = float32(devZP(v, typ))
	}
	lb.steps = append(lb.steps, step{kind: sQuantize, fp: true, rowF: s, zp: 127}, step{kind: sDequantize, rowF: ones, zp: 127},
		step{kind: sAddTensor, fp: true, t: a}, step{kind: sAddRow, fp: true, rowF: zd})
	v := c.quantizeStep(lb, ones, 0, typ)
	// No one scale and zero point describe it: its readers (DequantizeLinear,
	// the QLinear operators) take theirs from the graph.
	v.q = quant{}
	return v, nil
}
