package alidnn

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// maxBatch bounds ForBatch: activations grow with it.
const maxBatch = 256

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
	// bounds are the calibrated ranges of the tensors DynamicQuantizeLinear
	// quantises, by name; calibrating says this compilation is a run that
	// measures them (see dynquant.go).
	bounds      map[string]valueRange
	calibrating bool
	// chainInputs says the calibration run measures the inputs of
	// activation chains (see measureChainInputs).
	chainInputs bool
	batch       int
	shapes      map[string][]int
	floatNodes  map[string]bool
}

// ForBatch compiles the model for n samples a run, as TensorRT builds an
// engine for a batch size: each graph input's leading dimension, 1 or
// symbolic in the model, becomes n, and a Reshape whose target keeps a
// literal leading 1 where its input has the n samples keeps n there (the
// exporter's way of writing the batch). Layers whose output is one row
// high — fully connected ones — then load each weight tile once for the
// whole batch, and a Session runs up to n concurrent Runs as one job (see
// Session). Program.Batch records n. A WithShape binding of that
// dimension must be 1 or n.
func ForBatch(n int) Option { return func(o *options) { o.batch = n } }

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

// WithShape binds dimensions the model leaves free (symbolic, as exporters
// write the batch and the sequence length, or unknown) at compile time, as
// trtexec's --shapes and onnxruntime's free-dimension overrides do. name is
// a graph input, dims its whole shape; or the name of a symbolic dimension
// ("batch"), dims its one size, binding it in every input that has it. A
// binding of an input by name wins over a binding of its symbolic
// dimensions; a binding that contradicts a fixed dimension of the model,
// and a name that is neither an input nor a symbolic dimension, are
// errors. Shape arithmetic over the bound dimensions then folds away.
// Repeated, the last binding of a name wins.
func WithShape(name string, dims ...int) Option {
	return func(o *options) {
		if o.shapes == nil {
			o.shapes = map[string][]int{}
		}
		o.shapes[name] = dims
	}
}

// WithFloatNodes keeps the named nodes' matrix products and convolutions
// in fp32 when Quantize compiles the model to int8, as onnxruntime's
// nodes_to_exclude and TensorRT's per-layer precision do: for the few
// layers whose int8 error a model's result cannot absorb (a detector's
// last layers, which draw the boxes). A name no node has is an error.
// Without Quantize it changes nothing.
func WithFloatNodes(names ...string) Option {
	return func(o *options) {
		if o.floatNodes == nil {
			o.floatNodes = map[string]bool{}
		}
		for _, n := range names {
			o.floatNodes[n] = true
		}
	}
}

