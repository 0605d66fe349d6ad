package alidnn

// BatchNormalization: folded into the fp32 or int8 convolution it follows
// when nothing else reads that convolution, else a per-channel scale and
// shift in the epilogue.

import (
	"fmt"
	"math"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

func (c *compiler) batchNorm(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	var p [4][]float32
	for k, what := range []string{"scale", "B", "mean", "var"} {
		v, err := c.needConst(n, k+1, what)
		if err != nil {
			return err
		}
		p[k] = v.floats()
	}
	eps, err := n.Float("epsilon", 1e-5)
	if err != nil {
		return err
	}
	if len(x.shape) < 2 {
		return fmt.Errorf("input rank %d: %w", len(x.shape), ErrUnsupported)
	}
	ch := x.shape[1]
	for k := range p {
		if len(p[k]) != ch {
			return fmt.Errorf("parameter %d has %d values for %d channels", k+1, len(p[k]), ch)
		}
	}
	a := make([]float32, ch)
	b := make([]float32, ch)
	for i := range ch {
		a[i] = p[0][i] / float32(math.Sqrt(float64(p[3][i])+float64(eps)))
		b[i] = p[1][i] - p[2][i]*a[i]
	}
	// Fold into the preceding convolution when it is ours alone and its
	// weights are constants (not a MatMul's computed B).
	if l := x.layer; l != nil && l.out == x && x.uses == 1 && !c.outputs[x.name] && l.kind == lGemm && !l.conv.batched && l.conv.wT == nil && x.lay.lane == 1 && onlyAddRows(l) {
		folded, err := c.foldBN(l, a, b)
		if err != nil {
			return err
		}
		if folded {
			c.set(n, 0, c.rename(l, x.typ))
			return nil
		}
	}
	// The scale and shift run in fp32: a post-training-quantised GEMM
	// dequantises.
	if err := c.settle(x, false); err != nil {
		return err
	}
	l, err := c.open(x)
	if err != nil {
		return err
	}
	if l.out.lay.lane != 1 || !l.accFP {
		return fmt.Errorf("batch normalization of %s: %w", x, ErrUnsupported)
	}
	l.steps = append(l.steps, step{kind: sMulRow, fp: true, rowF: a}, step{kind: sAddRow, fp: true, rowF: b})
	c.set(n, 0, c.rename(l, x.typ))
	return nil
}

func onlyAddRows(l *layer) bool {
	for _, s := range l.steps {
		if s.kind != sAddRow {
			return false
		}
	}
	return true
}

// foldBN folds y = a·x + b, per channel, into the GEMM layer l computing x
// (whose steps only add rows), if its weights allow.
func (c *compiler) foldBN(l *layer, a, b []float32) (bool, error) {
	cv := l.conv
	switch {
	case cv.fp:
		per := len(cv.wF) / cv.oc
		for o := range cv.oc {
			for k := range per {
				cv.wF[o*per+k] *= a[o]
			}
		}
		for k := range l.steps {
			l.steps[k].rowF = mapIdx(l.steps[k].rowF, func(o int, v float32) float32 { return v * a[o] })
		}
		l.steps = append(l.steps, step{kind: sAddRow, fp: true, rowF: b})
		return true, nil
	case l.ptq && !slices.Contains(a, 0):
		// A post-training-quantised accumulator: |a| joins the channel's
		// scale and a's sign its integer weights and bias, so the weights
		// keep the quantisation they were given.
		per := len(cv.wI) / cv.oc
		for o := range cv.oc {
			if a[o] < 0 {
				for k := range per {
					cv.wI[o*per+k] = -cv.wI[o*per+k]
				}
				for k := range l.steps {
					l.steps[k].rowI[o] = -l.steps[k].rowI[o]
				}
			}
			l.accScale[o] *= float32(math.Abs(float64(a[o])))
		}
		return true, c.rowStep(l, sAddRow, b)
	}
	return false, nil
}
