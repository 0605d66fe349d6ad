package alidnn

import (
	"errors"
	"fmt"
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// ErrUnsupported is wrapped by errors for models the compiler cannot map to
// the engine: an operator, attribute or shape it does not handle. The
// message names the node.
var ErrUnsupported = errors.New("unsupported")

// Option configures Compile.
type Option func(*options)

type options struct {
	consts map[string]*onnx.Tensor
	int8   bool
	ranges map[string]float32
}

// WithConstants binds graph inputs to values known at compile time, as a
// deployed model freezes its weights. ONNX backend tests pass weights as
// inputs; binding them lets the compiler lay them out and upload them once.
func WithConstants(ts ...*onnx.Tensor) Option {
	return func(o *options) {
		if o.consts == nil {
			o.consts = map[string]*onnx.Tensor{}
		}
		for _, t := range ts {
			o.consts[t.Name] = t
		}
	}
}

// withRanges switches fp32 GEMM layers to int8 with the calibrated ranges
// (max |x| per value name); Quantize measures them.
func withRanges(r map[string]float32) Option {
	return func(o *options) { o.int8, o.ranges = true, r }
}

// compiler holds the state of one compilation.
type compiler struct {
	opts    options
	g       *onnx.Graph
	vals    map[string]*value
	uses    map[string]int
	outputs map[string]bool
	layers  []*layer
	inputs  []*value

	opsetVer int64
}

// Compile translates an ONNX model into an engine program.
func Compile(m *onnx.Model, opts ...Option) (*Program, error) {
	c := newCompiler(m, opts)
	if err := c.build(); err != nil {
		return nil, err
	}
	return c.emit()
}

func newCompiler(m *onnx.Model, opts []Option) *compiler {
	c := &compiler{g: m.Graph, vals: map[string]*value{}, uses: map[string]int{}, outputs: map[string]bool{}, opsetVer: m.Opset("")}
	for _, o := range opts {
		o(&c.opts)
	}
	return c
}

func (c *compiler) build() error {
	g := c.g
	for _, t := range g.Initializers {
		v, err := fromTensor(t)
		if err != nil {
			return fmt.Errorf("initializer: %w", err)
		}
		c.vals[t.Name] = v
	}
	for _, n := range g.Nodes {
		for _, in := range n.Inputs {
			if in != "" {
				c.uses[in]++
			}
		}
	}
	for _, o := range g.Outputs {
		c.uses[o.Name]++
		c.outputs[o.Name] = true
	}
	for _, in := range g.Inputs {
		if _, ok := c.vals[in.Name]; ok {
			continue // an initializer listed as input (IR < 4)
		}
		if t, ok := c.opts.consts[in.Name]; ok {
			v, err := fromTensor(t)
			if err != nil {
				return fmt.Errorf("input %q: %w", in.Name, err)
			}
			v.name = in.Name
			c.vals[in.Name] = v
			continue
		}
		shape := make([]int, len(in.Dims))
		for k, d := range in.Dims {
			if d.Value <= 0 {
				return fmt.Errorf("input %q: dimension %d is %q: %w: inputs need static shapes", in.Name, k, d.Param, ErrUnsupported)
			}
			shape[k] = int(d.Value)
		}
		v := &value{name: in.Name, shape: shape, typ: in.ElemType, input: true}
		switch in.ElemType {
		case onnx.Float:
			v.elem = f32
		case onnx.Uint8, onnx.Int8:
			v.elem = i8
		case onnx.Int32:
			v.elem = i32
		default:
			return fmt.Errorf("input %q: element type %v: %w", in.Name, in.ElemType, ErrUnsupported)
		}
		c.vals[in.Name] = v
		c.inputs = append(c.inputs, v)
	}
	for k, n := range g.Nodes {
		if err := c.node(n); err != nil {
			return fmt.Errorf("node %d (%s %q): %w", k, n.OpType, n.Name, err)
		}
	}
	for _, o := range g.Outputs {
		v, ok := c.vals[o.Name]
		if !ok {
			return fmt.Errorf("graph output %q is never computed", o.Name)
		}
		if v.isConst {
			continue
		}
		if v.host != nil && v.host.op == padOp {
			return fmt.Errorf("graph output %q is a %s: %w", o.Name, padOp, ErrUnsupported)
		}
		if err := c.settle(v, false); err != nil {
			return err
		}
		if v.host != nil {
			if err := c.settle(v.host.src, false); err != nil {
				return err
			}
		}
		if err := c.materialize(v); err != nil {
			return fmt.Errorf("graph output %q: %w", o.Name, err)
		}
	}
	return nil
}

// in returns input k of n, nil if omitted.
func (c *compiler) in(n *onnx.Node, k int) (*value, error) {
	if k >= len(n.Inputs) || n.Inputs[k] == "" {
		return nil, nil
	}
	v, ok := c.vals[n.Inputs[k]]
	if !ok {
		return nil, fmt.Errorf("input %q is not defined before use", n.Inputs[k])
	}
	return v, nil
}

func (c *compiler) need(n *onnx.Node, k int) (*value, error) {
	v, err := c.in(n, k)
	if err == nil && v == nil {
		err = fmt.Errorf("input %d is required", k)
	}
	return v, err
}

// needConst returns input k, which must be a compile-time constant.
func (c *compiler) needConst(n *onnx.Node, k int, what string) (*value, error) {
	v, err := c.need(n, k)
	if err != nil {
		return nil, err
	}
	if !v.isConst {
		return nil, fmt.Errorf("%s (%q) must be a constant (an initializer, or bound with WithConstants): %w", what, v.name, ErrUnsupported)
	}
	return v, nil
}

func (c *compiler) set(n *onnx.Node, k int, v *value) {
	v.name = n.Outputs[k]
	v.uses = c.uses[v.name]
	c.vals[v.name] = v
}

func (c *compiler) node(n *onnx.Node) error {
	if n.Domain != "" && n.Domain != "ai.onnx" {
		return fmt.Errorf("operator domain %q: %w", n.Domain, ErrUnsupported)
	}
	allConst := true
	for k := range n.Inputs {
		v, err := c.in(n, k)
		if err != nil {
			return err
		}
		if v != nil && !v.isConst {
			allConst = false
		}
	}
	if allConst || n.OpType == "Shape" {
		if done, err := c.fold(n); done || err != nil {
			return err
		}
	}
	// Per-tensor element-wise operators after a Reshape work on the
	// reshaped tensor's storage and reshape their result.
	if elementwise[n.OpType] && len(n.Inputs) > 0 {
		if x := c.vals[n.Inputs[0]]; x != nil && x.alias != nil && !eqInts(x.shape, x.root().shape) {
			c.vals[n.Inputs[0]] = x.root()
			err := c.dispatch(n)
			c.vals[n.Inputs[0]] = x
			if err != nil {
				return err
			}
			y := c.vals[n.Outputs[0]]
			c.vals[n.Outputs[0]] = &value{name: y.name, shape: x.shape, typ: y.typ, alias: y, uses: y.uses}
			return nil
		}
	}
	return c.dispatch(n)
}

// elementwise lists the operators that may run on a reshaped tensor's
// storage.
var elementwise = map[string]bool{"Relu": true, "QuantizeLinear": true, "DequantizeLinear": true, "Cast": true,
	"Clip": true, "LeakyRelu": true, "HardSigmoid": true, "HardSwish": true}

func (c *compiler) dispatch(n *onnx.Node) error {
	switch n.OpType {
	case "Identity", "Dropout":
		x, err := c.need(n, 0)
		if err != nil {
			return err
		}
		c.set(n, 0, &value{shape: x.shape, typ: x.typ, alias: x.root(), isConst: false})
		return c.dropoutMask(n, x)
	case "Flatten", "Reshape", "Squeeze", "Unsqueeze":
		return c.reshape(n)
	case "Transpose":
		return c.transposeNode(n)
	case "Conv", "ConvInteger", "QLinearConv":
		m, err := c.unpad(n)
		if err != nil {
			return err
		}
		return c.convNode(m)
	case "Pad":
		return c.padNode(n)
	case "Gemm", "MatMul", "MatMulInteger", "QLinearMatMul":
		return c.matmulNode(n)
	case "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool":
		m, err := c.unpad(n)
		if err != nil {
			return err
		}
		return c.poolNode(m)
	case "Relu":
		x, err := c.need(n, 0)
		if err != nil {
			return err
		}
		l, err := c.open(x)
		if err != nil {
			return err
		}
		l.steps = append(l.steps, step{kind: sRelu, fp: l.accFP})
		c.set(n, 0, c.rename(l, x.typ))
		return nil
	case "Add", "Sub", "Mul", "Div":
		return c.binary(n)
	case "Sum", "Max", "Min":
		return c.sum(n)
	case "Clip", "LeakyRelu", "HardSigmoid", "HardSwish":
		return c.activationNode(n)
	case "Concat":
		return c.concat(n)
	case "BatchNormalization":
		return c.batchNorm(n)
	case "Cast":
		return c.cast(n)
	case "QuantizeLinear":
		return c.quantizeNode(n)
	case "DequantizeLinear":
		return c.dequantizeNode(n)
	case "Softmax":
		x, err := c.need(n, 0)
		if err != nil {
			return err
		}
		axis, err := n.Int("axis", -1)
		if err != nil {
			return err
		}
		if c.opset() < 13 {
			if axis == -1 {
				axis = 1
			}
		}
		a, err := normAxis(int(axis), len(x.shape))
		if err != nil {
			return err
		}
		c.set(n, 0, &value{shape: x.shape, typ: x.typ, host: &hostOp{op: "Softmax", axis: a, src: x}})
		if c.opset() < 13 {
			c.vals[n.Outputs[0]].host.op = "Softmax-1" // flattens from axis
		}
		return nil
	}
	return fmt.Errorf("operator %s: %w", n.OpType, ErrUnsupported)
}

// dropoutMask sets Dropout's optional mask output: in inference every
// element is kept. A training_mode input that is not a constant false is
// refused, since dropping at random is no inference.
func (c *compiler) dropoutMask(n *onnx.Node, x *value) error {
	if n.OpType != "Dropout" {
		return nil
	}
	if t, err := c.in(n, 2); err != nil {
		return err
	} else if t != nil && (!t.isConst || len(t.ints()) != 1 || t.ints()[0] != 0) {
		return fmt.Errorf("Dropout in training mode (training_mode %q is not a constant false): %w", t.name, ErrUnsupported)
	}
	if len(n.Outputs) < 2 || n.Outputs[1] == "" {
		return nil
	}
	total := 1
	for _, d := range x.shape {
		total *= d
	}
	ones := make([]int64, total)
	for k := range ones {
		ones[k] = 1
	}
	m := constInt("", onnx.Bool, x.shape, ones)
	c.set(n, 1, m)
	m.isConst = true
	return nil
}

func (c *compiler) opset() int64 { return c.opsetVer }

func normAxis(a, rank int) (int, error) {
	if a < 0 {
		a += rank
	}
	if a < 0 || a >= max(rank, 1) {
		return 0, fmt.Errorf("axis %d out of range for rank %d", a, rank)
	}
	return a, nil
}

// device checks that v can feed the engine.
func (c *compiler) device(v *value) (*value, error) {
	if v.host != nil {
		return nil, fmt.Errorf("%s is computed on the host (%s) and cannot feed the engine: %w", v, v.host.op, ErrUnsupported)
	}
	return v, nil
}

// open returns a layer whose accumulator holds x and whose steps may be
// extended: x's own layer when nothing else reads x, else a new move layer.
func (c *compiler) open(x *value) (*layer, error) {
	if x.isConst {
		return nil, fmt.Errorf("%s: element-wise operator on constants only was not folded: %w", x, ErrUnsupported)
	}
	if _, err := c.device(x); err != nil {
		return nil, err
	}
	if l := x.layer; l != nil && l.out == x && x.uses == 1 && !c.outputs[x.name] {
		return l, nil
	}
	if err := c.settle(x, false); err != nil {
		return nil, err
	}
	r := x.root()
	if x.alias != nil && !eqInts(x.shape, r.shape) {
		return nil, fmt.Errorf("%s: element-wise operator after a reshape: %w", x, ErrUnsupported)
	}
	if err := c.materialize(r); err != nil {
		return nil, err
	}
	l := &layer{kind: lMove, in: r, accFP: r.el() == f32}
	if r.el() == i8 {
		l.acc8 = true
	}
	out := &value{shape: r.shape, typ: r.typ, lay: r.lay, layer: l, q: r.q}
	l.out = out
	c.layers = append(c.layers, l)
	return l, nil
}

// rename makes the open layer's output a new value (the fused operator's
// output) of logical type typ.
func (c *compiler) rename(l *layer, typ onnx.DataType) *value {
	old := l.out
	v := &value{shape: old.shape, typ: typ, lay: old.lay, layer: l, q: old.q}
	l.out = v
	return v
}

// materialize gives a device value a layout, if it has none yet (graph
// inputs take the layout of their first consumer).
func (c *compiler) materialize(v *value) error {
	if v.host != nil {
		return nil
	}
	r := v.root()
	if r.lay.shape == nil {
		r.lay = convLayout(r.shape)
	}
	return nil
}

// perLane reports whether a constant of shape cs, broadcast against the
// tensor laid out as l, varies only along l's lane axis (or not at all), and
// returns its values per lane.
func perLane(l layout, cs []int, vals []float32) ([]float32, bool) {
	r := len(l.shape)
	if len(cs) > r {
		return nil, false
	}
	c := l.c()
	out := make([]float32, c)
	for k := len(cs) - 1; k >= 0; k-- {
		a := r - len(cs) + k
		if cs[k] != 1 && a != l.lane {
			return nil, false
		}
	}
	n := 1
	for _, d := range cs {
		n *= d
	}
	if n == 1 {
		for k := range out {
			out[k] = vals[0]
		}
		return out, true
	}
	if l.lane < 0 {
		return nil, false
	}
	for k := range out {
		out[k] = vals[k]
	}
	return out, true
}

// expand lays a constant out at the full shape of l (for element-wise
// operators whose constant operand varies along rows).
func expand(l layout, cv *value) (*value, error) {
	if _, err := broadcastShape(l.shape, cv.shape); err != nil {
		return nil, err
	}
	idx := broadcastIndex(l.shape, cv.shape)
	f := cv.floats()
	full := make([]float32, len(idx))
	for k, i := range idx {
		full[k] = f[i]
	}
	v := constFloat(cv.name, l.shape, full)
	v.lay = l
	v.elem = f32
	return v, nil
}

func (c *compiler) binary(n *onnx.Node) error {
	if len(n.Inputs) != 2 {
		if (n.OpType == "Sum" || n.OpType == "Max" || n.OpType == "Min") && len(n.Inputs) == 1 {
			x, err := c.need(n, 0)
			if err != nil {
				return err
			}
			c.set(n, 0, &value{shape: x.shape, typ: x.typ, alias: x.root()})
			return nil
		}
		return fmt.Errorf("%s with %d inputs: %w", n.OpType, len(n.Inputs), ErrUnsupported)
	}
	a, err := c.need(n, 0)
	if err != nil {
		return err
	}
	b, err := c.need(n, 1)
	if err != nil {
		return err
	}
	shape, err := broadcastShape(a.shape, b.shape)
	if err != nil {
		return err
	}
	op := n.OpType
	if op == "Sum" {
		op = "Add"
	}
	// Constant operand: one row per channel, or a full tensor.
	commutes := op == "Add" || op == "Mul" || op == "Max" || op == "Min"
	if a.isConst && !b.isConst && commutes {
		a, b = b, a
	}
	if b.isConst {
		if !eqInts(shape, a.shape) {
			return fmt.Errorf("%s broadcasts the tensor %v to %v: %w", op, a.shape, shape, ErrUnsupported)
		}
		vals := b.floats()
		switch op {
		case "Sub":
			vals = mapF(vals, func(x float32) float32 { return -x })
			op = "Add"
		case "Div":
			vals = mapF(vals, func(x float32) float32 { return 1 / x })
			op = "Mul"
		}
		if a.isConst {
			return fmt.Errorf("%s on constants was not folded: %w", op, ErrUnsupported)
		}
		l, err := c.open(a)
		if err != nil {
			return err
		}
		kind, tkind := rowKinds[op][0], rowKinds[op][1]
		if row, ok := perLane(l.out.lay, b.shape, vals); ok {
			if err := c.rowStep(l, kind, row); err != nil {
				return err
			}
		} else {
			if !l.accFP {
				return fmt.Errorf("%s with a full-size constant on an integer tensor: %w", op, ErrUnsupported)
			}
			t, err := expand(l.out.lay, constFloat(b.name, b.shape, vals))
			if err != nil {
				return err
			}
			l.steps = append(l.steps, step{kind: tkind, fp: true, t: t})
		}
		c.set(n, 0, c.rename(l, a.typ))
		return nil
	}
	if !commutes {
		return fmt.Errorf("%s of two tensors: %w", op, ErrUnsupported)
	}
	// Two tensors: the same shape, or a graph input broadcast on upload.
	if !eqInts(a.shape, shape) {
		a, b = b, a
	}
	if !eqInts(a.shape, shape) {
		return fmt.Errorf("%s broadcasts both operands: %w", op, ErrUnsupported)
	}
	if !eqInts(b.shape, shape) {
		if !b.input || b.lay.shape != nil {
			return fmt.Errorf("%s broadcasts the computed tensor %s: %w", op, b, ErrUnsupported)
		}
		b.bcast = b.shape
		b.shape = shape
	}
	l, err := c.open(a)
	if err != nil {
		return err
	}
	if !l.accFP {
		return fmt.Errorf("%s of integer tensors: %w", op, ErrUnsupported)
	}
	b = b.root()
	if b.lay.shape == nil {
		b.lay = l.out.lay
	}
	if !b.lay.equal(l.out.lay) {
		return fmt.Errorf("%s: operands %s and %s are laid out differently on the device: %w", op, a, b, ErrUnsupported)
	}
	if b.el() != f32 {
		return fmt.Errorf("%s: operand %s is %v on the device, want fp32: %w", op, b, b.el(), ErrUnsupported)
	}
	l.steps = append(l.steps, step{kind: rowKinds[op][1], fp: true, t: b})
	c.set(n, 0, c.rename(l, a.typ))
	return nil
}

// rowKinds are the steps of a binary operator with a per-channel constant
// and with a tensor.
var rowKinds = map[string][2]stepKind{
	"Add": {sAddRow, sAddTensor}, "Mul": {sMulRow, sMulTensor}, "Max": {sMaxRow, sMaxTensor}, "Min": {sMinRow, sMinTensor},
}

// sum compiles Sum, Max and Min as a chain of binary operators (constant
// pairs folded), fused into one layer when the operands allow.
func (c *compiler) sum(n *onnx.Node) error {
	if len(n.Inputs) <= 2 {
		return c.binary(n)
	}
	acc := n.Inputs[0]
	for k := 1; k < len(n.Inputs); k++ {
		out := n.Outputs[0]
		if k < len(n.Inputs)-1 {
			out = fmt.Sprintf("%s/sum%d", n.Outputs[0], k)
			c.uses[out] = 1
		}
		op := n.OpType
		if op == "Sum" {
			op = "Add"
		}
		if err := c.node(&onnx.Node{Name: n.Name, OpType: op, Inputs: []string{acc, n.Inputs[k]}, Outputs: []string{out}}); err != nil {
			return err
		}
		acc = out
	}
	return nil
}

// concat compiles a Concat of computed tensors along their lane axis: each
// input is moved into its channel blocks of the output, so every input but
// the last must have a multiple of 16 channels.
func (c *compiler) concat(n *onnx.Node) error {
	axis, err := n.Int("axis", 0)
	if err != nil {
		return err
	}
	var ins []*value
	for k := range n.Inputs {
		x, err := c.need(n, k)
		if err != nil {
			return err
		}
		if x.isConst {
			return fmt.Errorf("Concat of constants and computed tensors: %w", ErrUnsupported)
		}
		ins = append(ins, x)
	}
	shape := append([]int(nil), ins[0].shape...)
	a, err := normAxis(int(axis), len(shape))
	if err != nil {
		return err
	}
	shape[a] = 0
	for _, x := range ins {
		if len(x.shape) != len(shape) {
			return fmt.Errorf("Concat of ranks %d and %d", len(shape), len(x.shape))
		}
		shape[a] += x.shape[a]
	}
	lay := convLayout(shape)
	if a != lay.lane {
		return fmt.Errorf("Concat along axis %d (the engine concatenates channels, axis %d): %w", a, lay.lane, ErrUnsupported)
	}
	out := &value{shape: shape, typ: ins[0].typ, lay: lay}
	off := 0
	for k, x := range ins {
		if err := c.settle(x, false); err != nil {
			return err
		}
		r := x.root()
		if r.lay.shape == nil {
			r.lay = convLayout(r.shape)
		}
		if !eqInts(x.shape, r.shape) || !r.lay.equal(convLayout(r.shape)) {
			return fmt.Errorf("Concat input %s after a reshape: %w", x, ErrUnsupported)
		}
		if k < len(ins)-1 && x.shape[a]%lanes != 0 {
			return fmt.Errorf("Concat input %s has %d channels, not a multiple of %d: %w", x, x.shape[a], lanes, ErrUnsupported)
		}
		el := r.el()
		if k == 0 {
			out.elem, out.q = el, r.q
		} else if el != out.elem || r.q != out.q {
			return fmt.Errorf("Concat of %v and %v tensors (or different quantisation): %w", out.elem, el, ErrUnsupported)
		}
		l := &layer{kind: lMove, in: r, out: out, outBlock: off / lanes, accFP: el == f32, acc8: el == i8}
		c.layers = append(c.layers, l)
		off += x.shape[a]
	}
	c.set(n, 0, out)
	return nil
}

func mapF(v []float32, f func(float32) float32) []float32 {
	out := make([]float32, len(v))
	for k, x := range v {
		out[k] = f(x)
	}
	return out
}

// rowStep appends a per-channel constant add or multiply, in the
// accumulator's domain.
func (c *compiler) rowStep(l *layer, kind stepKind, row []float32) error {
	if l.accFP {
		l.steps = append(l.steps, step{kind: kind, fp: true, rowF: row})
		return nil
	}
	if l.acc8 || l.accScale == nil || kind == sMulRow {
		return fmt.Errorf("%s by a float constant on an integer tensor: %w", map[stepKind]string{sAddRow: "add", sMulRow: "multiply", sMinRow: "min", sMaxRow: "max"}[kind], ErrUnsupported)
	}
	ints := make([]int64, len(row))
	for k, x := range row {
		ints[k] = int64(math.Round(float64(x) / float64(l.accScale[k])))
	}
	l.steps = append(l.steps, step{kind: kind, rowI: ints})
	return nil
}

func (c *compiler) batchNorm(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	var p [4][]float32
	for k, what := range []string{"scale", "B", "mean", "var"} {
		v, err := c.needConst(n, k+1, what)
		if err != nil {
			return err
		}
		p[k] = v.floats()
	}
	eps, err := n.Float("epsilon", 1e-5)
	if err != nil {
		return err
	}
	if len(x.shape) < 2 {
		return fmt.Errorf("input rank %d: %w", len(x.shape), ErrUnsupported)
	}
	ch := x.shape[1]
	for k := range p {
		if len(p[k]) != ch {
			return fmt.Errorf("parameter %d has %d values for %d channels", k+1, len(p[k]), ch)
		}
	}
	a := make([]float32, ch)
	b := make([]float32, ch)
	for i := range ch {
		a[i] = p[0][i] / float32(math.Sqrt(float64(p[3][i])+float64(eps)))
		b[i] = p[1][i] - p[2][i]*a[i]
	}
	// Fold into the preceding fp32 convolution when it is ours alone.
	if l := x.layer; l != nil && l.out == x && x.uses == 1 && !c.outputs[x.name] && l.kind == lGemm && l.conv.fp && !l.conv.batched && x.lay.lane == 1 {
		fold := true
		for _, s := range l.steps {
			if s.kind != sAddRow {
				fold = false
			}
		}
		if fold {
			cv := l.conv
			per := len(cv.wF) / cv.oc
			for o := range cv.oc {
				for k := range per {
					cv.wF[o*per+k] *= a[o]
				}
			}
			for k := range l.steps {
				l.steps[k].rowF = mapIdx(l.steps[k].rowF, func(o int, v float32) float32 { return v * a[o] })
			}
			l.steps = append(l.steps, step{kind: sAddRow, fp: true, rowF: b})
			c.set(n, 0, c.rename(l, x.typ))
			return nil
		}
	}
	l, err := c.open(x)
	if err != nil {
		return err
	}
	if l.out.lay.lane != 1 || !l.accFP {
		return fmt.Errorf("batch normalization of %s: %w", x, ErrUnsupported)
	}
	l.steps = append(l.steps, step{kind: sMulRow, fp: true, rowF: a}, step{kind: sAddRow, fp: true, rowF: b})
	c.set(n, 0, c.rename(l, x.typ))
	return nil
}

func mapIdx(v []float32, f func(int, float32) float32) []float32 {
	out := make([]float32, len(v))
	for k, x := range v {
		out[k] = f(k, x)
	}
	return out
}

func (c *compiler) cast(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	to, err := n.Int("to", 0)
	if err != nil {
		return err
	}
	t := onnx.DataType(to)
	switch {
	case t == x.typ:
		c.set(n, 0, &value{shape: x.shape, typ: x.typ, alias: x.root()})
		return nil
	case t == onnx.Float && (x.typ == onnx.Int32 || x.typ == onnx.Int8 || x.typ == onnx.Uint8):
		l, err := c.open(x)
		if err != nil {
			return err
		}
		if l.accFP {
			return fmt.Errorf("cast of %s: accumulator already fp32", x)
		}
		zp := int32(0)
		if x.typ == onnx.Uint8 {
			zp = -128 // the device holds uint8 values shifted by −128
		}
		l.steps = append(l.steps, step{kind: sDequantize, rowF: fill(l.out.lay.c(), 1), zp: zp})
		l.accFP, l.acc8 = true, false
		c.set(n, 0, c.rename(l, onnx.Float))
		return nil
	}
	return fmt.Errorf("Cast from %v to %v: %w", x.typ, t, ErrUnsupported)
}

func fill(n int, v float32) []float32 {
	out := make([]float32, n)
	for k := range out {
		out[k] = v
	}
	return out
}

// quantParams reads a (scale, zero point) pair of inputs k, k+1 for a tensor
// laid out as l: per tensor, or per channel along the lane axis.
func (c *compiler) quantParams(n *onnx.Node, k int, l layout, axisAttr bool) (scales []float32, zp []int64, typ onnx.DataType, err error) {
	sv, err := c.needConst(n, k, "scale")
	if err != nil {
		return nil, nil, 0, err
	}
	typ = onnx.Uint8
	zv, err := c.in(n, k+1)
	if err != nil {
		return nil, nil, 0, err
	}
	if zv != nil && !zv.isConst {
		return nil, nil, 0, fmt.Errorf("zero point %q must be a constant: %w", zv.name, ErrUnsupported)
	}
	s := sv.floats()
	var z []int64
	if zv != nil {
		typ = zv.typ
		z = zv.ints()
	} else {
		z = make([]int64, len(s))
	}
	if len(s) != len(z) {
		return nil, nil, 0, fmt.Errorf("%d scales and %d zero points", len(s), len(z))
	}
	if len(s) > 1 {
		axis := int64(1)
		if axisAttr {
			if axis, err = n.Int("axis", 1); err != nil {
				return nil, nil, 0, err
			}
		}
		a, err := normAxis(int(axis), len(l.shape))
		if err != nil {
			return nil, nil, 0, err
		}
		if a != l.lane || len(s) != l.c() {
			return nil, nil, 0, fmt.Errorf("per-axis quantisation along axis %d: %w", a, ErrUnsupported)
		}
		return s, z, typ, nil
	}
	return fill(max(l.c(), 1), s[0]), fillI(max(l.c(), 1), z[0]), typ, nil
}

func fillI(n int, v int64) []int64 {
	out := make([]int64, n)
	for k := range out {
		out[k] = v
	}
	return out
}

// devZP converts a logical zero point to the device's int8 domain.
func devZP(z int64, typ onnx.DataType) int32 {
	if typ == onnx.Uint8 {
		return int32(z - 128)
	}
	return int32(z)
}

func uniformZP(z []int64) (int64, bool) {
	for _, v := range z {
		if v != z[0] {
			return 0, false
		}
	}
	return z[0], true
}

func (c *compiler) quantizeNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	l, err := c.open(x)
	if err != nil {
		return err
	}
	if !l.accFP {
		return fmt.Errorf("QuantizeLinear of a non-float tensor %s: %w", x, ErrUnsupported)
	}
	s, z, typ, err := c.quantParams(n, 1, l.out.lay, true)
	if err != nil {
		return err
	}
	z0, ok := uniformZP(z)
	if !ok {
		return fmt.Errorf("per-channel zero points: %w", ErrUnsupported)
	}
	if typ != onnx.Uint8 && typ != onnx.Int8 {
		return fmt.Errorf("QuantizeLinear to %v: %w", typ, ErrUnsupported)
	}
	zp := devZP(z0, typ)
	l.steps = append(l.steps, step{kind: sQuantize, fp: true, rowF: s, zp: zp})
	l.accFP, l.acc8 = false, true
	v := c.rename(l, typ)
	v.q = quant{scale: s[0], zp: zp}
	c.set(n, 0, v)
	return nil
}

