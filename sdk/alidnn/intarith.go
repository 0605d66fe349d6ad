package alidnn

// Arithmetic on integer graph inputs. ONNX's Add, Sub, Mul and Div of
// integer tensors wrap around the type's range, and Div truncates toward
// zero. The engine computes in fp32, so they run where fp32 is exact and
// the host reproduces the rest as it reads the result back (see
// boundary.go's read-back conversion, which truncates and wraps):
//
//   - the operands are INT8, UINT8, INT16 or UINT16 graph inputs staged as
//     exact fp32 values (an INT8 or UINT8 input is staged so only when
//     every reader is such arithmetic or a comparison; otherwise it is a
//     quantised int8 tensor), of the same type;
//   - Add and Sub are exact in fp32 for 8- and 16-bit operands (|a ± b| <
//     2¹⁸); Mul for 8-bit ones (|a·b| ≤ 2¹⁶; 16-bit products reach 2³², and
//     run on int32 lanes instead: see intpath.go);
//     Div for 8- and 16-bit ones: the engine's fp32 quotient is correctly
//     rounded, and a non-integer a/b lies at least 1/|b| from every
//     integer, a gap relative to |a/b| of at least 1/|a| ≥ 2⁻¹⁶ against
//     fp32's 2⁻²⁴, so it never rounds onto an integer and truncating it
//     gives ONNX's quotient (checked for every pair of INT16 and of UINT16
//     values; division by zero, which ONNX leaves undefined, gives what
//     the read-back makes of ±Inf or NaN). An INT32 a is not exact in
//     fp32, so INT32 Div is refused;
//   - the result is only a graph output, so that nothing reads it before
//     the host wraps or truncates it.

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// intArithOps are the readers for which an INT8 or UINT8 input is staged
// as exact fp32 values: the arithmetic below, and comparisons, exact on
// such values (see compare.go).
var intArithOps = []string{"Add", "Sub", "Mul", "Div", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}

// arithIntInput reports whether the INT8 or UINT8 graph input name is read
// only by integer arithmetic and comparisons, which stages it as fp32.
func (c *compiler) arithIntInput(name string) bool { return c.readOnlyBy(name, intArithOps) }

// readOnlyBy reports whether the value name is read, and only by nodes of
// the operators ops.
func (c *compiler) readOnlyBy(name string, ops []string) bool {
	rs := c.consumers(name)
	for _, n := range rs {
		if !slices.Contains(ops, n.OpType) {
			return false
		}
	}
	return len(rs) > 0
}

// fp32Int reports whether v is an integer graph input (or a view of one)
// staged as exact fp32 values.
func fp32Int(v *value) bool {
	r := v.root()
	switch v.typ {
	case onnx.Int8, onnx.Uint8, onnx.Int16, onnx.Uint16:
		return !v.isConst && r.input && r.layer == nil && r.elem == f32
	}
	return false
}

// intArith checks integer arithmetic n on a and b, of which one is an
// fp32-staged integer input, against the rule above; the caller then
// compiles it as fp32 arithmetic.
func (c *compiler) intArith(n *onnx.Node, a, b *value) error {
	if !fp32Int(a) || !fp32Int(b) || a.typ != b.typ {
		return fmt.Errorf("%s of %v %s and %v %s: integer arithmetic runs on two integer graph inputs of one type: %w", n.OpType, a.typ, a, b.typ, b, ErrUnsupported)
	}
	if bits := a.typ.Bits(); bits > 8 && n.OpType == "Mul" {
		return fmt.Errorf("%s of %v %s and %s: ONNX's %d-bit integer %s is not exact in fp32: %w", n.OpType, a.typ, a, b, bits, n.OpType, ErrUnsupported)
	}
	if !c.outputs[n.Outputs[0]] || c.uses[n.Outputs[0]] != 1 {
		return fmt.Errorf("%s of %v %s and %s in the middle of the graph: the host wraps the result around %v (and truncates a quotient) only as it reads a graph output: %w",
			n.OpType, a.typ, a, b, a.typ, ErrUnsupported)
	}
	return nil
}
