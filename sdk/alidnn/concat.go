package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// concatShifted compiles a channel Concat whose inputs do not all start at
// a 16-channel block boundary of the output (ShuffleNet concatenates 24
// and 216 channels, DenseNet-style growth can too). Lanes move only
// through the GEMM array, so each input is embedded in the output's
// channels by a 1×1 convolution with a shifted identity, each output block
// reading only the input blocks it overlaps, and every embedding after the
// first adds the one before in its epilogue. fp32 only: the sums are exact
// (x + 0 = x).
func (c *compiler) concatShifted(n *onnx.Node, ins []*value, shape []int) error {
	total := shape[1]
	rows := 1
	for _, d := range shape[2:] {
		rows *= d
	}
	var prev *value
	off := 0
	for k, x := range ins {
		r := x.root()
		if r.el() != f32 {
			return fmt.Errorf("Concat input %s has %d channels, not a multiple of %d, and is %v on the device (only fp32 is realigned): %w",
				x, x.shape[1], lanes, r.el(), ErrUnsupported)
		}
		ch := x.shape[1]
		w := make([]float32, total*ch)
		for i := range ch {
			w[(off+i)*ch+i] = 1
		}
		spec := &convSpec{kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, ih: rows, iw: 1, oh: rows, ow: 1, ic: ch, oc: total}
		pn := &onnx.Node{OpType: "Conv", Name: fmt.Sprintf("%s/embed%d", n.Name, k), Outputs: []string{fmt.Sprintf("%s/embed%d", n.Outputs[0], k)}}
		if k == len(ins)-1 {
			pn.Outputs[0] = n.Outputs[0]
		} else {
			c.uses[pn.Outputs[0]] = 1
		}
		if err := c.gemmNode(gemmParams{n: pn, op: "Conv", x: r, w: constFloat("", []int{total, ch, 1, 1}, w), bias: -1, spec: spec, outShape: shape, outLay: convLayout(shape)}); err != nil {
			return err
		}
		y := c.vals[pn.Outputs[0]]
		l := y.layer
		l.macs = 0
		if prev != nil {
			l.steps = append(l.steps, step{kind: sAddTensor, fp: true, t: prev})
			y = c.rename(l, y.typ)
			c.set(pn, 0, y)
		}
		prev = y
		off += ch
	}
	return nil
}

// concat compiles a Concat of computed tensors along their lane axis: each
// input is moved into its channel blocks of the output, realigned by
// concatShifted when an input does not start at a block boundary. Other
// axes go to concatMoves. A constant input is moved in from the constant
// segment, where it is laid out whole.
func (c *compiler) concat(n *onnx.Node) error {
	axis, err := n.Int("axis", 0)
	if err != nil {
		return err
	}
	var ins []*value
	for k := range n.Inputs {
		x, err := c.need(n, k)
		if err != nil {
			return err
		}
		ins = append(ins, x)
	}
	// Tensors a MatMul wrote ([..., tokens, hidden]) keep their last axis
	// on the lanes: the output follows them when any computed input is so
	// laid out (a ViT's class token concatenated before its patches).
	layOf := concatLayout(ins)
	for k, x := range ins {
		if x.isConst {
			if !x.isFloat() {
				return fmt.Errorf("Concat of the %v constant %s and computed tensors: %w", x.typ, x, ErrUnsupported)
			}
			ins[k] = deviceConstAs(x, layOf(x.shape))
		}
	}
	shape := append([]int(nil), ins[0].shape...)
	a, err := normAxis(int(axis), len(shape))
	if err != nil {
		return err
	}
	shape[a] = 0
	for _, x := range ins {
		if len(x.shape) != len(shape) {
			return fmt.Errorf("Concat of ranks %d and %d", len(shape), len(x.shape))
		}
		shape[a] += x.shape[a]
	}
	lay := layOf(shape)
	if a != lay.lane {
		if lay.lane < 0 {
			return fmt.Errorf("Concat of scalars: %w", ErrUnsupported)
		}
		return c.concatMoves(n, ins, lay, a, layOf)
	}
	out := &value{shape: shape, typ: ins[0].typ, device: device{lay: lay}}
	off := 0
	for k, x := range ins {
		if err := c.settle(x, false); err != nil {
			return err
		}
		r := x.root()
		if r.lay.shape == nil {
			r.lay = layOf(r.shape)
		}
		if !eqInts(x.shape, r.shape) || !r.lay.equal(layOf(r.shape)) {
			return fmt.Errorf("Concat input %s after a reshape: %w", x, ErrUnsupported)
		}
		if k < len(ins)-1 && x.shape[a]%lanes != 0 {
			if !lay.equal(convLayout(shape)) {
				return fmt.Errorf("Concat along the lanes of %s, whose %d values are not a multiple of %d, in a matrix layout: %w", x, x.shape[a], lanes, ErrUnsupported)
			}
			return c.concatShifted(n, ins, shape)
		}
		el := r.el()
		if k == 0 {
			out.elem, out.q = el, r.q
		} else if el != out.elem || r.q != out.q {
			return fmt.Errorf("Concat of %v and %v tensors (or different quantisation): %w", out.elem, el, ErrUnsupported)
		}
		l := &layer{kind: lMove, in: r, out: out, outBlock: off / lanes, accFP: el == f32, acc8: el == i8}
		c.layers = append(c.layers, l)
		off += x.shape[a]
	}
	c.set(n, 0, out)
	return nil
}

// deviceConst is the float constant x as a tensor in the constant segment,
// in fp32, which a layer reads as its input.
func deviceConst(x *value) *value { return deviceConstAs(x, convLayout(x.shape)) }

// deviceConstAs is deviceConst laid out as lay.
func deviceConstAs(x *value, lay layout) *value {
	v := constFloat(x.name, x.shape, x.floats())
	v.lay, v.elem = lay, f32
	return v
}

// concatLayout returns the layout of a Concat's output and inputs: the
// matrix layout (last axis on the lanes) when a computed input of rank 3
// or more is laid out so, else the NCHW-like one.
func concatLayout(ins []*value) func([]int) layout {
	for _, x := range ins {
		if x.isConst || len(x.shape) < 3 {
			continue
		}
		r := x.root()
		if eqInts(x.shape, r.shape) && r.lay.shape != nil && r.lay.equal(matLayout(r.shape)) && !r.lay.equal(convLayout(r.shape)) {
			return matLayout
		}
	}
	return convLayout
}
