package alidnn

// Gated activations as exporters decompose them: x · HardSigmoid(x) (torch
// below opset 14), x · Clip(x + 3, 0, 6) before the / 6 (paddle2onnx's
// HardSwish), x · Sigmoid(x) (SiLU, Swish). Compiled node by node, the
// gate would run in a move layer of its own and the product in another.
// Instead the gate's operations are held back as a chain on x (a value of
// its own that no layer computes) while the graph leads, through
// element-wise operators by scalar constants, to a product with x; the
// product is then one sSelf step in x's layer, as HardSwish is. A chain
// that ends elsewhere is compiled as ordinary steps where it stops.

import (
	"fmt"
	"math"
	"slices"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// selfChain is a value ops(x), held back.
type selfChain struct {
	x   *value
	ops []selfOp
}

// gated compiles n if it starts, extends or closes a chain, and compiles
// the chains among n's inputs as steps otherwise.
func (c *compiler) gated(n *onnx.Node) (bool, error) {
	if done, err := c.closeChain(n); done || err != nil {
		return done, err
	}
	for k, in := range n.Inputs {
		v := c.vals[in]
		if in == "" || v == nil || v.self == nil {
			continue
		}
		if ops, ok := c.chainOps(n, k, v.shape); ok {
			c.set(n, 0, &value{shape: v.shape, typ: v.typ, derived: derived{self: &selfChain{x: v.self.x, ops: slices.Concat(v.self.ops, ops)}}})
			return true, nil
		}
		if err := c.unchain(v); err != nil {
			return false, err
		}
	}
	k, x := c.computedInput(n)
	if !chainable[n.OpType] || x == nil || x.host != nil || !x.isFloat() || !eqInts(x.shape, x.root().shape) {
		return false, nil
	}
	ops, ok := c.chainOps(n, k, x.shape)
	if !ok || !c.productWith(n.Outputs[0], n.Inputs[k]) {
		return false, nil
	}
	c.set(n, 0, &value{shape: x.shape, typ: x.typ, derived: derived{self: &selfChain{x: x, ops: ops}}})
	return true, nil
}

// computedInput returns n's one input that is not a constant, and its
// index; nil if there are none or several.
func (c *compiler) computedInput(n *onnx.Node) (int, *value) {
	k, x := -1, (*value)(nil)
	for i, in := range n.Inputs {
		if v := c.vals[in]; in != "" && v != nil && !v.isConst {
			if x != nil {
				return -1, nil
			}
			k, x = i, v
		}
	}
	return k, x
}

// closeChain compiles a Mul of a chain on x by x as one step of x's layer.
func (c *compiler) closeChain(n *onnx.Node) (bool, error) {
	if n.OpType != "Mul" || len(n.Inputs) != 2 {
		return false, nil
	}
	a, b := c.vals[n.Inputs[0]], c.vals[n.Inputs[1]]
	if a == nil || b == nil {
		return false, nil
	}
	if a.self != nil {
		a, b = b, a
	}
	if b.self == nil || b.self.x != a {
		return false, nil
	}
	a.uses-- // the chain reads x no more
	l, err := c.openFloat(a)
	if err != nil {
		return false, err
	}
	l.steps = append(l.steps, step{kind: sSelf, fp: true, chain: b.self.ops, comb: isa.AluMul})
	c.set(n, 0, c.rename(l, a.typ))
	return true, nil
}

// unchain compiles the chain v as steps on its x, where the graph leaves
// the pattern.
func (c *compiler) unchain(v *value) error {
	l, err := c.openFloat(v.self.x)
	if err != nil {
		return err
	}
	if err := c.opSteps(l, v.self.ops); err != nil {
		return err
	}
	out := c.rename(l, v.typ)
	out.name, out.uses = v.name, v.uses
	c.vals[v.name] = out
	return nil
}

// openFloat opens a layer holding x in an fp32 accumulator, dequantising
// a post-training-quantised or int8 x (see floatOperand).
func (c *compiler) openFloat(x *value) (*layer, error) {
	x, err := c.floatOperand(x)
	if err != nil {
		return nil, err
	}
	l, err := c.open(x)
	if err != nil {
		return nil, err
	}
	if !l.accFP {
		return nil, fmt.Errorf("gated activation of the integer tensor %s (dequantize it first): %w", x, ErrUnsupported)
	}
	return l, nil
}

// productWith reports whether the value name leads, through nodes that
// chainOps may take and that nothing else reads, to a Mul by x.
func (c *compiler) productWith(name, x string) bool {
	for range len(c.g.Nodes) {
		if c.uses[name] != 1 || c.outputs[name] {
			return false
		}
		m := c.consumer(name)
		if m == nil || len(m.Outputs) != 1 {
			return false
		}
		if m.OpType == "Mul" && len(m.Inputs) == 2 && (m.Inputs[0] == x || m.Inputs[1] == x) {
			return true
		}
		if !chainable[m.OpType] {
			return false
		}
		name = m.Outputs[0]
	}
	return false
}

// chainable are the operators a chain may hold.
var chainable = map[string]bool{"Relu": true, "Clip": true, "HardSigmoid": true, "Sigmoid": true, "Add": true, "Sub": true, "Mul": true, "Div": true}

// consumer returns the first node that reads name.
func (c *compiler) consumer(name string) *onnx.Node {
	if c.readers == nil {
		c.readers = map[string]*onnx.Node{}
		for _, m := range c.g.Nodes {
			for _, in := range m.Inputs {
				if _, ok := c.readers[in]; !ok {
					c.readers[in] = m
				}
			}
		}
	}
	return c.readers[name]
}

// chainOps returns n's operations on its input k, of shape, where n is an
// element-wise operator whose other operands are scalar constants.
func (c *compiler) chainOps(n *onnx.Node, k int, shape []int) ([]selfOp, bool) {
	if len(n.Outputs) != 1 {
		return nil, false
	}
	switch n.OpType {
	case "Relu":
		return []selfOp{{isa.AluMax, 0}}, true
	case "HardSigmoid":
		alpha, err1 := n.Float("alpha", 0.2)
		beta, err2 := n.Float("beta", 0.5)
		return hardSigmoidOps(alpha, beta), err1 == nil && err2 == nil
	case "Sigmoid":
		return sigmoidOps(1), true
	case "Clip":
		return c.clipOps(n, k)
	case "Add", "Sub", "Mul", "Div":
		return c.scalarOps(n, k, shape)
	}
	return nil, false
}

func (c *compiler) clipOps(n *onnx.Node, k int) ([]selfOp, bool) {
	lo, hi, err := c.clipBounds(n)
	if err != nil || k != 0 {
		return nil, false
	}
	var ops []selfOp
	if !math.IsInf(float64(lo), -1) {
		ops = append(ops, selfOp{isa.AluMax, lo})
	}
	if !math.IsInf(float64(hi), 1) {
		ops = append(ops, selfOp{isa.AluMin, hi})
	}
	return ops, true
}

// scalarOps is an Add, Sub, Mul or Div of input k by a scalar constant:
// k + x and k · x either way round, x − k and x / k only.
func (c *compiler) scalarOps(n *onnx.Node, k int, shape []int) ([]selfOp, bool) {
	if len(n.Inputs) != 2 || (k == 1 && (n.OpType == "Sub" || n.OpType == "Div")) {
		return nil, false
	}
	s := c.vals[n.Inputs[1-k]]
	if s == nil || !s.isConst || s.len() != 1 || len(s.shape) > len(shape) {
		return nil, false
	}
	v := s.floats()[0]
	switch n.OpType {
	case "Add":
		return []selfOp{{isa.AluAdd, v}}, true
	case "Sub":
		return []selfOp{{isa.AluAdd, -v}}, true
	case "Mul":
		return []selfOp{{isa.AluMul, v}}, true
	}
	return []selfOp{{isa.AluMul, 1 / v}}, true
}

// rowOf is the row step of a chain's operation.
var rowOf = map[isa.AluOp]stepKind{isa.AluAdd: sAddRow, isa.AluMul: sMulRow, isa.AluMax: sMaxRow, isa.AluMin: sMinRow}

// opStep appends op to l's steps on its accumulator.
func (c *compiler) opStep(l *layer, op selfOp) error {
	switch op.op {
	case isa.AluExp:
		l.steps = append(l.steps, step{kind: sExp, fp: true})
	case isa.AluLog:
		l.steps = append(l.steps, step{kind: sLog, fp: true})
	default:
		return c.rowStep(l, rowOf[op.op], fill(l.out.lay.c(), op.c))
	}
	return nil
}
