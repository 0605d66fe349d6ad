package alidnn

// Element types at the graph's boundary.
//
// The engine's data path is fp32 and int8. A graph input of another element
// type is converted as the runtime stages it into device memory, and an
// output of another type is converted as the host reads it back: the
// format conversion ("reformatting") TensorRT and onnxruntime's execution
// providers do at their boundaries. The rule, so that no conversion is ever
// inexact where ONNX is exact:
//
//   - FLOAT16, BFLOAT16, float8 and FLOAT4E2M1 inputs are staged as fp32
//     (every value of theirs is an fp32 value). The engine reads them only
//     through views, Cast and DequantizeLinear: arithmetic on them would
//     round to their type after each operator in ONNX, and once at the end
//     here.
//   - A DOUBLE input is staged as fp32 only when every reader is a Cast to
//     FLOAT: the staging conversion is then that Cast (round to nearest
//     even, as ONNX says). A Cast of it to a narrower float type whose
//     result is only a graph output is the host's, from the input's own
//     values (see hostcast.go). Otherwise it is refused.
//   - INT16, UINT16, INT4, UINT4, INT2 and UINT2 inputs are staged as exact
//     fp32 values, and read like the INT64 and BOOL inputs of embed.go: views,
//     Cast, comparisons with a constant, Gather's indices, Where's
//     condition, and as operands of integer arithmetic where intarith.go's
//     rule makes it exact. Read only by Mul, an INT16 or UINT16 input is
//     staged as int32 values instead, and a UINT32 input read only by
//     Add, Sub, Mul and comparisons as its int32 bit pattern (see
//     intpath.go). A UINT64 input read only by Add, Sub, Mul, Div and
//     comparisons is staged as two such patterns, its low and high words,
//     and a UINT64 result read back as two and joined (see wide.go).
//   - A STRING input read only by Equal (with another STRING input or a
//     STRING constant) is staged as exact fp32 ids: the host gives every
//     distinct string of a run one integer below 2²⁴, in one dictionary
//     the run's STRING inputs share, which starts from the graph's STRING
//     constants' ids the compiler fixed (see intern.go). Read otherwise, or
//     a graph output, it is refused.
//   - A Cast of an fp32 value to another type (FLOAT16, BFLOAT16, float8,
//     DOUBLE, an integer type, BOOL) whose result is only a graph output is a
//     read-back conversion: the host converts the engine's fp32 as ONNX's
//     Cast does (round to nearest even, float8's saturate attribute, float to
//     integer by truncation toward zero, wrapping around the type's range as
//     onnx's reference does for the 4- and 2-bit types and as C does for an
//     in-range int64). Read by another operator, the result would not be
//     rounded on the engine: refused.

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// narrowFloat reports whether t is a floating-point type narrower than
// fp32, every value of which fp32 holds.
func narrowFloat(t onnx.DataType) bool {
	return t.IsFloat() && t != onnx.Float && t != onnx.Double
}

// stagedFloat reports whether x is a FLOAT16, BFLOAT16, float8 or DOUBLE
// graph input (or a view of one), whose fp32 values are its own (DOUBLE's
// rounded by the Cast reading it). A computed value of a narrow type is
// not: its fp32 values are not rounded to the type yet.
func stagedFloat(x *value) bool {
	r := x.root()
	return (narrowFloat(x.typ) || x.typ == onnx.Double) && r.input && r.layer == nil && r.gather == nil
}

// stagedInt reports whether t is an integer type the runtime stages as
// exact fp32 values and the engine reads as embed.go reads INT64 and BOOL.
func stagedInt(t onnx.DataType) bool {
	switch t {
	case onnx.Int64, onnx.Bool, onnx.Int16, onnx.Uint16, onnx.Int4, onnx.Uint4, onnx.Int2, onnx.Uint2:
		return true
	}
	return false
}

// doubleInput checks that every reader of the DOUBLE graph input name is a
// Cast to FLOAT, which staging it as fp32 then is, or a Cast the host does
// from its values (see hostcast.go). It reports whether the input is the
// host's only: then it is not staged.
func (c *compiler) doubleInput(name string) (hostOnly bool, err error) {
	staged, host := false, false
	for _, n := range c.g.Nodes {
		for _, in := range n.Inputs {
			if in != name {
				continue
			}
			to, _ := n.Int("to", 0)
			switch {
			case n.OpType == "Cast" && onnx.DataType(to) == onnx.Float:
				staged = true
			case c.hostCastOfDouble(n):
				host = true
			default:
				return false, fmt.Errorf("input %q: element type DOUBLE, read by %s %q: the engine computes in fp32 and stages a DOUBLE input only for a Cast to FLOAT: %w",
					name, n.OpType, n.Name, ErrUnsupported)
			}
		}
	}
	for _, o := range c.g.Outputs {
		if o.Name == name {
			return false, fmt.Errorf("input %q: element type DOUBLE, a graph output as it is: the engine computes in fp32: %w", name, ErrUnsupported)
		}
	}
	return host && !staged, nil
}

