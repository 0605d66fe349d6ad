package alidnn

import (
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// An operand broadcast along only some of a tile's rows — a mean over an
// image's last axis [N,C,H,1] against [N,C,H,W] — has no accumulator row
// per tile the ALU could reuse (see broadcastLayout). It is expanded
// first: its rows repeated to the full shape by Concats of copies (see
// expandRepeat), then combined lane for lane.

// repeatsRows reports whether b, of a's rank, broadcasts to a, which is
// stored as it is, only along axes other than a's lanes, in a way
// broadcastLayout cannot read.
func (c *compiler) repeatsRows(a, b *value) bool {
	r := a.root()
	if r.lay.shape == nil || !eqInts(a.shape, r.shape) || len(b.shape) != len(a.shape) || b.isConst {
		return false
	}
	if l := r.lay.lane; l >= 0 && b.shape[l] != a.shape[l] {
		return false
	}
	_, err := broadcastLayout(r.lay, b)
	return err != nil
}

// repeatOperand returns b expanded to shape for node n.
func (c *compiler) repeatOperand(n *onnx.Node, b *value, shape []int) (*value, error) {
	e := &onnx.Node{Name: n.Name, OpType: "Expand", Outputs: []string{n.Outputs[0] + "/repeat"}}
	c.uses[e.Outputs[0]] = 1
	if err := c.expandRepeat(e, b, slices.Clone(shape)); err != nil {
		return nil, err
	}
	return c.vals[e.Outputs[0]], nil
}
