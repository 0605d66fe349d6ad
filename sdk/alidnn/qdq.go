package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Pre-quantised models in the QDQ format (onnxruntime's quantiser) keep
// float operators between QuantizeLinear → DequantizeLinear pairs: a Conv,
// MatMul or Gemm reads DequantizeLinear of an int8 activation and
// DequantizeLinear of int8 weights. Such an operator runs as an int8 GEMM
// on the int8 tensors, its accumulator dequantised in the epilogue,
// instead of dequantising its input to fp32 first. So a DequantizeLinear
// of a device tensor is deferred until something other than such an
// operator reads it.

// deferDQ defers DequantizeLinear of an int8 device tensor with a
// per-tensor constant scale and zero point. It reports whether it did.
func (c *compiler) deferDQ(n *onnx.Node) (bool, error) {
	x, err := c.need(n, 0)
	if err != nil || x.isConst || x.host != nil || x.view != nil || x.cols != nil || x.deferred || x.root().el() != i8 {
		return false, err
	}
	if s, err := c.in(n, 1); err != nil || s == nil || !s.isConst || s.len() != 1 {
		return false, err
	}
	if z, err := c.in(n, 2); err != nil || z != nil && (!z.isConst || z.len() != 1) {
		return false, err
	}
	c.set(n, 0, &value{shape: x.shape, typ: onnx.Float, dequantised: dequantised{dq: n, deferred: true}})
	return true, nil
}

// undefer compiles the deferred DequantizeLinear computing v, for a reader
// that needs it in fp32. When others read the int8 tensor too it gets a
// layer of its own, leaving the int8 tensor as it is.
func (c *compiler) undefer(v *value) (*value, error) {
	n := v.dq
	if c.uses[n.Outputs[0]] > 1 {
		c.vals[n.Inputs[0]].root().uses++
	}
	if err := c.run(n); err != nil {
		return nil, fmt.Errorf("%s (%q): %w", n.OpType, n.Name, err)
	}
	return c.vals[n.Outputs[0]], nil
}

// qdqConv compiles a Conv of a deferred DequantizeLinear by the constant
// DequantizeLinear of int8 weights (per tensor, or per output channel) as
// an int8 ConvInteger whose accumulator the epilogue dequantises at input
// scale × weight scale, then adds the bias in fp32. It reports false,
// having compiled the input's DequantizeLinear, for other Convs.
func (c *compiler) qdqConv(n *onnx.Node) (bool, error) {
	xv := c.vals[n.Inputs[0]]
	if xv == nil || !xv.deferred {
		return false, nil
	}
	xdq := xv.dq
	wv, err := c.need(n, 1)
	if err != nil {
		return false, err
	}
	sw, ok := c.dqScales(wv, 0)
	if !ok || len(wv.shape) < 3 {
		_, err := c.undefer(xv)
		return false, err
	}
	src := c.vals[xdq.Inputs[0]]
	sx := c.vals[xdq.Inputs[1]].floats()[0]
	wdq := wv.dq
	m := &onnx.Node{OpType: "ConvInteger", Name: n.Name, Domain: n.Domain, Attrs: n.Attrs,
		Inputs:  []string{xdq.Inputs[0], wdq.Inputs[0], inputName(xdq, 2), inputName(wdq, 2)},
		Outputs: []string{n.Outputs[0] + "/int"}}
	c.uses[m.Outputs[0]] = 1
	// The int8 tensor is read as it is: a later fp32 reader must not
	// extend its layer.
	src.root().uses++
	if err := c.convNode(m); err != nil {
		return true, err
	}
	l := c.vals[m.Outputs[0]].layer
	acc := make([]float32, len(sw))
	for o, s := range sw {
		acc[o] = sx * s
	}
	l.steps = append(l.steps, step{kind: sDequantize, rowF: acc})
	l.accFP, l.acc8 = true, false
	out := c.rename(l, onnx.Float)
	if bv, err := c.in(n, 2); err != nil {
		return true, err
	} else if bv != nil {
		if !bv.isConst || bv.len() != len(sw) {
			return true, fmt.Errorf("bias must be a constant of %d values: %w", len(sw), ErrUnsupported)
		}
		if err := c.rowStep(l, sAddRow, bv.floats()); err != nil {
			return true, err
		}
		out = c.rename(l, onnx.Float)
	}
	c.set(n, 0, out)
	return true, nil
}

// dqScales returns the scales of constant weights folded from
// DequantizeLinear of an int8 constant, one per index of axis (per tensor,
// or per axis along axis), and whether they are such.
func (c *compiler) dqScales(wv *value, axis int) ([]float32, bool) {
	if !wv.isConst || wv.dq == nil || axis >= len(wv.shape) {
		return nil, false
	}
	n := wv.dq
	q, s := c.vals[n.Inputs[0]], c.vals[n.Inputs[1]]
	if q == nil || s == nil || q.typ != onnx.Int8 && q.typ != onnx.Uint8 {
		return nil, false
	}
	size := wv.shape[axis]
	scales := s.floats()
	switch len(scales) {
	case 1:
		return fill(size, scales[0]), true
	case size:
		a, err := n.Int("axis", 1)
		if err != nil {
			return nil, false
		}
		if k, err := normAxis(int(a), len(wv.shape)); err != nil || k != axis {
			return nil, false
		}
		return scales, true
	}
	return nil, false
}

// qdqMatMul compiles a MatMul or Gemm of a deferred DequantizeLinear by
// the constant DequantizeLinear of int8 weights (per tensor, or per output
// column) as an int8 MatMulInteger dequantised in its epilogue at alpha ×
// input scale × weight scale, then adds Gemm's C (scaled by beta) in fp32.
// It reports false, having compiled the input's DequantizeLinear, for
// others.
func (c *compiler) qdqMatMul(n *onnx.Node) (bool, error) {
	xv := c.vals[n.Inputs[0]]
	if xv == nil || !xv.deferred {
		return false, nil
	}
	bv, err := c.need(n, 1)
	if err != nil {
		return false, err
	}
	var transA, transB int64
	alpha, beta := float32(1), float32(1)
	if n.OpType == "Gemm" {
		if transA, err = n.Int("transA", 0); err != nil {
			return false, err
		}
		if transB, err = n.Int("transB", 0); err != nil {
			return false, err
		}
		if alpha, err = n.Float("alpha", 1); err != nil {
			return false, err
		}
		if beta, err = n.Float("beta", 1); err != nil {
			return false, err
		}
	}
	col := 1 // the axis of B that indexes output columns
	if transB != 0 {
		col = 0
	}
	sw, ok := c.dqScales(bv, col)
	var bias []float32
	if cv, err := c.in(n, 2); err != nil {
		return false, err
	} else if ok && cv != nil && n.OpType == "Gemm" {
		switch {
		case !cv.isConst:
			ok = false
		case cv.len() == 1:
			bias = fill(len(sw), beta*cv.floats()[0])
		case cv.len() == len(sw) && cv.shape[len(cv.shape)-1] == len(sw):
			bias = mapF(cv.floats(), func(v float32) float32 { return beta * v })
		default:
			ok = false
		}
	}
	if !ok || transA != 0 || len(bv.shape) != 2 {
		_, err := c.undefer(xv)
		return false, err
	}
	xdq, wdq := xv.dq, bv.dq
	wname := wdq.Inputs[0]
	if transB != 0 {
		// MatMulInteger takes B as [K, N].
		q := c.vals[wname]
		N, K := q.shape[0], q.shape[1]
		t := make([]int64, N*K)
		for j, v := range q.ints() {
			t[j%K*N+j/K] = v
		}
		wname = n.Outputs[0] + "/wq"
		c.vals[wname] = constInt(wname, q.typ, []int{K, N}, t)
	}
	m := &onnx.Node{OpType: "MatMulInteger", Name: n.Name, Domain: n.Domain,
		Inputs:  []string{xdq.Inputs[0], wname, inputName(xdq, 2), inputName(wdq, 2)},
		Outputs: []string{n.Outputs[0] + "/int"}}
	c.uses[m.Outputs[0]] = 1
	c.vals[xdq.Inputs[0]].root().uses++
	if err := c.matmulNode(m); err != nil {
		return true, err
	}
	y := c.vals[m.Outputs[0]]
	r := y.root()
	l := r.layer
	if l == nil || l.out != r {
		return true, fmt.Errorf("MatMulInteger of %s did not compile to a layer of its own: %w", y, ErrUnsupported)
	}
	sx := c.vals[xdq.Inputs[1]].floats()[0]
	acc := make([]float32, len(sw))
	for o, s := range sw {
		acc[o] = alpha * sx * s
	}
	l.steps = append(l.steps, step{kind: sDequantize, rowF: acc})
	l.accFP, l.acc8 = true, false
	out := c.rename(l, onnx.Float)
	if bias != nil {
		if err := c.rowStep(l, sAddRow, bias); err != nil {
			return true, err
		}
		out = c.rename(l, onnx.Float)
	}
	if y != r {
		out = &value{shape: y.shape, typ: onnx.Float, derived: derived{alias: out}}
	}
	c.set(n, 0, out)
	return true, nil
}

// inputName is the name of n's input k, "" when omitted.
func inputName(n *onnx.Node, k int) string {
	if k < len(n.Inputs) {
		return n.Inputs[k]
	}
	return ""
}
