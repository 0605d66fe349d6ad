package alidnn

import (
	"fmt"
	"math"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Activations and unary math built from the ALU's min, max, add, mul, exp
// and log on fp32 lanes: Clip, LeakyRelu, HardSigmoid, HardSwish, Sigmoid,
// Tanh, Exp, Log, Sqrt (e^(½·ln x)), Softplus (ln(1 + e^x)), Abs and Neg.
// Their constants are rows in the accumulator, never bfloat16 immediates,
// so they stay exact in fp32. (Reciprocals and Div by a tensor use the
// ALU's div, see pow.go: through a logarithm they would lose the sign.)

// clipBounds returns Clip's bounds: attributes before opset 11, optional
// constant inputs from it on; an absent bound is ±Inf.
func (c *compiler) clipBounds(n *onnx.Node) (lo, hi float32, err error) {
	lo, hi = float32(math.Inf(-1)), float32(math.Inf(1))
	if c.opset() < 11 {
		if lo, err = n.Float("min", lo); err != nil {
			return lo, hi, err
		}
		hi, err = n.Float("max", hi)
		return lo, hi, err
	}
	for k, b := range []*float32{&lo, &hi} {
		v, err := c.in(n, k+1)
		if err != nil {
			return lo, hi, err
		}
		if v == nil {
			continue
		}
		if !v.isConst {
			return lo, hi, fmt.Errorf("Clip's %s (%q) must be a constant: %w", [2]string{"min", "max"}[k], v.name, ErrUnsupported)
		}
		f := v.floats()
		if len(f) != 1 {
			return lo, hi, fmt.Errorf("Clip's %s has %d values, want a scalar", [2]string{"min", "max"}[k], len(f))
		}
		*b = f[0]
	}
	return lo, hi, nil
}

// activation returns the element-wise function of an activation node and
// its parameters.
func (c *compiler) activation(n *onnx.Node) (func(float32) float32, error) {
	switch n.OpType {
	case "Clip":
		lo, hi, err := c.clipBounds(n)
		if err != nil {
			return nil, err
		}
		return func(x float32) float32 { return min(max(x, lo), hi) }, nil
	case "LeakyRelu":
		alpha, err := n.Float("alpha", 0.01)
		if err != nil {
			return nil, err
		}
		return func(x float32) float32 {
			if x < 0 {
				return alpha * x
			}
			return x
		}, nil
	case "HardSigmoid":
		alpha, err := n.Float("alpha", 0.2)
		if err != nil {
			return nil, err
		}
		beta, err := n.Float("beta", 0.5)
		if err != nil {
			return nil, err
		}
		return func(x float32) float32 { return min(max(alpha*x+beta, 0), 1) }, nil
	case "HardSwish":
		return func(x float32) float32 { return x * min(max(x*(1.0/6)+0.5, 0), 1) }, nil
	case "Sigmoid":
		return func(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }, nil
	case "Tanh":
		return func(x float32) float32 { return float32(math.Tanh(float64(x))) }, nil
	case "Exp":
		return func(x float32) float32 { return float32(math.Exp(float64(x))) }, nil
	case "Log":
		return func(x float32) float32 { return float32(math.Log(float64(x))) }, nil
	case "Sqrt":
		return func(x float32) float32 { return float32(math.Sqrt(float64(x))) }, nil
	case "Softplus":
		return func(x float32) float32 { return float32(math.Log1p(math.Exp(float64(x)))) }, nil
	case "Abs":
		return func(x float32) float32 { return float32(math.Abs(float64(x))) }, nil
	case "Neg":
		return func(x float32) float32 { return -x }, nil
	case "Erf":
		return func(x float32) float32 { return float32(math.Erf(float64(x))) }, nil
	case "Relu":
		return func(x float32) float32 {
			if x < 0 {
				return 0
			}
			return x
		}, nil
	case "Round":
		return func(x float32) float32 { return float32(math.RoundToEven(float64(x))) }, nil
	case "Floor":
		return func(x float32) float32 { return float32(math.Floor(float64(x))) }, nil
	case "Ceil":
		return func(x float32) float32 { return float32(math.Ceil(float64(x))) }, nil
	}
	return nil, fmt.Errorf("operator %s: %w", n.OpType, ErrUnsupported)
}

// foldActivation applies an activation to a constant.
func (c *compiler) foldActivation(n *onnx.Node) (*value, error) {
	x, err := c.need(n, 0)
	if err != nil {
		return nil, err
	}
	f, err := c.activation(n)
	if err != nil {
		return nil, err
	}
	if !x.isFloat() {
		return foldIntSign(n.OpType, x)
	}
	return constFloat("", x.shape, mapF(x.floats(), f)), nil
}

// foldIntSign is Neg, Abs or Relu of an integer constant, as exporters
// write them over shapes (a slice of the last -n positions), and Round,
// Floor and Ceil, which keep an integer.
func foldIntSign(op string, x *value) (*value, error) {
	switch op {
	case "Neg", "Abs", "Relu", "Round", "Floor", "Ceil":
	default:
		return nil, fmt.Errorf("%s of an integer constant: %w", op, ErrUnsupported)
	}
	r := make([]int64, x.len())
	for k, v := range x.ints() {
		switch r[k] = v; {
		case op == "Neg" || op == "Abs" && v < 0:
			r[k] = -v
		case op == "Relu" && v < 0:
			r[k] = 0
		}
	}
	return constInt("", x.typ, x.shape, r), nil
}

// activationNode fuses an activation into x's layer as ALU steps.
func (c *compiler) activationNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	l, err := c.open(x)
	if err != nil {
		return err
	}
	// A post-training-quantised int32 accumulator clips in place at its
	// scale (as Relu does); the other activations run in fp32 after it.
	intClip := n.OpType == "Clip" && !l.accFP && !l.acc8 && l.accScale != nil
	if !l.accFP && l.ptq && !intClip {
		if err := c.settle(l.out, false); err != nil {
			return err
		}
	}
	if !l.accFP && !intClip {
		return fmt.Errorf("%s on the integer tensor %s (dequantize it first): %w", n.OpType, x, ErrUnsupported)
	}
	var rowErr error
	row := func(kind stepKind, v float32) {
		r, _ := perLane(l.out.lay, nil, []float32{v})
		if err := c.rowStep(l, kind, r); err != nil && rowErr == nil {
			rowErr = err
		}
	}
	if err := c.activationSteps(n, l, row); err != nil {
		return err
	}
	if rowErr != nil {
		return rowErr
	}
	c.set(n, 0, c.rename(l, x.typ))
	return nil
}

