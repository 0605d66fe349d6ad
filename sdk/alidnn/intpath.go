package alidnn

// Integer arithmetic on the engine's int32 lanes, exact where fp32 is not
// (see intarith.go for the fp32 path):
//
//   - an INT16 or UINT16 graph input read only by Mul is staged as int32
//     values: the ALU's int32 mul gives the low 32 bits of the product, of
//     which the host's read-back wrap keeps the low 16, ONNX's product;
//   - a UINT32 graph input read only by Add, Sub, Mul, Div and comparisons
//     is staged as its int32 bit pattern: int32's wrapping add and
//     low-32-bit mul are arithmetic modulo 2³², which is UINT32's, and the
//     host reads the bits back as UINT32; Equal is cmpint.go's, a
//     difference compared with 0, the others cmpuint32.go's, and Div
//     intdiv.go's (as INT32 Div of two graph inputs);
//   - the result is only a graph output, so that nothing reads the bits
//     before the host wraps them to the type.
//
// Div of 8- and 16-bit operands stays on the fp32 path, exact for them
// (see intarith.go).

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// int32Readers are the operators for which a graph input of type t is
// staged as int32 lanes: nil if none.
func int32Readers(t onnx.DataType) []string {
	switch t {
	case onnx.Int16, onnx.Uint16:
		return []string{"Mul"}
	case onnx.Uint32:
		return []string{"Add", "Sub", "Mul", "Div", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}
	}
	return nil
}

// int32Input reports whether the graph input name of type t is read only
// by int32Readers(t), which stages it as int32 lanes.
func (c *compiler) int32Input(name string, t onnx.DataType) bool {
	ops := int32Readers(t)
	return ops != nil && c.readOnlyBy(name, ops)
}

// uint32Input checks that the UINT32 graph input name is staged as int32
// lanes, naming the reader that keeps it from being.
func (c *compiler) uint32Input(name string) error {
	if c.int32Input(name, onnx.Uint32) {
		return nil
	}
	for _, n := range c.g.Nodes {
		if slices.Contains(n.Inputs, name) && !slices.Contains(int32Readers(onnx.Uint32), n.OpType) {
			return fmt.Errorf("input %q: element type UINT32, read by %s %q: the engine computes UINT32 only as int32 bit patterns, by Add, Sub, Mul, Div and comparisons: %w",
				name, n.OpType, n.Name, ErrUnsupported)
		}
	}
	return fmt.Errorf("input %q: element type UINT32, read by nothing the engine computes: %w", name, ErrUnsupported)
}

// int32Int reports whether v is a 16-bit or UINT32 graph input (or a view
// of one) staged as int32 lanes.
func int32Int(v *value) bool {
	r := v.root()
	return int32Readers(v.typ) != nil && !v.isConst && r.input && r.layer == nil && r.elem == i32
}

// int32Arith compiles Add, Sub or Mul n of a and b, one of them an int32
// staged integer input, by the rule above.
func (c *compiler) int32Arith(n *onnx.Node, a, b *value) error {
	switch {
	case !int32Int(a) || !int32Int(b) || a.typ != b.typ:
		return fmt.Errorf("%s of %v %s and %v %s: int32 integer arithmetic runs on two integer graph inputs of one type: %w", n.OpType, a.typ, a, b.typ, b, ErrUnsupported)
	case !slices.Contains(int32Readers(a.typ), n.OpType) || n.OpType == "Equal":
		return fmt.Errorf("%s of %v %s and %s on int32 lanes: %w", n.OpType, a.typ, a, b, ErrUnsupported)
	case !eqInts(a.shape, b.shape):
		return fmt.Errorf("%s of %v %s and %s: int32 integer arithmetic does not broadcast: %w", n.OpType, a.typ, a, b, ErrUnsupported)
	case !c.outputs[n.Outputs[0]] || c.uses[n.Outputs[0]] != 1:
		return fmt.Errorf("%s of %v %s and %s in the middle of the graph: the host wraps the int32 result around %v only as it reads a graph output: %w",
			n.OpType, a.typ, a, b, a.typ, ErrUnsupported)
	}
	kind := sMulTensor
	if n.OpType != "Mul" {
		kind = sAddTensor
	}
	if n.OpType == "Sub" {
		// −b wraps for the bit pattern 2³¹, and a + (−b) is a − b modulo
		// 2³² all the same.
		nb, err := c.int32Negate(b)
		if err != nil {
			return err
		}
		b = nb
	}
	if err := c.materialize(a); err != nil {
		return err
	}
	l, err := c.openAfter(a, b)
	if err != nil {
		return err
	}
	if l.accFP || l.acc8 {
		return fmt.Errorf("%s of %v %s: accumulator not int32: %w", n.OpType, a.typ, a, ErrUnsupported)
	}
	r := b.root()
	if r.lay.shape == nil {
		r.lay = l.out.lay
	}
	if !r.lay.equal(l.out.lay) && !sameStorage(r.lay, l.out.lay) {
		return fmt.Errorf("%s: operands %s and %s are laid out differently on the device: %w", n.OpType, a, b, ErrUnsupported)
	}
	l.steps = append(l.steps, step{kind: kind, t: r})
	c.set(n, 0, c.rename(l, a.typ))
	return nil
}

// int32Negate returns −x in wrapping int32, computed by a layer only the
// caller reads.
func (c *compiler) int32Negate(x *value) (*value, error) {
	if err := c.materialize(x); err != nil {
		return nil, err
	}
	l, err := c.open(x)
	if err != nil {
		return nil, err
	}
	if l.accFP || l.acc8 {
		return nil, fmt.Errorf("%s: accumulator not int32: %w", x, ErrUnsupported)
	}
	l.steps = append(l.steps, step{kind: sMulRow, rowI: fillI(max(l.out.lay.c(), 1), -1)})
	v := c.rename(l, x.typ)
	v.uses = 1
	return v, nil
}

// int32Div refuses Div of two computed INT32 tensors by name: the engine
// divides integers exactly only as graph inputs (see intdiv.go), and the
// fp32 quotient of an INT32 dividend, which fp32 holds exactly only up to
// 2²⁴, may truncate to the wrong integer.
func int32Div(n *onnx.Node, a, b *value) error {
	if n.OpType != "Div" || a.typ != onnx.Int32 || b.typ != onnx.Int32 || a.isConst || b.isConst {
		return nil
	}
	return fmt.Errorf("Div of INT32 %s and %s: the engine divides integers only of two graph inputs, and an INT32 dividend is not exact in fp32: %w", a, b, ErrUnsupported)
}
