package alidnn

// Pow by exponents that differ per element, on exp, log, round and the
// comparisons: |x|^y = e^(y·ln|x|) with the sign and the special values of
// C's pow, which numpy and onnx follow.

import (
	"fmt"
	"math"
	"strings"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// powTensor compiles Pow(x, y) of a FLOAT x by a y that is computed or a
// constant of more than one element, broadcast as numpy does:
//
//	e = e^(y·ln|x|)                     the magnitude
//	s = −1 where x has its sign bit and y is an odd integer, else 1
//	    (sign bit: min(x, 1/x) < 0, true for −0 and −Inf; odd:
//	    |y/2 − round(y/2)| = 0.5, false for ±Inf and NaN)
//	m = 1 where x is finite and < 0 and y is not an integer (y ≠ round(y))
//	r = e·s·(1 + ln(1 − 2m))            NaN where m is 1, else exactly e·s
//	z = 1 where y = 0, x = 1, or |x| = 1 and |y| = ∞, where C's pow is 1
//	    and e^(0·∞) would be NaN
//	pow = max(1·(1 + ln(2z − 1)), r·(1 + ln(1 − 2z)))
//
// The last line selects exactly: each side is NaN where it is not picked,
// and max returns its other operand for a NaN. e is exp's and log's
// rounding of |x|^y (within a few fp32 ulps of y·ln|x|, relative); the
// rest is exact. An INT32 or INT64 y is cast to FLOAT first (exact below
// 2²⁴); an INT32 x is intpow.go's, other integers are refused.
func (c *compiler) powTensor(n *onnx.Node, x, y *value) error {
	if x.typ != onnx.Float {
		return fmt.Errorf("Pow of the %v tensor %s: integer powers are not computed: %w", x.typ, x, ErrUnsupported)
	}
	shape, err := broadcastShape(x.shape, y.shape)
	if err != nil {
		return err
	}
	if !eqInts(x.shape, shape) && !eqInts(y.shape, shape) {
		return fmt.Errorf("Pow broadcasts both %s and %s to %v: %w", x, y, shape, ErrUnsupported)
	}
	out := n.Outputs[0]
	p := out + "/pow_"
	var seq []*onnx.Node
	node := func(op, o string, ins ...string) string {
		seq = append(seq, &onnx.Node{OpType: op, Inputs: ins, Outputs: []string{p + o}})
		return p + o
	}
	k := func(name string, v float64) string { return c.constScalar(p+name, v) }
	mask := func(o, op, a, b string) string { // a comparison as 0/1 FLOAT
		node(op, o+"b", a, b)
		seq = append(seq, &onnx.Node{OpType: "Cast", Inputs: []string{p + o + "b"}, Outputs: []string{p + o},
			Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}}})
		return p + o
	}
	// nanUnless is 1 where the 0/1 mask v is 1 and NaN where it is 0.
	nanUnless := func(o, v string, scale, offset float64) string {
		return node("Add", o+"n", node("Log", o+"l", node("Add", o+"o", node("Mul", o+"s", v, k(o+"k", scale)), k(o+"c", offset))), k("one", 1))
	}
	X, Y := n.Inputs[0], n.Inputs[1]
	if y.typ != onnx.Float {
		seq = append(seq, &onnx.Node{OpType: "Cast", Inputs: []string{Y}, Outputs: []string{p + "yf"},
			Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}}})
		Y = p + "yf"
	}
	// Operands of the broadcast shape, as the masks of y meet those of x:
	// a constant expanded, a computed one multiplied by ones of the other's
	// shape (1 + 0·(v = 0), exact whatever v holds; x·1 keeps a −0).
	c.vals[p+"shape"] = constInt(p+"shape", onnx.Int64, []int{len(shape)}, toInt64s(shape))
	widen := func(o string, v *value, name, other string) string {
		if eqInts(v.shape, shape) {
			return name
		}
		if v.isConst {
			return node("Expand", o, name, p+"shape")
		}
		ones := node("Add", o+"1", node("Mul", o+"0", mask(o+"z", "Equal", other, k("zero", 0)), k("zero", 0)), k("one", 1))
		return node("Mul", o, ones, name)
	}
	X, Y = widen("xw", x, X, Y), widen("yw", y, Y, X)
	ax := node("Abs", "ax", X)
	e := node("Exp", "e", node("Mul", "yl", Y, node("Log", "l", ax)))
	neg := mask("neg", "Less", node("Min", "mn", X, node("Reciprocal", "rx", X)), k("zero", 0))
	half := node("Mul", "h", Y, k("half", 0.5))
	odd := mask("odd", "Equal", node("Abs", "ad", node("Sub", "d", half, node("Round", "rh", half))), k("halfk", 0.5))
	sign := node("Add", "sg", node("Mul", "no2", node("Mul", "no", neg, odd), k("m2", -2)), k("one", 1))
	integer := mask("int", "Equal", Y, node("Round", "ry", Y))
	finNeg := node("Sub", "fn", mask("lt", "Less", X, k("zero", 0)), mask("minf", "Equal", X, k("ninf", math.Inf(-1))))
	m := node("Mul", "m", finNeg, node("Sub", "ni", k("one", 1), integer))
	r := node("Mul", "r", node("Mul", "es", e, sign), nanUnless("mn_", m, -2, 1))
	z3 := node("Mul", "z3", mask("ax1", "Equal", ax, k("one", 1)), mask("yinf", "Equal", node("Abs", "ay", Y), k("inf", math.Inf(1))))
	z := node("Max", "z", node("Max", "z12", mask("y0", "Equal", Y, k("zero", 0)), mask("x1", "Equal", X, k("one", 1))), z3)
	one := nanUnless("z1_", z, 2, -1)
	keep := node("Mul", "keep", r, nanUnless("z0_", z, -2, 1))
	seq = append(seq, &onnx.Node{OpType: "Max", Inputs: []string{one, keep}, Outputs: []string{out}})
	uses := map[string]int{}
	for _, s := range seq {
		for _, in := range s.Inputs {
			if strings.HasPrefix(in, p) || in == n.Inputs[0] || in == n.Inputs[1] {
				uses[in]++
			}
		}
	}
	return c.runSeq(n, seq, uses)
}

func toInt64s(v []int) []int64 {
	r := make([]int64, len(v))
	for k, x := range v {
		r[k] = int64(x)
	}
	return r
}
