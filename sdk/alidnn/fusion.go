package alidnn

// Fusion: an element-wise operator extends the epilogue of the layer that
// wrote its operand when nothing else reads it, or opens a move layer; its
// constants become per-lane rows or tensors laid out like the output.

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// open returns a layer whose accumulator holds x and whose steps may be
// extended: x's own layer when nothing else reads x, else a new move layer.
func (c *compiler) open(x *value) (*layer, error) {
	if x.isConst {
		return nil, fmt.Errorf("%s: element-wise operator on constants only was not folded: %w", x, ErrUnsupported)
	}
	if _, err := c.device(x); err != nil {
		return nil, err
	}
	if l := x.layer; l != nil && l.out == x && x.uses == 1 && !c.outputs[x.name] && l.takesSteps() {
		return l, nil
	}
	return c.moveLayer(x)
}

// moveLayer returns a new move layer whose accumulator holds x, read from
// device memory.
func (c *compiler) moveLayer(x *value) (*layer, error) {
	if err := c.settle(x, false); err != nil {
		return nil, err
	}
	r := x.root()
	if err := c.materialize(r); err != nil {
		return nil, err
	}
	lay := r.lay
	if x.alias != nil && !eqInts(x.shape, r.shape) {
		var ok bool
		if lay, ok = sameBlocks(x.shape, r.lay); !ok {
			return nil, fmt.Errorf("%s: element-wise operator after a reshape: %w", x, ErrUnsupported)
		}
	}
	l := &layer{kind: lMove, in: r, accFP: r.el() == f32}
	if r.el() == i8 {
		l.acc8 = true
	}
	out := &value{shape: x.shape, typ: r.typ, q: r.q, device: device{lay: lay, layer: l}}
	l.out = out
	c.layers = append(c.layers, l)
	return l, nil
}

// sameBlocks returns the layout of a view of shape (a Flatten, a Reshape)
// over a tensor laid out as l, when the view's own matrix or image layout
// has l's outer, block and row counts and stores every value where l
// does: a move layer then reads the tensor as the view, tile for tile.
func sameBlocks(shape []int, l layout) (layout, bool) {
	for _, v := range []layout{matLayout(shape), convLayout(shape)} {
		if sameStorage(v, l) {
			return v, true
		}
	}
	return layout{}, false
}

// sameStorage reports whether layouts a and b, of tensors with the same
// row-major values (one a view of the other), have the same outer, block
// and row counts and store every value at the same place.
func sameStorage(a, b layout) bool {
	return a.o() == b.o() && a.cb() == b.cb() && a.s() == b.s() && a.c() == b.c() && slices.Equal(a.offsets(), b.offsets())
}

// rename makes the open layer's output a new value (the fused operator's
// output) of logical type typ.
func (c *compiler) rename(l *layer, typ onnx.DataType) *value {
	old := l.out
	v := &value{shape: old.shape, typ: typ, q: old.q, device: device{lay: old.lay, layer: l}}
	l.out = v
	return v
}

// materialize gives a device value a layout, if it has none yet (graph
// inputs take the layout of their first consumer).
func (c *compiler) materialize(v *value) error {
	if v.host != nil {
		return nil
	}
	r := v.root()
	if r.lay.shape == nil {
		r.lay = convLayout(r.shape)
	}
	return nil
}

// perLane reports whether a constant of shape cs, broadcast against the
// tensor laid out as l, varies only along l's lane axis (or not at all), and
// returns its values per lane.
func perLane(l layout, cs []int, vals []float32) ([]float32, bool) {
	r := len(l.shape)
	if len(cs) > r {
		return nil, false
	}
	c := l.c()
	out := make([]float32, c)
	for k := len(cs) - 1; k >= 0; k-- {
		a := r - len(cs) + k
		if cs[k] != 1 && a != l.lane {
			return nil, false
		}
	}
	n := 1
	for _, d := range cs {
		n *= d
	}
	if n == 1 {
		for k := range out {
			out[k] = vals[0]
		}
		return out, true
	}
	if l.lane < 0 {
		return nil, false
	}
	for k := range out {
		out[k] = vals[k]
	}
	return out, true
}

// expand lays a constant out at the full shape of l (for element-wise
// operators whose constant operand varies along rows).
func expand(l layout, cv *value) (*value, error) {
	if _, err := broadcastShape(l.shape, cv.shape); err != nil {
		return nil, err
	}
	idx := broadcastIndex(l.shape, cv.shape)
	f := cv.floats()
	full := make([]float32, len(idx))
	for k, i := range idx {
		full[k] = f[i]
	}
	v := constFloat(cv.name, l.shape, full)
	v.lay = l
	v.elem = f32
	return v, nil
}