func (c *compiler) dequantizeNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	if x.input && x.lay.shape == nil {
		x.lay = convLayout(x.shape)
	}
	l, err := c.open(x)
	if err != nil {
		return err
	}
	if l.accFP {
		return fmt.Errorf("DequantizeLinear of a float tensor: %w", ErrUnsupported)
	}
	s, z, typ, err := c.quantParams(n, 1, l.out.lay, true)
	if err != nil {
		return err
	}
	z0, ok := uniformZP(z)
	if !ok {
		return fmt.Errorf("per-channel zero points: %w", ErrUnsupported)
	}
	if x.typ == onnx.Int32 {
		typ = onnx.Int32
	}
	zp := devZP(z0, typ)
	if typ == onnx.Int32 {
		if z0 < -1<<15 || z0 >= 1<<15 {
			return fmt.Errorf("int32 zero point %d: %w", z0, ErrUnsupported)
		}
		zp = int32(z0)
	}
	l.steps = append(l.steps, step{kind: sDequantize, rowF: s, zp: zp})
	l.accFP, l.acc8 = true, false
	c.set(n, 0, c.rename(l, onnx.Float))
	return nil
}

func (c *compiler) reshape(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	shape, err := c.reshapeTo(n, x.shape)
	if err != nil {
		return err
	}
	total := 1
	for _, d := range shape {
		total *= d
	}
	if total != x.len() {
		return fmt.Errorf("reshape of %v (%d values) to %v", x.shape, x.len(), shape)
	}
	c.set(n, 0, &value{shape: shape, typ: x.typ, alias: x.root(), q: x.root().q})
	return nil
}
