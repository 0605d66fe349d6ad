package alidnn

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// whereTwo compiles Where(cond, x, y) of two computed FLOAT tensors, cond
// a constant or a computed BOOL (0 and 1 in fp32, see whereComputed), as
//
//	max(min(x, b), min(y, −b))   b = (2p − 1)·∞, +∞ where x is picked
//
// the ALU having no select: the picked operand meets +∞, the other −∞,
// exact for every value, infinities included, but NaN, which the ALU's min
// and max drop as in Relu (a picked NaN gives ±∞). Two integer operands
// of one type staged as exact fp32 values (see embed.go) are picked so
// from their Casts to FLOAT, NaN-free, and the result is of their type.
func (c *compiler) whereTwo(n *onnx.Node, cond, x, y *value) error {
	out := n.Outputs[0]
	tmp := func(s string) string { return out + "/where2_" + s }
	if hostInt(x) && hostInt(y) && x.typ == y.typ {
		return c.whereInts(n, x.typ, tmp)
	}
	if x.typ != onnx.Float || y.typ != onnx.Float {
		return fmt.Errorf("Where of %v %s and %v %s: only FLOAT operands: %w", x.typ, x, y.typ, y, ErrUnsupported)
	}
	if !cond.isConst && cond.typ != onnx.Bool {
		return fmt.Errorf("Where with the computed condition %v %s: only a BOOL: %w", cond.typ, cond, ErrUnsupported)
	}
	inf := float32(math.Inf(1))
	var ops []*onnx.Node
	if cond.isConst {
		b, nb := make([]float32, cond.len()), make([]float32, cond.len())
		for k, v := range cond.ints() {
			b[k], nb[k] = -inf, inf
			if v != 0 {
				b[k], nb[k] = inf, -inf
			}
		}
		c.vals[tmp("b")] = constFloat(tmp("b"), cond.shape, b)
		c.vals[tmp("nb")] = constFloat(tmp("nb"), cond.shape, nb)
	} else {
		konst := func(name string, v float32) string {
			c.vals[tmp(name)] = constFloat(tmp(name), nil, []float32{v})
			return tmp(name)
		}
		ops = append(ops,
			&onnx.Node{OpType: "Cast", Inputs: []string{n.Inputs[0]}, Outputs: []string{tmp("p")}, Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}}},
			&onnx.Node{OpType: "Mul", Inputs: []string{tmp("p"), konst("two", 2)}, Outputs: []string{tmp("2p")}},
			&onnx.Node{OpType: "Add", Inputs: []string{tmp("2p"), konst("m1", -1)}, Outputs: []string{tmp("pm")}},
			&onnx.Node{OpType: "Mul", Inputs: []string{tmp("pm"), konst("inf", inf)}, Outputs: []string{tmp("b")}},
			&onnx.Node{OpType: "Mul", Inputs: []string{tmp("pm"), konst("minf", -inf)}, Outputs: []string{tmp("nb")}})
	}
	ops = append(ops,
		&onnx.Node{OpType: "Min", Inputs: []string{n.Inputs[1], tmp("b")}, Outputs: []string{tmp("x")}},
		&onnx.Node{OpType: "Min", Inputs: []string{n.Inputs[2], tmp("nb")}, Outputs: []string{tmp("y")}},
		&onnx.Node{OpType: "Max", Inputs: []string{tmp("x"), tmp("y")}, Outputs: []string{out}})
	return c.lowered(n, ops, tmp(""), c.node)
}

// whereInts compiles Where of two integer operands of type typ as the
// Where of their Casts to FLOAT (tmp names the intermediates), typed typ
// again.
func (c *compiler) whereInts(n *onnx.Node, typ onnx.DataType, tmp func(string) string) error {
	toFloat := func(in, out string) *onnx.Node {
		return &onnx.Node{OpType: "Cast", Inputs: []string{in}, Outputs: []string{out},
			Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}}}
	}
	ops := []*onnx.Node{toFloat(n.Inputs[1], tmp("xf")), toFloat(n.Inputs[2], tmp("yf")),
		{OpType: "Where", Inputs: []string{n.Inputs[0], tmp("xf"), tmp("yf")}, Outputs: []string{tmp("f")}}}
	c.uses[tmp("f")] = c.uses[n.Outputs[0]]
	if err := c.lowered(n, ops, tmp(""), c.node); err != nil {
		return err
	}
	y := c.vals[tmp("f")]
	c.set(n, 0, &value{shape: y.shape, typ: typ, derived: derived{alias: y}})
	return nil
}
