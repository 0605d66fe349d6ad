package alidnn

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// folder evaluates an operator on constants at compile time. A nil value
// with no error leaves the node to the engine.
type folder func(c *compiler, n *onnx.Node) (*value, error)

// folders are the operators that fold when their inputs are constants.
var folders = map[string]folder{
	"Constant":         (*compiler).foldConstant,
	"ConstantOfShape":  (*compiler).foldConstantOfShape,
	"Shape":            (*compiler).foldShape,
	"Gather":           (*compiler).foldGather,
	"Slice":            (*compiler).foldSlice,
	"ReduceProd":       (*compiler).foldReduce,
	"ReduceSum":        (*compiler).foldReduce,
	"ReduceMax":        (*compiler).foldReduce,
	"ReduceMin":        (*compiler).foldReduce,
	"Transpose":        (*compiler).foldTranspose,
	"Clip":             (*compiler).foldActivation,
	"LeakyRelu":        (*compiler).foldActivation,
	"HardSigmoid":      (*compiler).foldActivation,
	"HardSwish":        (*compiler).foldActivation,
	"Sigmoid":          (*compiler).foldActivation,
	"Tanh":             (*compiler).foldActivation,
	"Exp":              (*compiler).foldActivation,
	"Relu":             (*compiler).foldActivation,
	"Round":            (*compiler).foldActivation,
	"Floor":            (*compiler).foldActivation,
	"Ceil":             (*compiler).foldActivation,
	"Log":              (*compiler).foldActivation,
	"Sqrt":             (*compiler).foldActivation,
	"Softplus":         (*compiler).foldActivation,
	"Abs":              (*compiler).foldActivation,
	"Neg":              (*compiler).foldActivation,
	"Erf":              (*compiler).foldActivation,
	"Identity":         (*compiler).foldIdentity,
	"Dropout":          (*compiler).foldIdentity,
	"Cast":             (*compiler).foldCast,
	"Flatten":          (*compiler).foldReshape,
	"Reshape":          (*compiler).foldReshape,
	"Squeeze":          (*compiler).foldReshape,
	"Unsqueeze":        (*compiler).foldReshape,
	"Add":              (*compiler).foldArith,
	"Sub":              (*compiler).foldArith,
	"Mul":              (*compiler).foldArith,
	"Div":              (*compiler).foldArith,
	"Max":              (*compiler).foldArith,
	"Min":              (*compiler).foldArith,
	"QuantizeLinear":   (*compiler).foldQDQ,
	"DequantizeLinear": (*compiler).foldQDQ,
	"Concat":           (*compiler).foldConcat,
	"MatMul":           (*compiler).foldMatMul,
	"Size":             (*compiler).foldSize,
	"Range":            (*compiler).foldRange,
	"Expand":           (*compiler).foldExpand,
	"Where":            (*compiler).foldWhere,
	"Trilu":            (*compiler).foldTrilu,
	"Pow":              (*compiler).foldPow,
	"Not":              (*compiler).foldNot,
	"Equal":            (*compiler).foldCompare,
	"Less":             (*compiler).foldCompare,
	"LessOrEqual":      (*compiler).foldCompare,
	"Greater":          (*compiler).foldCompare,
	"GreaterOrEqual":   (*compiler).foldCompare,
	"And":              (*compiler).foldCompare,
	"Or":               (*compiler).foldCompare,
	"Xor":              (*compiler).foldCompare,
}

// fold evaluates n at compile time when its inputs are constants. It
// reports false for operators it leaves to the engine.
func (c *compiler) fold(n *onnx.Node) (bool, error) {
	f := folders[n.OpType]
	if f == nil {
		return c.foldEmpty(n)
	}
	v, err := f(c, n)
	if err != nil {
		return true, err
	}
	if v == nil {
		return false, nil
	}
	if narrowFloat(v.typ) && v.f != nil && n.OpType != "Cast" {
		// ONNX computes in the narrow type: each operator rounds to it
		// (beyond its range, to infinity).
		if v.f, err = roundTo(v.typ, v.f, false, "up"); err != nil {
			return true, err
		}
	}
	c.set(n, 0, v)
	v.isConst = true
	return true, nil
}

