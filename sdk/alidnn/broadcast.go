package alidnn

// Element-wise operators of two computed tensors, one broadcast over the
// other's rows and outer axes: a squeeze-and-excitation gate [N,C,1,1]
// scaling its block's [N,C,H,W]. A tile then needs one accumulator row of
// the operand per image, which the ALU reads with a source factor of 0
// across the tile's rows. Lanes never broadcast: the ALU combines lane l
// with lane l only.

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// broadcastOperand compiles a op b for computed tensors a and b, b
// broadcast to a's shape. b is usually computed from a (the gate from its
// block's input), after a's layer: the operator then runs in a move layer
// of its own, after both (see openAfter).
func (c *compiler) broadcastOperand(n *onnx.Node, op string, a, b *value) error {
	l, err := c.openAfter(a, b)
	if err != nil {
		return err
	}
	if !l.accFP {
		return fmt.Errorf("%s of integer tensors: %w", op, ErrUnsupported)
	}
	tl, err := broadcastLayout(l.out.lay, b)
	if err != nil {
		return fmt.Errorf("%s broadcasts the computed tensor %s to %v: %w", op, b, a.shape, err)
	}
	r := b.root()
	if r.el() != f32 {
		return fmt.Errorf("%s: operand %s is %v on the device, want fp32: %w", op, b, r.el(), ErrUnsupported)
	}
	l.steps = append(l.steps, step{kind: rowKinds[op][1], fp: true, t: r, tlay: &tl})
	c.set(n, 0, c.rename(l, a.typ))
	return nil
}

// openAfter opens a layer holding a that may read b: a's own when b is
// written before it, else a move of a after b's layer.
func (c *compiler) openAfter(a, b *value) (*layer, error) {
	if c.writtenAt(b) > c.writtenAt(a) {
		return c.moveLayer(a)
	}
	return c.open(a)
}

// broadcastLayout is the layout by which an operand b broadcast to a
// tensor laid out as full is read: full's axes at b's sizes, which b's
// storage must hold. b's lane axis must be full's whole, its rows all
// full's or all 1, its outer axes full's or 1.
func broadcastLayout(full layout, b *value) (layout, error) {
	if len(b.shape) != len(full.shape) {
		return layout{}, fmt.Errorf("of rank %d against %d (unsqueeze it): %w", len(b.shape), len(full.shape), ErrUnsupported)
	}
	tl := layout{shape: b.shape, outer: full.outer, lane: full.lane, rows: full.rows}
	if full.lane >= 0 && b.shape[full.lane] != full.shape[full.lane] {
		return layout{}, fmt.Errorf("along axis %d, which the engine holds on its lanes: %w", full.lane, ErrUnsupported)
	}
	if tl.s() != 1 {
		for _, a := range full.rows {
			if b.shape[a] != full.shape[a] {
				return layout{}, fmt.Errorf("along some of the axes %v of a tile's rows but not all: %w", full.rows, ErrUnsupported)
			}
		}
	}
	r := b.root()
	if r.lay.shape == nil || !eqInts(r.lay.offsets(), tl.offsets()) {
		return layout{}, fmt.Errorf("stored in another layout: %w", ErrUnsupported)
	}
	return tl, nil
}

// outerIndex maps outer index o of full to l's, whose outer axes are
// full's, of size 1 where they broadcast.
func (l layout) outerIndex(full layout, o int) int {
	idx, m := 0, 1
	for k := len(full.outer) - 1; k >= 0; k-- {
		a := full.outer[k]
		v := o % full.shape[a]
		o /= full.shape[a]
		if l.shape[a] != 1 {
			idx += v * m
		}
		m *= l.shape[a]
	}
	return idx
}
