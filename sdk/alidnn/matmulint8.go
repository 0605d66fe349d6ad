package alidnn

// A MatMul of two computed tensors in a post-training-quantised model —
// attention's Q·Kᵀ and softmax(Q·Kᵀ)·V — as an int8 GEMM: four times the
// fp32 array's rate. Both operands are quantised per tensor, symmetric, at
// their calibrated ranges: A by the GEMM that produces it requantising
// (settle) or by a quantisation step fused into its layer or a move; B at
// its range by a move before the array transposes it, or Bᵀ after the
// gathers that make it (they move 32-bit values through the accumulator).
// Bᵀ holds B's values and zeros, so B's range is its. The accumulator's
// scale is the product of the two, and like any post-training-quantised
// GEMM the output is left for its consumer to settle: a Softmax, a sum or
// a head merge dequantises it. Softmax's probabilities, in [0, 1], take
// their calibrated maximum / 127 as any tensor: a row's largest weights,
// which dominate its sum, keep seven bits.

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// matmulComputedInt8 compiles MatMul(a, b) of two computed tensors, whose
// stacks broadcast to lead, as an int8 GEMM. It reports false, having
// emitted nothing, where an operand has no calibrated range or A is int8
// already in a form the GEMM cannot read: matmulComputed then computes it
// in fp32.
func (c *compiler) matmulComputedInt8(n *onnx.Node, a, b *value, lead []int, M, K, N int) (bool, error) {
	ra, okA := c.calibrated(a)
	rb, okB := c.calibrated(b)
	if !okA || !okB {
		return false, nil
	}
	stacked := slices.Equal(a.shape[:len(a.shape)-2], lead)
	if r := a.root(); r.lay.shape != nil && r.el() == i8 && (!stacked || r.q.zp != 0) {
		return false, nil
	}
	// A's GEMM requantises to int8 itself, unless A's stacks are repeated
	// (a permute layer, which moves fp32) or A is B (transposed in fp32).
	if err := c.settle(a, stacked && a.root() != b.root()); err != nil {
		return false, err
	}
	if err := c.settle(b, false); err != nil {
		return false, err
	}
	a, err := c.deviceInput(a, matLayout(a.root().shape))
	if err != nil {
		return false, err
	}
	if !a.lay.equal(matLayout(a.shape)) || a.el() != f32 && a.el() != i8 {
		return false, fmt.Errorf("MatMul operand %s is %v laid out %+v on the device, want matrices: %w", a, a.el(), a.lay, ErrUnsupported)
	}
	bt, err := c.weightsOf(n, b, lead, rb)
	if err != nil {
		return false, err
	}
	if a.el() == f32 {
		if !stacked {
			a = c.restack(a, a.shape[:len(a.shape)-2], lead, M, append(slices.Clone(lead), M, K))
		}
		if a, err = c.quantizeOperand(a, ra); err != nil {
			return false, err
		}
	}
	l := c.computedGemm(n, a, bt, lead, M, K, N, false)
	l.accScale = fill(N, a.q.scale*bt.q.scale)
	l.ptq = true
	return true, nil
}

// calibrated returns the calibrated largest magnitude of v's values, if
// calibration measured a non-zero one under the name of the tensor that
// holds them. A transpose layer's output holds its input's values, which
// calibration measured: a MatMul reading Bᵀ drops the transpose (see
// weightsOf), so its output is never measured.
func (c *compiler) calibrated(v *value) (float32, bool) {
	r := v.root()
	if l := r.layer; l != nil && l.out == r && l.kind == lTranspose {
		r = l.in.root()
	}
	if r.name == "" {
		return 0, false
	}
	m, ok := c.opts.ranges[r.name]
	return m, ok && m > 0
}

// quantizeOperand brings the fp32 tensor x to int8 at the symmetric scale
// of the range r for an int8 GEMM: in x's own layer when nothing else
// reads x (a Softmax's quotient), else by a move layer.
func (c *compiler) quantizeOperand(x *value, r float32) (*value, error) {
	l, err := c.open(x)
	if err != nil {
		return nil, err
	}
	if !l.accFP {
		return nil, fmt.Errorf("quantising %s, which is not fp32: %w", x, ErrUnsupported)
	}
	return c.quantizeStep(l, fill(l.out.lay.c(), r/127), 0, onnx.Int8), nil
}