// checkFloatNodes says which names of WithFloatNodes no node has.
func (c *compiler) checkFloatNodes() error {
	if len(c.opts.floatNodes) == 0 {
		return nil
	}
	names := make(map[string]bool, len(c.g.Nodes))
	for _, n := range c.g.Nodes {
		names[n.Name] = true
	}
	var missing []string
	for n := range c.opts.floatNodes {
		if !names[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("WithFloatNodes: no node named %q in the graph", missing)
	}
	return nil
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
	// emptyInputs are the graph inputs bound to a shape with a 0, folded
	// as empty constants (see empty.go).
	emptyInputs []*value
	// strs are the ids of the STRING constants Equal reads, the start of
	// every run's dictionary (see intern.go).
	strs *dict

	opsetVer int64
	dims     map[string]int // WithShape's bindings of symbolic dimensions
	// readers maps a value's name to the first node that reads it (see
	// consumer).
	readers map[string]*onnx.Node
	// keepFP32, while set, compiles GEMM layers in fp32 in int8 models
	// too (the lane means and sums of layer normalisations and Softmax;
	// see laneReduce).
	keepFP32 bool
	// lutDone are the nodes of chains compiled as tables (see lutNode).
	lutDone map[*onnx.Node]bool
	// lateNorm are the Softmax outputs left unnormalised for the MatMul
	// reading them, by name, with their row sums (see normalizesLater).
	lateNorm map[string]*value
	// reduced names values that a sequence standing for one node reads
	// through element-wise operators of its own into a graph output (a
	// normalisation's statistics): a reduction writing one gives the
	// tensor the graph declares, as for a graph output (see
	// broadcastsSafelyAt).
	reduced map[string]bool
	// passed maps, while calibrating, the input of each DynamicQuantizeLinear
	// passed through to the value whose range is its range (see
	// dynquant.go).
	passed map[string]string
}

// Compile translates an ONNX model into an engine program.
func Compile(m *onnx.Model, opts ...Option) (*Program, error) {
	c := newCompiler(m, opts)
	if c.opts.batch < 0 || c.opts.batch > maxBatch {
		return nil, fmt.Errorf("batch %d outside 1..%d", c.opts.batch, maxBatch)
	}
	if err := c.build(); err != nil {
		return nil, err
	}
	return c.emit()
}

func newCompiler(m *onnx.Model, opts []Option) *compiler {
	return newGraphCompiler(m.Graph, m.Opset(""), opts)
}

// newGraphCompiler is newCompiler of graph g at opset ver: also a scratch
// compiler folding a part of a graph (see chainTable).
func newGraphCompiler(g *onnx.Graph, ver int64, opts []Option) *compiler {
	c := &compiler{g: g, vals: map[string]*value{}, uses: map[string]int{}, outputs: map[string]bool{}, reduced: map[string]bool{}, opsetVer: ver}
	for _, o := range opts {
		o(&c.opts)
	}
	return c
}

// build compiles the graph: initializers and inputs become values, nodes
// layers, and the graph outputs are settled where the host reads them.
func (c *compiler) build() error {
	g := c.g
	if err := c.splitShapes(); err != nil {
		return err
	}
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
	if err := c.checkFloatNodes(); err != nil {
		return err
	}
	for _, o := range g.Outputs {
		c.uses[o.Name]++
		c.outputs[o.Name] = true
	}
	for _, in := range g.Inputs {
		if _, ok := c.vals[in.Name]; ok {
			continue // an initializer listed as input (IR < 4)
		}
		if err := c.graphInput(in); err != nil {
			return err
		}
	}
	for k, n := range g.Nodes {
		if err := c.node(n); err != nil {
			return fmt.Errorf("node %d (%s %q): %w", k, n.OpType, n.Name, err)
		}
	}
	for _, o := range g.Outputs {
		if err := c.graphOutput(o.Name); err != nil {
			return err
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

// needPair returns a binary node's two inputs.
func (c *compiler) needPair(n *onnx.Node) (a, b *value, err error) {
	if a, err = c.need(n, 0); err != nil {
		return nil, nil, err
	}
	b, err = c.need(n, 1)
	return a, b, err
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
	if err := c.checkStrings(n); err != nil {
		return err
	}
	if done, err := c.wideNode(n); done || err != nil {
		return err
	}
	if done, err := c.blockNode(n); done || err != nil {
		return err
	}
	if done, err := c.lutNode(n); done || err != nil {
		return err
	}
	allConst := true
	for k := range n.Inputs {
		v, err := c.in(n, k)
		if err != nil {
			return err
		}
		if v != nil && v.deferred && !shapeOnly[n.OpType] && (k != 0 || n.OpType != "Conv" && n.OpType != "MatMul" && n.OpType != "Gemm") {
			if v, err = c.undefer(v); err != nil {
				return err
			}
		}
		if v != nil && !v.isConst {
			allConst = false
			if v.view != nil && !readsView(n, k) {
				if v, err = c.permuteTo(v.view.node, v.view.src, v.view.perm, v.shape); err != nil {
					return err
				}
				v.name, v.uses = n.Inputs[k], c.uses[n.Inputs[k]]
				c.vals[n.Inputs[k]] = v
			}
			if err := c.checkView(n, k, v); err != nil {
				return err
			}
			if err := checkHostInt(n, k, v); err != nil {
				return err
			}
			if err := checkNarrow(n, k, v); err != nil {
				return err
			}
		}
	}
	if allConst || shapeOnly[n.OpType] {
		if done, err := c.fold(n); done || err != nil {
			return err
		}
	}
	if n.OpType == "DequantizeLinear" {
		if done, err := c.deferDQ(n); done || err != nil {
			return err
		}
	}
	if done, err := c.gated(n); done || err != nil {
		return err
	}
	return c.run(n)
}

// shapeOnly are the operators that read only their input's shape, which
// is known at compile time: they fold whatever the input.
var shapeOnly = map[string]bool{"Shape": true, "Size": true}

// run compiles n, whose inputs are ready. Per-tensor element-wise
// operators after a Reshape work on the reshaped tensor's storage and
// reshape their result: an attention mask [N,S] unsqueezed to [N,1,1,S]
// and scaled stays laid out as the scores it is added to read it.
func (c *compiler) run(n *onnx.Node) error {
	if k := c.perTensorInput(n); k >= 0 {
		if x := c.vals[n.Inputs[k]]; x != nil && x.alias != nil && !eqInts(x.shape, x.root().shape) {
			c.vals[n.Inputs[k]] = x.root()
			err := c.dispatch(n)
			c.vals[n.Inputs[k]] = x
			if err != nil {
				return err
			}
			y := c.vals[n.Outputs[0]]
			c.vals[n.Outputs[0]] = &value{name: y.name, shape: x.shape, typ: y.typ, uses: y.uses, derived: derived{alias: y}}
			return nil
		}
	}
	return c.dispatch(n)
}

// perTensorInput is the index of the input n applies one function to
// element by element: a unary operator's, or the tensor of arithmetic with
// a scalar constant (which broadcasts to the tensor's storage as to the
// tensor); −1 for other nodes.
func (c *compiler) perTensorInput(n *onnx.Node) int {
	if elementwise[n.OpType] && len(n.Inputs) > 0 {
		return 0
	}
	if n.OpType != "Add" && n.OpType != "Sub" && n.OpType != "Mul" && n.OpType != "Div" || len(n.Inputs) != 2 {
		return -1
	}
	for k := range 2 {
		x, s := c.vals[n.Inputs[k]], c.vals[n.Inputs[1-k]]
		if x != nil && s != nil && !x.isConst && s.isConst && s.len() == 1 && len(s.shape) <= len(x.root().shape) {
			return k
		}
	}
	return -1
}

// elementwise lists the operators that may run on a reshaped tensor's
// storage.
var elementwise = map[string]bool{"Relu": true, "QuantizeLinear": true, "DequantizeLinear": true, "DynamicQuantizeLinear": true, "Cast": true,
	"Clip": true, "LeakyRelu": true, "HardSigmoid": true, "HardSwish": true, "Sigmoid": true, "Tanh": true,
	"Exp": true, "Log": true, "Sqrt": true, "Softplus": true, "Abs": true, "Neg": true, "Pow": true, "Erf": true}

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
	if x.view != nil && !flattensView(x, shape) {
		v, err := c.permuteTo(x.view.node, x.view.src, x.view.perm, shape)
		if err != nil {
			return err
		}
		c.set(n, 0, v)
		return nil
	}
	if x.view != nil {
		return c.flattenView(n, x, shape)
	}
	if v := reshapePermuted(x, shape, c.outputs); v != nil {
		c.set(n, 0, v)
		return nil
	}
	c.set(n, 0, aliasOf(x.root(), shape, x.typ))
	return nil
}
