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
		if err := c.gemmNode(pn, "Conv", r, constFloat("", []int{total, ch, 1, 1}, w), -1, spec, shape, convLayout(shape), false); err != nil {
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
