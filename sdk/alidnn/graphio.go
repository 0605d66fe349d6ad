package alidnn

// The graph's inputs and outputs: the values the runtime packs, and the
// ones the host reads back.

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// graphInput makes the value of a graph input: a constant bound with
// WithConstants, or a device tensor the runtime packs, of static shape
// (see inputShape).
func (c *compiler) graphInput(in onnx.ValueInfo) error {
	if t, ok := c.opts.consts[in.Name]; ok {
		v, err := fromTensor(t)
		if err != nil {
			return fmt.Errorf("input %q: %w", in.Name, err)
		}
		v.name = in.Name
		c.vals[in.Name] = v
		return nil
	}
	shape, err := c.inputShape(in)
	if err != nil {
		return err
	}
	if size(shape) == 0 {
		return c.emptyInput(in, shape)
	}
	v := &value{name: in.Name, shape: shape, typ: in.ElemType, device: device{input: true}}
	switch in.ElemType {
	case onnx.Float:
		v.elem = f32
	case onnx.Uint8, onnx.Int8:
		v.elem = i8
		if c.arithIntInput(in.Name) {
			v.elem = f32 // exact integers for arithmetic (see intarith.go)
		}
	case onnx.Int32:
		v.elem = i32
	case onnx.Uint32:
		if err := c.uint32Input(in.Name); err != nil {
			return err
		}
		v.elem = i32 // its bit pattern (see intpath.go)
	case onnx.Int64, onnx.Bool:
		v.elem = f32 // packed as fp32 (see embed.go)
	case onnx.Uint64:
		return c.wideInput(in.Name, shape) // as two words (see wide.go)
	case onnx.Int16, onnx.Uint16:
		v.elem = f32 // staged as exact fp32 values (see boundary.go)
		if c.int32Input(in.Name, in.ElemType) {
			v.elem = i32 // for int32 products (see intpath.go)
		}
	case onnx.Int4, onnx.Uint4, onnx.Int2, onnx.Uint2,
		onnx.Float16, onnx.Bfloat16, onnx.Float8E4M3FN, onnx.Float8E4M3FNUZ, onnx.Float8E5M2, onnx.Float8E5M2FNUZ, onnx.Float4E2M1, onnx.Float8E8M0:
		v.elem = f32 // staged as exact fp32 values (see boundary.go)
	case onnx.String:
		v.elem = f32 // its strings' ids (see intern.go)
	case onnx.Double:
		host, err := c.doubleInput(in.Name)
		if err != nil {
			return err
		}
		v.elem = f32 // staged rounded to fp32: the Cast to FLOAT reading it
		v.hostOnly = host
	default:
		return fmt.Errorf("input %q: element type %v: %w", in.Name, in.ElemType, ErrUnsupported)
	}
	c.vals[in.Name] = v
	c.inputs = append(c.inputs, v)
	return nil
}

// graphOutput readies the graph output name for the host: computed, laid
// out, settled, and fp32 if its type is.
func (c *compiler) graphOutput(name string) error {
	v, ok := c.vals[name]
	if !ok {
		return fmt.Errorf("graph output %q is never computed", name)
	}
	if v.deferred {
		var err error
		if v, err = c.undefer(v); err != nil {
			return fmt.Errorf("graph output %q: %w", name, err)
		}
	}
	if v.typ == onnx.String {
		return fmt.Errorf("graph output %q is STRING: the engine holds strings only as ids for Equal (see intern.go): %w", name, ErrUnsupported)
	}
	if v.isConst {
		return nil
	}
	if v.words != nil {
		return c.wideOutput(v)
	}
	if v.cols != nil {
		return fmt.Errorf("graph output %q flattens a transposed tensor: %w", name, ErrUnsupported)
	}
	if v.host != nil && v.host.op == padOp {
		return fmt.Errorf("graph output %q is a %s: %w", name, padOp, ErrUnsupported)
	}
	if err := c.settle(v, false); err != nil {
		return err
	}
	if v.host != nil {
		if err := c.settle(v.host.src, false); err != nil {
			return err
		}
		if v.host.quant != nil && v.host.src.root().el() != f32 {
			return fmt.Errorf("graph output %q quantises %s, which the engine holds as %v, not fp32: %w", name, v.host.src, v.host.src.root().el(), ErrUnsupported)
		}
	}
	if err := c.materialize(v); err != nil {
		return fmt.Errorf("graph output %q: %w", name, err)
	}
	if (v.isFloat() || v.root().isFloat()) && v.host == nil && v.root().el() == i8 {
		f, err := c.floatOutput(v)
		if err != nil {
			return fmt.Errorf("graph output %q: %w", name, err)
		}
		c.vals[name] = f
	}
	return nil
}

// floatOutput dequantises a float graph output an int8 layer writes (a
// pool after a quantised Conv, or a feature map a post-training-quantised
// consumer settled as int8 before the output was reached): the host reads
// fp32. A layer of its own, since other consumers read the int8 tensor.
func (c *compiler) floatOutput(v *value) (*value, error) {
	r := v.root()
	l := &layer{kind: lMove, in: r, accFP: true}
	l.steps = []step{{kind: sDequantize, rowF: fill(r.lay.c(), r.q.scale), zp: r.q.zp}}
	y := &value{name: v.name, shape: r.shape, typ: onnx.Float, device: device{lay: r.lay, layer: l}}
	l.out = y
	c.layers = append(c.layers, l)
	if v == r {
		return y, nil
	}
	f := &value{name: v.name, shape: v.shape, typ: v.typ, derived: derived{alias: y}}
	if v.view != nil {
		f.view = &transposeOf{src: y, perm: v.view.perm, node: v.view.node}
	}
	return f, nil
}
