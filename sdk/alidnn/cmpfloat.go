package alidnn

// Comparisons of computed FLOAT tensors and logic of computed BOOLs on the
// ALU's lt and eq, which give exactly 1.0 or 0.0 for every pair of values
// (NaN compares false, −0 = +0, infinities in order): the arithmetic forms
// of compare.go hold only for small integers.

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// floatCompare reports whether compareNode's operands a and b are FLOAT,
// one at least computed, or two integer inputs of one type staged as exact
// fp32 values (see intarith.go), which compare as those values do: the
// comparisons compareFloat compiles.
func floatCompare(a, b *value) bool {
	if a.typ == onnx.Float && b.typ == onnx.Float {
		return !(a.isConst && b.isConst)
	}
	return a.typ == b.typ && fp32Int(a) && fp32Int(b)
}

// compareFloat compiles Equal, Less, Greater, LessOrEqual and
// GreaterOrEqual of FLOAT a and b, broadcast as numpy does, into 0 and 1 in
// fp32: a < b and a = b are the ALU's lt and eq, a > b is −a < −b (see
// sGtTensor), and a ≤ b is (a < b) + (a = b), never both 1 and both 0 when
// either is NaN, which 1 − (b < a) would get wrong.
func (c *compiler) compareFloat(n *onnx.Node, a, b *value) error {
	switch n.OpType {
	case "LessOrEqual", "GreaterOrEqual":
		strict := map[string]string{"LessOrEqual": "Less", "GreaterOrEqual": "Greater"}[n.OpType]
		return c.orEqual(n, strict)
	}
	op := map[string]string{"Equal": "Eq", "Less": "Lt", "Greater": "Gt"}[n.OpType]
	shape, err := broadcastShape(a.shape, b.shape)
	if err != nil {
		return err
	}
	if a.isConst {
		a, b, op = b, a, swapOp[op]
	}
	if !b.isConst {
		return c.tensorOperands(n, op, a, b, shape)
	}
	return c.compareConstant(n, op, a, b, shape)
}

// orEqual compiles a ≤ b (or a ≥ b, strict Greater) as the sum of the
// strict comparison and Equal, each a layer reading a and b, which count
// the second reader. The parts stay FLOAT, as Add reads no BOOL.
func (c *compiler) orEqual(n *onnx.Node, strict string) error {
	for k, in := range n.Inputs[:2] {
		if k == 1 && in == n.Inputs[0] {
			break
		}
		if v := c.vals[in]; v != nil {
			v.uses++
			c.uses[in]++
		}
	}
	out := n.Outputs[0]
	parts := []string{out + "/strict", out + "/eq"}
	for k, op := range []string{strict, "Equal"} {
		m := &onnx.Node{Name: n.Name, OpType: op, Inputs: n.Inputs[:2], Outputs: parts[k : k+1]}
		c.uses[parts[k]] = 1
		a, b, err := c.needPair(m)
		if err != nil {
			return err
		}
		if err := c.compareFloat(m, a, b); err != nil {
			return err
		}
	}
	return c.binary(&onnx.Node{Name: n.Name, OpType: "Add", Inputs: parts, Outputs: n.Outputs[:1]})
}

// compareConstant compiles a op b, op Lt, Gt or Eq, of a computed a and a
// constant b of at most a's shape: a row step for a per-channel b, a
// tensor step for a full one; a > b is −a < −b, the constant negated here.
func (c *compiler) compareConstant(n *onnx.Node, op string, a, b *value, shape []int) error {
	if !eqInts(shape, a.shape) {
		return fmt.Errorf("%s broadcasts the tensor %v to %v: %w", n.OpType, a.shape, shape, ErrUnsupported)
	}
	a, err := c.floatOperand(a)
	if err != nil {
		return err
	}
	l, err := c.open(a)
	if err != nil {
		return err
	}
	if !l.accFP {
		return fmt.Errorf("%s of %s: accumulator not fp32: %w", n.OpType, a, ErrUnsupported)
	}
	vals := b.floats()
	if op == "Gt" {
		l.steps = append(l.steps, step{kind: sMulRow, fp: true, rowF: fill(l.out.lay.c(), -1)})
		vals = mapF(vals, func(x float32) float32 { return -x })
		op = "Lt"
	}
	if row, ok := perLane(l.out.lay, b.shape, vals); ok {
		l.steps = append(l.steps, step{kind: rowKinds[op][0], fp: true, rowF: row})
	} else {
		t, err := expand(l.out.lay, constFloat(b.name, b.shape, vals))
		if err != nil {
			return err
		}
		l.steps = append(l.steps, step{kind: rowKinds[op][1], fp: true, t: t})
	}
	c.set(n, 0, c.rename(l, a.typ))
	return nil
}

// logicNode compiles And, Or and Xor of BOOLs, one at least computed (0
// and 1 in fp32, see compare.go): a·b, max(a, b) and |a − b|, each exact
// on 0 and 1. The result is a computed BOOL.
func (c *compiler) logicNode(n *onnx.Node) error {
	a, b, err := c.needPair(n)
	if err != nil {
		return err
	}
	for _, v := range []*value{a, b} {
		if v.typ != onnx.Bool {
			return fmt.Errorf("%s of %v %s: %w", n.OpType, v.typ, v, ErrUnsupported)
		}
		if hostInt(v) {
			maskLayout(v.root())
		}
	}
	out := n.Outputs[0]
	m := &onnx.Node{Name: n.Name, Inputs: n.Inputs[:2], Outputs: n.Outputs[:1]}
	switch n.OpType {
	case "And":
		m.OpType = "Mul"
	case "Or":
		m.OpType = "Max"
	default: // Xor
		m.OpType, m.Outputs = "Sub", []string{out + "/d"}
		c.uses[out+"/d"] = 1
	}
	if err := c.binary(m); err != nil {
		return err
	}
	if n.OpType == "Xor" {
		if err := c.activationNode(&onnx.Node{Name: n.Name, OpType: "Abs", Inputs: m.Outputs, Outputs: n.Outputs[:1]}); err != nil {
			return err
		}
	}
	return c.typeBool(out)
}