// hostCastAttrs reads Cast n's saturate and round_mode for the host's
// conversion to t, checking that the host converts to t with them.
func hostCastAttrs(n *onnx.Node, t onnx.DataType) (noSaturate bool, mode string, err error) {
	sat, err := n.Int("saturate", 1)
	if err != nil {
		return false, "", err
	}
	if mode, err = n.String("round_mode", "up"); err != nil {
		return false, "", err
	}
	if _, err := typedTensor("", t, nil, []float32{1}, true, mode); err != nil {
		return false, "", fmt.Errorf("Cast to %v: %v: %w", t, err, ErrUnsupported)
	}
	return sat == 0, mode, nil
}

// readBackCast compiles a Cast of the fp32 value x to type t as the host's
// conversion of the graph output it must be: an alias of x's storage of
// type t, which the host converts as it reads it (see runtime.go's
// typedOutput).
func (c *compiler) readBackCast(n *onnx.Node, x *value, t onnx.DataType) error {
	if !c.outputs[n.Outputs[0]] || c.uses[n.Outputs[0]] != 1 {
		return fmt.Errorf("Cast from %v to %v in the middle of the graph: the engine computes in fp32 and converts to %v only as the host reads a graph output: %w",
			x.typ, t, t, ErrUnsupported)
	}
	noSat, mode, err := hostCastAttrs(n, t)
	if err != nil {
		return err
	}
	v := &value{shape: x.shape, typ: t, derived: derived{alias: x.root()}}
	v.noSaturate, v.roundMode = noSat, mode
	if x.view != nil {
		v.view = &transposeOf{src: x.view.src, perm: x.view.perm, node: x.view.node}
	}
	c.set(n, 0, v)
	return nil
}

// checkNarrow refuses operators that would compute on a FLOAT16, BFLOAT16
// or float8 input as if fp32 were its type.
func checkNarrow(n *onnx.Node, k int, v *value) error {
	if v.isConst || !narrowFloat(v.typ) || shapeOnly[n.OpType] {
		return nil
	}
	switch n.OpType {
	case "Identity", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Cast":
		return nil
	case "DequantizeLinear":
		if k == 0 && stagedFloat(v) {
			return nil // see dequantizeStaged
		}
	}
	return fmt.Errorf("input %d (%q) is %v, which the engine holds as fp32 and reads only through views and Cast (%s would round to %v after each operator): %w",
		k, v.name, v.typ, n.OpType, v.typ, ErrUnsupported)
}

// castFloat is ONNX's Cast of x to integer type t: truncation toward zero,
// wrapped around t's range (the 4- and 2-bit types as onnx's reference
// wraps them; the others as C converts an in-range value). NaN becomes 0,
// and a value beyond int64 its nearest int64, where ONNX leaves the result
// undefined.
func castFloat(x float64, t onnx.DataType) int64 {
	if t == onnx.Bool {
		return boolInt(x != 0)
	}
	if math.IsNaN(x) {
		return 0
	}
	w := math.Trunc(x)
	switch {
	case w >= math.MaxInt64:
		return math.MaxInt64
	case w <= math.MinInt64:
		return math.MinInt64
	}
	return castInt(int64(w), t)
}

// castInt is ONNX's Cast of the integer i to integer type t: i wrapped
// around t's range, two's complement, as numpy converts.
func castInt(i int64, t onnx.DataType) int64 {
	if t == onnx.Bool {
		return boolInt(i != 0)
	}
	bits := t.Bits()
	if bits == 0 || bits >= 64 {
		return i
	}
	u := uint64(i) & (1<<bits - 1)
	if signed(t) && u >= 1<<(bits-1) {
		return int64(u) - 1<<bits
	}
	return int64(u)
}

func signed(t onnx.DataType) bool {
	switch t {
	case onnx.Int2, onnx.Int4, onnx.Int8, onnx.Int16, onnx.Int32, onnx.Int64:
		return true
	}
	return false
}