// foldConstant is a Constant's value attribute.
func (c *compiler) foldConstant(n *onnx.Node) (*value, error) {
	if t, _ := n.Tensor("value"); t != nil {
		return fromTensor(t)
	}
	if f, err := n.Float("value_float", float32(math.NaN())); err == nil && n.Attr("value_float") != nil {
		return constFloat("", nil, []float32{f}), nil
	}
	if fs, err := n.Ints("value_ints"); err == nil && fs != nil {
		return constInt("", onnx.Int64, []int{len(fs)}, fs), nil
	}
	if i, err := n.Int("value_int", 0); err == nil && n.Attr("value_int") != nil {
		return constInt("", onnx.Int64, nil, []int64{i}), nil
	}
	if a := n.Attr("value_floats"); a != nil {
		return constFloat("", []int{len(a.Floats)}, a.Floats), nil
	}
	return nil, fmt.Errorf("Constant without a supported value attribute: %w", ErrUnsupported)
}

// foldConstantOfShape fills the constant shape input's shape with the value
// attribute's one element, or float zeros.
func (c *compiler) foldConstantOfShape(n *onnx.Node) (*value, error) {
	sv, err := c.needConst(n, 0, "shape")
	if err != nil {
		return nil, err
	}
	shape := toInts(sv.ints())
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("ConstantOfShape of %v: negative dimension %d", shape, d)
		}
	}
	if _, err := foldedShape(shape); err != nil {
		return nil, err
	}
	total := size(shape)
	fv := constFloat("", shape, make([]float32, total))
	t, _ := n.Tensor("value")
	if t == nil {
		return fv, nil
	}
	v, err := fromTensor(t)
	if err != nil {
		return nil, err
	}
	if v.f == nil {
		iv := constInt("", v.typ, shape, make([]int64, total))
		for k := range iv.i {
			iv.i[k] = v.i[0]
		}
		return iv, nil
	}
	for k := range fv.f {
		fv.f[k] = v.f[0]
	}
	return fv, nil
}

// foldIdentity copies its input: an Identity, an inference Dropout, a Max
// or Min of one input.
func (c *compiler) foldIdentity(n *onnx.Node) (*value, error) {
	x, _ := c.need(n, 0)
	if err := c.dropoutMask(n, x); err != nil {
		return nil, err
	}
	v := *x
	return &v, nil
}

// foldCast converts its input to the type attribute's.
func (c *compiler) foldCast(n *onnx.Node) (*value, error) {
	v, err := c.foldIdentity(n)
	if err != nil {
		return nil, err
	}
	to, _ := n.Int("to", int64(onnx.Float))
	sat, _ := n.Int("saturate", 1)
	mode, _ := n.String("round_mode", "up")
	v.typ = onnx.DataType(to)
	switch {
	case v.isFloat():
		if v.f, err = roundTo(v.typ, v.floats(), sat != 0, mode); err != nil {
			return nil, err
		}
		v.i = nil
	case v.typ == onnx.Bool:
		// Not a truncation: 0.5 is true.
		b := make([]int64, v.len())
		for k, x := range v.floats() {
			b[k] = boolInt(x != 0)
		}
		v.i, v.f = b, nil
	case v.f != nil:
		v.i = make([]int64, len(v.f))
		for k, x := range v.f {
			v.i[k] = castFloat(float64(x), v.typ)
		}
		v.f = nil
	default:
		v.i = mapI(v.i, func(x int64) int64 { return castInt(x, v.typ) })
	}
	return v, nil
}

// foldReshape gives its input the shape of a Flatten, Reshape, Squeeze or
// Unsqueeze.
func (c *compiler) foldReshape(n *onnx.Node) (*value, error) {
	x, _ := c.need(n, 0)
	shape, err := c.reshapeTo(n, x.shape)
	if err != nil {
		return nil, err
	}
	v := *x
	v.shape = shape
	return &v, nil
}

