package alidnn

// Folding of the comparisons, logic and selections exporters write over
// shapes: torch's expand(-1, n) is Equal(shape, -1) → Where(…, ones,
// shape) → Expand, its masks ConstantOfShape, Range and Less. With the
// input shapes bound these are constants; on computed tensors they are
// left to the engine, which refuses them.

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// maxFolded bounds the elements of a folded constant: a shape input can
// ask for any size, and the compiler holds the values in memory.
const maxFolded = 1 << 28

// foldedShape is the broadcast of shapes, refused when it is too large to
// hold.
func foldedShape(shapes ...[]int) ([]int, error) {
	var out []int
	for _, s := range shapes {
		var err error
		if out, err = broadcastShape(out, s); err != nil {
			return nil, err
		}
	}
	n := 1
	for _, d := range out {
		if d > 0 && n > maxFolded/d {
			return nil, fmt.Errorf("a constant of shape %v is too large to fold", out)
		}
		n *= d
	}
	return out, nil
}

// compare is a comparison or logical operator on two elements, as floats
// when either operand is floating-point and as integers otherwise.
type compare struct {
	f func(x, y float32) bool
	i func(x, y int64) bool
}

var comparisons = map[string]compare{
	"Equal":          {func(x, y float32) bool { return x == y }, func(x, y int64) bool { return x == y }},
	"Less":           {func(x, y float32) bool { return x < y }, func(x, y int64) bool { return x < y }},
	"LessOrEqual":    {func(x, y float32) bool { return x <= y }, func(x, y int64) bool { return x <= y }},
	"Greater":        {func(x, y float32) bool { return x > y }, func(x, y int64) bool { return x > y }},
	"GreaterOrEqual": {func(x, y float32) bool { return x >= y }, func(x, y int64) bool { return x >= y }},
	"And":            {i: func(x, y int64) bool { return x != 0 && y != 0 }},
	"Or":             {i: func(x, y int64) bool { return x != 0 || y != 0 }},
	"Xor":            {i: func(x, y int64) bool { return (x != 0) != (y != 0) }},
}

// foldCompare applies a comparison or a logical operator with
// broadcasting; the result is Bool.
func (c *compiler) foldCompare(n *onnx.Node) (*value, error) {
	a, b, err := c.needPair(n)
	if err != nil {
		return nil, err
	}
	if a.typ == onnx.String {
		return foldEqualStrings(a, b) // see intern.go
	}
	shape, err := foldedShape(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	ia, ib := broadcastIndex(shape, a.shape), broadcastIndex(shape, b.shape)
	op := comparisons[n.OpType]
	r := make([]int64, len(ia))
	if op.f != nil && (a.isFloat() || b.isFloat()) {
		fa, fb := a.floats(), b.floats()
		for k := range r {
			r[k] = boolInt(op.f(fa[ia[k]], fb[ib[k]]))
		}
	} else {
		xa, xb := a.ints(), b.ints()
		for k := range r {
			r[k] = boolInt(op.i(xa[ia[k]], xb[ib[k]]))
		}
	}
	return constInt("", onnx.Bool, shape, r), nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// foldNot negates a Bool constant.
func (c *compiler) foldNot(n *onnx.Node) (*value, error) {
	x, err := c.need(n, 0)
	if err != nil {
		return nil, err
	}
	r := make([]int64, x.len())
	for k, v := range x.ints() {
		r[k] = boolInt(v == 0)
	}
	return constInt("", onnx.Bool, x.shape, r), nil
}

// foldWhere selects X where the condition holds and Y elsewhere, the
// three broadcast together; the result has X's type.
func (c *compiler) foldWhere(n *onnx.Node) (*value, error) {
	var in [3]*value
	for k := range in {
		v, err := c.need(n, k)
		if err != nil {
			return nil, err
		}
		in[k] = v
	}
	cond, x, y := in[0], in[1], in[2]
	shape, err := foldedShape(cond.shape, x.shape, y.shape)
	if err != nil {
		return nil, err
	}
	ic, ix, iy := broadcastIndex(shape, cond.shape), broadcastIndex(shape, x.shape), broadcastIndex(shape, y.shape)
	cv := cond.ints()
	if x.isFloat() {
		fx, fy := x.floats(), y.floats()
		r := make([]float32, len(ic))
		for k := range r {
			r[k] = fy[iy[k]]
			if cv[ic[k]] != 0 {
				r[k] = fx[ix[k]]
			}
		}
		return &value{shape: shape, typ: x.typ, constant: constant{f: r}}, nil
	}
	vx, vy := x.ints(), y.ints()
	r := make([]int64, len(ic))
	for k := range r {
		r[k] = vy[iy[k]]
		if cv[ic[k]] != 0 {
			r[k] = vx[ix[k]]
		}
	}
	return constInt("", x.typ, shape, r), nil
}

// foldTrilu keeps the upper (or lower) triangle of each matrix of a
// constant, from diagonal k on, and zeroes the rest: torch.triu and tril,
// as in a causal attention mask over a bound sequence length.
func (c *compiler) foldTrilu(n *onnx.Node) (*value, error) {
	x, err := c.need(n, 0)
	if err != nil {
		return nil, err
	}
	upper, err := n.Int("upper", 1)
	if err != nil {
		return nil, err
	}
	k := int64(0)
	if kv, err := c.in(n, 1); err != nil {
		return nil, err
	} else if kv != nil {
		if kv.len() != 1 {
			return nil, fmt.Errorf("Trilu's k (%q) of shape %v: want a scalar", kv.name, kv.shape)
		}
		k = kv.ints()[0]
	}
	r := len(x.shape)
	if r < 2 {
		return nil, fmt.Errorf("Trilu of %v: want matrices", x.shape)
	}
	rows, cols := x.shape[r-2], x.shape[r-1]
	keep := make([]int, 0, x.len())
	for e := range x.len() {
		i, j := int64(e/cols%rows), int64(e%cols)
		if upper != 0 && j-i >= k || upper == 0 && j-i <= k {
			keep = append(keep, e)
		}
	}
	v := &value{shape: x.shape, typ: x.typ}
	if x.isFloat() {
		src := x.floats()
		v.f = make([]float32, x.len())
		for _, e := range keep {
			v.f[e] = src[e]
		}
		return v, nil
	}
	src := x.ints()
	v.i = make([]int64, x.len())
	for _, e := range keep {
		v.i[e] = src[e]
	}
	return v, nil
}
