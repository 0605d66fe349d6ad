package alidnn

// LRN, cross-channel local response normalisation, in fp32:
//
//	y = x / (bias + α/size · Σ x²)^β
//
// with the sum over a window of size channels around each channel. The
// engine has neither division nor power, and its lanes never talk to each
// other outside the GEMM array, so LRN is three passes: a move layer squares
// x; a 1×1 fp32 GEMM against a constant band matrix (α/size on the band)
// sums each window across channel blocks; and that layer's epilogue forms
// x · e^(−β·ln(bias + sum)), reading x again as a tensor operand.
//
// In int8 (Quantize) LRN stays in fp32: a quantised producer is dequantised
// first, and a quantised consumer quantises its output, as for any fp32
// tensor.

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// lrnParams are LRN's attributes.
type lrnParams struct {
	size              int
	alpha, beta, bias float32
}

func lrnAttrs(n *onnx.Node) (lrnParams, error) {
	var p lrnParams
	size, err := n.Int("size", 0)
	if err != nil {
		return p, err
	}
	if size < 1 {
		return p, fmt.Errorf("attribute size = %d: must be a positive number of channels", size)
	}
	p.size = int(size)
	if p.alpha, err = n.Float("alpha", 1e-4); err != nil {
		return p, err
	}
	if p.beta, err = n.Float("beta", 0.75); err != nil {
		return p, err
	}
	if p.bias, err = n.Float("bias", 1); err != nil {
		return p, err
	}
	return p, nil
}

// window returns the channels [lo, hi] that channel ch's sum covers, clipped
// to c channels: onnx centres the window with floor((size−1)/2) channels
// before and ceil((size−1)/2) after.
func (p lrnParams) window(ch, c int) (lo, hi int) {
	return max(0, ch-(p.size-1)/2), min(c-1, ch+p.size/2)
}

func (c *compiler) lrnNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	p, err := lrnAttrs(n)
	if err != nil {
		return err
	}
	if x.isConst {
		return fmt.Errorf("LRN of the constant %s: %w", x, ErrUnsupported)
	}
	if len(x.shape) < 3 {
		return fmt.Errorf("LRN of a rank-%d tensor (want N×C×D1…): %w", len(x.shape), ErrUnsupported)
	}
	if _, err := c.device(x); err != nil {
		return err
	}
	if err := c.settle(x, false); err != nil {
		return err
	}
	r := x.root()
	if !eqInts(x.shape, r.shape) {
		return fmt.Errorf("LRN of %s after a reshape: %w", x, ErrUnsupported)
	}
	if err := c.materialize(r); err != nil {
		return err
	}
	lay := r.lay
	if lay.lane != 1 {
		return fmt.Errorf("LRN of %s, whose channels are not on the device's lanes: %w", x, ErrUnsupported)
	}
	if r.el() != f32 {
		return fmt.Errorf("LRN of the %v tensor %s (dequantize it first): %w", r.el(), x, ErrUnsupported)
	}

	sqLayer := &layer{kind: lMove, in: r, accFP: true, steps: []step{{kind: sMulTensor, fp: true, t: r}}}
	sq := &value{name: n.Outputs[0] + "/square", shape: r.shape, typ: onnx.Float, uses: 1, device: device{lay: lay, layer: sqLayer}}
	sqLayer.out = sq

	C, S := lay.c(), lay.s()
	band := make([]float32, C*C) // [out channel][in channel]
	for o := range C {
		lo, hi := p.window(o, C)
		for i := lo; i <= hi; i++ {
			band[o*C+i] = p.alpha / float32(p.size)
		}
	}
	// Lanes past the last channel hold zeros; bias 1 there keeps them
	// 0 · e^0 = 0 rather than 0 · e^(−β·ln 0) = NaN when bias is 0.
	bias := fill(lay.cb()*lanes, 1)
	for k := range C {
		bias[k] = p.bias
	}
	l := &layer{kind: lGemm, in: sq, accFP: true, conv: &convSpec{kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1,
		ih: S, iw: 1, oh: S, ow: 1, ic: C, oc: C, fp: true, wF: band}}
	l.steps = []step{
		{kind: sAddRow, fp: true, rowF: bias},
		{kind: sLog, fp: true},
		{kind: sMulRow, fp: true, rowF: fill(C, -p.beta)},
		{kind: sExp, fp: true},
		{kind: sMulTensor, fp: true, t: r},
	}
	l.out = &value{shape: r.shape, typ: onnx.Float, device: device{lay: lay, layer: l}}
	c.layers = append(c.layers, sqLayer, l)
	c.set(n, 0, l.out)
	return nil
}