// foldArith applies a binary operator with broadcasting, in fp32 when either
// operand is floating-point. Max and Min of one input copy it; of more than
// two, they are left to the engine, which chains them.
func (c *compiler) foldArith(n *onnx.Node) (*value, error) {
	if len(n.Inputs) == 1 && (n.OpType == "Max" || n.OpType == "Min") {
		return c.foldIdentity(n)
	}
	if len(n.Inputs) != 2 {
		return nil, nil
	}
	a, _ := c.need(n, 0)
	b, _ := c.need(n, 1)
	shape, err := broadcastShape(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	ia, ib := broadcastIndex(shape, a.shape), broadcastIndex(shape, b.shape)
	if a.isFloat() || b.isFloat() {
		fa, fb := a.floats(), b.floats()
		r := make([]float32, len(ia))
		for k := range r {
			r[k] = arithFloat(n.OpType, fa[ia[k]], fb[ib[k]])
		}
		return constFloat("", shape, r), nil
	}
	xa, xb := a.ints(), b.ints()
	r := make([]int64, len(ia))
	for k := range r {
		if r[k], err = arithInt(n.OpType, xa[ia[k]], xb[ib[k]]); err != nil {
			return nil, err
		}
	}
	return constInt("", a.typ, shape, r), nil
}

// arithFloat is x op y for Add, Sub, Mul, Div, Max and Min.
func arithFloat(op string, x, y float32) float32 {
	switch op {
	case "Add":
		return x + y
	case "Sub":
		return x - y
	case "Mul":
		return x * y
	case "Div":
		return x / y
	case "Max":
		return max(x, y)
	case "Min":
		return min(x, y)
	}
	return 0
}

// arithInt is x op y for Add, Sub, Mul, Div, Max and Min.
func arithInt(op string, x, y int64) (int64, error) {
	switch op {
	case "Add":
		return x + y, nil
	case "Sub":
		return x - y, nil
	case "Mul":
		return x * y, nil
	case "Div":
		if y == 0 {
			return 0, fmt.Errorf("integer division by zero")
		}
		return x / y, nil
	case "Max":
		return max(x, y), nil
	case "Min":
		return min(x, y), nil
	}
	return 0, nil
}

func toInts(v []int64) []int {
	out := make([]int, len(v))
	for k, x := range v {
		out[k] = int(x)
	}
	return out
}

// foldConcat joins its inputs along the axis attribute.
func (c *compiler) foldConcat(n *onnx.Node) (*value, error) {
	axis, err := n.Int("axis", 0)
	if err != nil {
		return nil, err
	}
	var parts []*value
	for k := range n.Inputs {
		v, err := c.need(n, k)
		if err != nil {
			return nil, err
		}
		parts = append(parts, v)
	}
	return concatConsts(parts, int(axis))
}

// concatConsts joins constants along axis.
func concatConsts(parts []*value, axis int) (*value, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("Concat of nothing")
	}
	r := len(parts[0].shape)
	if r == 0 {
		return nil, fmt.Errorf("Concat of scalars")
	}
	a, err := normAxis(axis, r)
	if err != nil {
		return nil, err
	}
	shape := append([]int(nil), parts[0].shape...)
	shape[a] = 0
	for _, p := range parts {
		if len(p.shape) != r {
			return nil, fmt.Errorf("Concat of ranks %d and %d", r, len(p.shape))
		}
		for k, d := range p.shape {
			if k != a && d != shape[k] {
				return nil, fmt.Errorf("Concat along axis %d of shapes %v and %v", a, parts[0].shape, p.shape)
			}
		}
		shape[a] += p.shape[a]
	}
	outer := 1
	for _, d := range shape[:a] {
		outer *= d
	}
	isF := parts[0].isFloat()
	var rf []float32
	var ri []int64
	for o := 0; o < outer; o++ {
		for _, p := range parts {
			inner := 1
			for _, d := range p.shape[a:] {
				inner *= d
			}
			if isF {
				rf = append(rf, p.floats()[o*inner:(o+1)*inner]...)
			} else {
				ri = append(ri, p.ints()[o*inner:(o+1)*inner]...)
			}
		}
	}
	if isF {
		return constFloat("", shape, rf), nil
	}
	return constInt("", parts[0].typ, shape, ri), nil
}

// foldPow raises a constant to a constant power, broadcast; the result has
// the base's type (torch writes d ** -0.5 over a dimension cast to float).
func (c *compiler) foldPow(n *onnx.Node) (*value, error) {
	a, b, err := c.needPair(n)
	if err != nil {
		return nil, err
	}
	shape, err := foldedShape(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	ia, ib := broadcastIndex(shape, a.shape), broadcastIndex(shape, b.shape)
	fa, fb := a.floats(), b.floats()
	if a.isFloat() {
		r := make([]float32, len(ia))
		for k := range r {
			r[k] = float32(math.Pow(float64(fa[ia[k]]), float64(fb[ib[k]])))
		}
		return &value{shape: shape, typ: a.typ, constant: constant{f: r}}, nil
	}
	xa := a.ints()
	r := make([]int64, len(ia))
	for k := range r {
		if r[k], err = powInt(xa[ia[k]], fb[ib[k]]); err != nil {
			return nil, err
		}
	}
	return constInt("", a.typ, shape, r), nil
}

// powInt is x to the power y, a whole number from 0 to 63, by squaring.
func powInt(x int64, y float32) (int64, error) {
	if !(y >= 0 && y <= 63) || y != float32(math.Trunc(float64(y))) {
		return 0, fmt.Errorf("Pow of the integer %d to %g", x, y)
	}
	r := int64(1)
	for e := int64(y); e > 0; e >>= 1 {
		if e&1 != 0 {
			r *= x
		}
		x *= x
	}
	return r, nil
}