// typedTensor converts fp32 values to a tensor of type t: a
// floating-point type as Cast rounds (saturate for float8, round_mode for
// FLOAT8E8M0, "" meaning "up"), an integer type by castFloat.
func typedTensor(name string, t onnx.DataType, dims []int64, f []float32, saturate bool, roundMode string) (*onnx.Tensor, error) {
	if t.IsFloat() {
		if roundMode == "" {
			roundMode = "up"
		}
		return onnx.NewFloatRounded(name, t, dims, f, saturate, roundMode)
	}
	iv := make([]int64, len(f))
	for k, x := range f {
		iv[k] = castFloat(float64(x), t)
	}
	return onnx.NewInt(name, t, dims, iv)
}

// roundTo rounds constant values to floating-point type t as a Cast to it
// does (roundMode for FLOAT8E8M0): folded constants of a narrow type hold
// only its values.
func roundTo(t onnx.DataType, f []float32, saturate bool, roundMode string) ([]float32, error) {
	if !narrowFloat(t) {
		return f, nil
	}
	x, err := onnx.NewFloatRounded("", t, []int64{int64(len(f))}, f, saturate, roundMode)
	if err != nil {
		return nil, err
	}
	return x.Float32s()
}

// stagedFloats returns the fp32 values the runtime stages for input t:
// floating-point types converted (DOUBLE rounded to nearest even), integer
// ones exact within ±2²⁴ (see intAsFloat32).
func stagedFloats(t *onnx.Tensor) ([]float32, error) {
	if t.DataType.IsFloat() {
		return t.Float32s()
	}
	return intAsFloat32(t)
}

// dequantizeStaged compiles a DequantizeLinear of an input staged as fp32
// (an INT16, UINT16, 4- or 2-bit or float8 one), whose layer l holds it in
// its fp32 accumulator: x − zero point, exact in fp32 for these types,
// then × scale, rounded once, as ONNX computes it in float32. A FLOAT16
// scale makes a FLOAT16 output, which the host rounds as it reads it, as
// ONNX casts its float32 product.
func (c *compiler) dequantizeStaged(n *onnx.Node, l *layer) error {
	s, _, _, err := c.quantParams(n, 1, l.out.lay, true)
	if err != nil {
		return err
	}
	zp := make([]float32, len(s))
	if zv, err := c.in(n, 2); err != nil {
		return err
	} else if zv != nil {
		zf := zv.floats()
		for k := range zp {
			zp[k] = -zf[min(k, len(zf)-1)]
		}
	}
	l.steps = append(l.steps, step{kind: sAddRow, fp: true, rowF: zp}, step{kind: sMulRow, fp: true, rowF: s})
	typ := onnx.Float
	if sv, _ := c.in(n, 1); sv != nil && narrowFloat(sv.typ) {
		typ = sv.typ
	}
	c.set(n, 0, c.rename(l, typ))
	return nil
}

// reduceStagedInt compiles ReduceMax or ReduceMin of an integer input
// staged as exact fp32 values (a BOOL mask, say) as the reduction of its
// Cast to FLOAT: a maximum or minimum of exact values is one of them, so
// the result holds exact values of the input's type again.
func (c *compiler) reduceStagedInt(n *onnx.Node, x *value) error {
	if n.OpType != "ReduceMax" && n.OpType != "ReduceMin" {
		return fmt.Errorf("%s of %v %s: %w", n.OpType, x.typ, x, ErrUnsupported)
	}
	if r := x.root(); r.input && r.lay.shape == nil {
		// Laid out as a FLOAT input read by the reduction would be, not
		// as a mask (see maskLayout).
		r.lay = matLayout(r.shape)
	}
	f, r := n.Outputs[0]+"/float", n.Outputs[0]+"/reduced"
	m := &onnx.Node{OpType: n.OpType, Inputs: append([]string{f}, n.Inputs[1:]...), Outputs: []string{r}, Attrs: n.Attrs}
	cast := &onnx.Node{OpType: "Cast", Inputs: []string{n.Inputs[0]}, Outputs: []string{f},
		Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}}}
	// The reduction reads the cast more than once: it must not fuse into
	// the cast's layer. Its result is the tensor the graph declares, which
	// the alias below gives the input's type (see broadcastsSafelyAt).
	c.reduced[r] = true
	if err := c.runSeq(n, []*onnx.Node{cast, m}, map[string]int{f: 2, r: c.uses[n.Outputs[0]]}); err != nil {
		return err
	}
	y := c.vals[r]
	c.set(n, 0, &value{shape: y.shape, typ: x.typ, derived: derived{alias: y}})
	return nil
}
