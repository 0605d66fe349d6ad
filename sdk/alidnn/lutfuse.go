package alidnn

// Functions of one variable as a table in int8 models: GELU, SiLU, tanh,
// sigmoid, HardSwish — a chain of element-wise operators between an int8
// GEMM and the int8 GEMM that reads its result — become a requant to the
// chain input's scale and one ALU lut (ISA.md), two passes where the ALU
// would take dozens (GELU's erf is ≈ 30). Arm's Vela and the Xilinx DPU
// compiler do the same for int8 activations. The table is the chain
// evaluated by the compiler's own constant folding on the 256 values an
// int8 input can hold, quantised to the output's calibrated scale.

import (
	"fmt"
	"math"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// lutOps are the element-wise operators a chain may hold.
var lutOps = map[string]bool{
	"Add": true, "Sub": true, "Mul": true, "Div": true, "Pow": true, "Erf": true, "Tanh": true,
	"Sigmoid": true, "HardSigmoid": true, "HardSwish": true, "Exp": true, "Log": true, "Sqrt": true,
	"Softplus": true, "Abs": true, "Neg": true, "Relu": true, "Clip": true, "LeakyRelu": true,
	"Gelu": true, "Swish": true, "Mish": true, "Reciprocal": true, "Identity": true,
}

// exactOps are the chain operators the integer accumulator applies
// exactly without a table; a chain of only these is left to them.
var exactOps = map[string]bool{"Relu": true, "Clip": true, "Identity": true}

// lutChain is a chain found at its first node: the nodes in graph order,
// its input x and its output y.
type lutChain struct {
	nodes []*onnx.Node
	x, y  string
}

// lutNode compiles the chain starting at n as a table when the model is
// quantised and the chain qualifies (see chainAt); it reports whether it
// did. The chain's other nodes are then skipped as the loop reaches them.
func (c *compiler) lutNode(n *onnx.Node) (bool, error) {
	if c.lutDone[n] {
		return true, nil
	}
	if !c.opts.int8 && !c.opts.chainInputs || c.keepFP32 || !lutOps[n.OpType] {
		return false, nil
	}
	ch, ok := c.chainAt(n)
	if !ok {
		return false, nil
	}
	if c.opts.chainInputs {
		return false, c.measureChainInput(ch)
	}
	x := c.vals[ch.x]
	rx, okx := c.opts.ranges[ch.x]
	ry, oky := c.opts.ranges[ch.y]
	if !okx || !oky || rx <= 0 || ry <= 0 {
		return false, nil
	}
	sx, sy := rx/127, ry/127
	table, err := c.chainTable(ch, sx, sy)
	if err != nil {
		return false, nil // a chain the folder cannot evaluate runs as it is
	}
	l := x.layer
	l.ptq = false
	c.requant(l, sx, 0)
	l.steps = append(l.steps, step{kind: sLut, lut: table})
	v := c.rename(l, onnx.Float)
	v.q = quant{scale: sy}
	last := ch.nodes[len(ch.nodes)-1]
	c.set(last, slices.Index(last.Outputs, ch.y), v)
	if c.lutDone == nil {
		c.lutDone = map[*onnx.Node]bool{}
	}
	for _, m := range ch.nodes {
		c.lutDone[m] = true
	}
	return true, nil
}

// chainAt finds the chain that starts at n: the nodes after it in graph
// order whose operators are in lutOps, whose constant inputs are scalars
// and whose other inputs are x (n's one computed input) or outputs of the
// chain. It qualifies when x is the unsettled output of an int8 GEMM layer
// (see quantizeGemm) read only by the chain, exactly one of the chain's
// outputs (y) is read outside it, only by GEMMs of constant weights as
// their input, and the chain is more than exact integer operations.
func (c *compiler) chainAt(n *onnx.Node) (lutChain, bool) {
	var ch lutChain
	x, ok := c.chainInput(n, "")
	if !ok {
		return ch, false
	}
	xv := c.vals[x]
	// Calibration compiles in fp32: there any GEMM's output qualifies.
	if l := xv.layer; l == nil || l.out != xv || l.kind != lGemm || !l.ptq && !c.opts.chainInputs || c.outputs[x] {
		return ch, false
	}
	ch.x = x
	made := map[string]bool{}
	start := slices.Index(c.g.Nodes, n)
	if start < 0 {
		return ch, false // a node of an operator's expansion (see runSeq)
	}
	for _, m := range c.g.Nodes[start:] {
		if m != n && (!lutOps[m.OpType] || !c.readsChain(m, x, made)) {
			continue
		}
		if c.opts.floatNodes[m.Name] {
			return ch, false
		}
		ch.nodes = append(ch.nodes, m)
		for _, o := range m.Outputs {
			made[o] = true
		}
	}
	inChain := func(m *onnx.Node) bool { return slices.Contains(ch.nodes, m) }
	for _, m := range c.consumers(x) {
		if !inChain(m) {
			return ch, false
		}
	}
	exact := true
	for _, m := range ch.nodes {
		exact = exact && exactOps[m.OpType]
		for _, o := range m.Outputs {
			outside := c.outputs[o]
			for _, r := range c.consumers(o) {
				outside = outside || !inChain(r)
			}
			if !outside {
				continue
			}
			if ch.y != "" || !c.int8Readers(o) {
				return ch, false
			}
			ch.y = o
		}
	}
	return ch, ch.y != "" && !exact
}

// chainInput returns the one computed input of n, which must be x if x is
// not empty, when every other input is a scalar constant.
func (c *compiler) chainInput(n *onnx.Node, x string) (string, bool) {
	in := ""
	for _, name := range n.Inputs {
		if name == "" {
			continue
		}
		v := c.vals[name]
		switch {
		case v != nil && v.isConst:
			if v.len() != 1 {
				return "", false
			}
		case in == "" || in == name:
			in = name
		default:
			return "", false
		}
	}
	return in, in != "" && (x == "" || in == x)
}

// readsChain reports whether n reads x or a chain output in made, every
// other input a scalar constant.
func (c *compiler) readsChain(n *onnx.Node, x string, made map[string]bool) bool {
	reads := false
	for _, name := range n.Inputs {
		if name == "" {
			continue
		}
		if name == x || made[name] {
			reads = true
			continue
		}
		if v := c.vals[name]; v == nil || !v.isConst || v.len() != 1 {
			return false
		}
	}
	return reads
}

// int8Readers reports whether every reader of name takes it as an int8
// GEMM input: MatMul, Gemm or Conv of constant weights, in int8.
func (c *compiler) int8Readers(name string) bool {
	rs := c.consumers(name)
	for _, m := range rs {
		switch m.OpType {
		case "MatMul", "Gemm", "Conv":
		default:
			return false
		}
		if len(m.Inputs) < 2 || m.Inputs[0] != name || m.Inputs[1] == name || c.opts.floatNodes[m.Name] {
			return false
		}
		if w := c.vals[m.Inputs[1]]; w == nil || !w.isConst {
			return false
		}
	}
	return len(rs) > 0 && !c.outputs[name]
}

// chainTable evaluates ch on the 256 values of an int8 input at scale sx
// and quantises the results to scale sy, as the engine's quantize does
// (half to even, saturating, NaN to 0).
func (c *compiler) chainTable(ch lutChain, sx, sy float32) ([]int8, error) {
	xs := make([]float32, 256)
	for k := range xs {
		xs[k] = float32(k-128) * sx
	}
	sc := newGraphCompiler(c.g, c.opsetVer, nil)
	sc.vals[ch.x] = constFloat(ch.x, []int{len(xs)}, xs)
	for _, m := range ch.nodes {
		for _, in := range m.Inputs {
			if v := c.vals[in]; v != nil && v.isConst {
				sc.vals[in] = v
			}
		}
		if err := sc.node(m); err != nil {
			return nil, err
		}
	}
	yv := sc.vals[ch.y]
	if yv == nil || !yv.isConst || yv.len() != len(xs) {
		return nil, fmt.Errorf("chain %s → %s did not fold to %d values", ch.x, ch.y, len(xs))
	}
	ys := yv.floats()
	table := make([]int8, 256)
	for k := range table {
		q := math.RoundToEven(float64(ys[k] / sy))
		switch {
		case math.IsNaN(q):
			q = 0
		case q > 127:
			q = 127
		case q < -128:
			q = -128
		}
		table[k] = int8(q)
	}
	return table, nil
}

// measureChainInput ends, in the calibration run, the GEMM layer writing
// the input of chain ch, so that its range is measured: the chain's steps
// would otherwise extend that layer, and the int8 compilation needs the
// range as the table's input scale. The chain reads the input from a move
// layer.
func (c *compiler) measureChainInput(ch lutChain) error {
	x := c.vals[ch.x]
	l, err := c.moveLayer(x)
	if err != nil {
		return err
	}
	l.out.name, l.out.uses = x.name, x.uses
	c.vals[ch.x] = l.out
	return nil
}