// floorStep is ⌊x⌋ on the ALU's round and lt (see sFloor).
func floorStep() step {
	return step{kind: sFloor, fp: true, chain: []selfOp{{op: isa.AluRound}}, comb: isa.AluLt}
}

// activationSteps appends the steps of activation n to l; row appends a
// step with one value for every channel.
func (c *compiler) activationSteps(n *onnx.Node, l *layer, row func(kind stepKind, v float32)) error {
	switch n.OpType {
	case "Clip":
		lo, hi, err := c.clipBounds(n)
		if err != nil {
			return err
		}
		// Max first, then min: a min above the max gives the max
		// everywhere, as onnx specifies.
		if !math.IsInf(float64(lo), -1) {
			row(sMaxRow, lo)
		}
		if !math.IsInf(float64(hi), 1) {
			row(sMinRow, hi)
		}
	case "LeakyRelu":
		alpha, err := n.Float("alpha", 0.01)
		if err != nil {
			return err
		}
		// max(x, αx) for α ≤ 1, min(x, αx) above.
		comb := isa.AluMax
		if alpha > 1 {
			comb = isa.AluMin
		}
		l.steps = append(l.steps, step{kind: sSelf, fp: true, chain: []selfOp{{isa.AluMul, alpha}}, comb: comb})
	case "HardSigmoid":
		alpha, err := n.Float("alpha", 0.2)
		if err != nil {
			return err
		}
		beta, err := n.Float("beta", 0.5)
		if err != nil {
			return err
		}
		return c.opSteps(l, hardSigmoidOps(alpha, beta))
	case "HardSwish":
		// x × HardSigmoid(x) with onnx's fixed α = 1/6, β = 1/2.
		l.steps = append(l.steps, step{kind: sSelf, fp: true, comb: isa.AluMul, chain: hardSigmoidOps(1.0/6, 0.5)})
	case "Sigmoid":
		return c.opSteps(l, sigmoidOps(1))
	case "Tanh":
		// 2·sigmoid(2x) − 1. Near 0 the subtraction cancels, but the error
		// left is a few fp32 ulps of 1, far inside onnx's absolute tolerance.
		if err := c.opSteps(l, sigmoidOps(2)); err != nil {
			return err
		}
		row(sMulRow, 2)
		row(sAddRow, -1)
	case "Exp":
		l.steps = append(l.steps, step{kind: sExp, fp: true})
	case "Log":
		l.steps = append(l.steps, step{kind: sLog, fp: true})
	case "Sqrt":
		// e^(½·ln x): 0 gives e^(−Inf) = 0, a negative x NaN, as sqrt does.
		l.steps = append(l.steps, step{kind: sLog, fp: true})
		row(sMulRow, 0.5)
		l.steps = append(l.steps, step{kind: sExp, fp: true})
	case "Softplus":
		l.steps = append(l.steps, step{kind: sExp, fp: true})
		row(sAddRow, 1)
		l.steps = append(l.steps, step{kind: sLog, fp: true})
	case "Abs":
		l.steps = append(l.steps, step{kind: sSelf, fp: true, chain: []selfOp{{isa.AluMul, -1}}, comb: isa.AluMax})
	case "Neg":
		row(sMulRow, -1)
	case "Round":
		l.steps = append(l.steps, step{kind: sRound, fp: true})
	case "Floor":
		l.steps = append(l.steps, floorStep())
	case "Ceil":
		// −⌊−x⌋: r + lt(r, x) would make ceil(−0.3) +0 (−0 + 0 is +0).
		row(sMulRow, -1)
		l.steps = append(l.steps, floorStep())
		row(sMulRow, -1)
	default:
		return fmt.Errorf("operator %s: %w", n.OpType, ErrUnsupported)
	}
	return nil
}

// sigmoidOps are the operations of 1/(1 + e^(−k·x)). The ALU has no
// reciprocal, so 1/y is e^(−ln y): for x ≪ 0, e^(−kx) overflows to +Inf
// and the result is e^(−Inf) = 0, as it should be; for x ≫ 0, y rounds to 1
// and the result to 1.
func sigmoidOps(k float32) []selfOp {
	return []selfOp{{isa.AluMul, -k}, {op: isa.AluExp}, {isa.AluAdd, 1}, {op: isa.AluLog}, {isa.AluMul, -1}, {op: isa.AluExp}}
}

// hardSigmoidOps are the operations of max(0, min(1, α·x + β)).
func hardSigmoidOps(alpha, beta float32) []selfOp {
	return []selfOp{{isa.AluMul, alpha}, {isa.AluAdd, beta}, {isa.AluMax, 0}, {isa.AluMin, 1}}
}

// opSteps appends ops to l's steps on its accumulator.
func (c *compiler) opSteps(l *layer, ops []selfOp) error {
	for _, op := range ops {
		if err := c.opStep(l, op); err != nil {
			return err
		}
	}
	return nil
}
