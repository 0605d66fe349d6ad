package alidnn

// A Loop whose trip count, condition, initial values and every value its
// body reads are constants is a constant: the compiler runs the body at
// compile time, as Range's function body writes one (a Loop adding delta
// to the carried value and emitting it). The engine has no control flow,
// so any other Loop is refused.

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// maxLoopTrips bounds the iterations a Loop folds: each runs the body's
// folders, and a constant of more elements than this is no longer what a
// compile-time table is for.
const maxLoopTrips = 1 << 16

// Loop's folder is registered at start-up rather than in folders' literal:
// it folds its body through fold, which reads folders, and Go refuses a
// variable whose initialiser refers to itself.
func init() { folders["Loop"] = (*compiler).foldLoop }

// loopState is what one iteration hands the next.
type loopState struct {
	cond    bool
	carried []*value
	// scans are, per scan output, the value of each iteration so far.
	scans [][]*value
}

// foldLoop runs a constant Loop's body until its trip count M or its
// condition ends it: ONNX's for (i = 0; i < M && cond; i++), each omitted
// input dropping its test. Its outputs are the final carried values, then
// each scan output's per-iteration values stacked along a new first axis.
func (c *compiler) foldLoop(n *onnx.Node) (*value, error) {
	a := n.Attr("body")
	if a == nil || a.G == nil {
		return nil, fmt.Errorf("Loop without a body graph")
	}
	body := a.G
	nCarried := len(n.Inputs) - 2
	if nCarried < 0 || len(body.Inputs) != nCarried+2 || len(body.Outputs) < nCarried+1 {
		return nil, fmt.Errorf("Loop of %d inputs with a body of %d inputs and %d outputs: want 2+N inputs and 1+N+K outputs for N carried values",
			len(n.Inputs), len(body.Inputs), len(body.Outputs))
	}
	nScans := len(body.Outputs) - 1 - nCarried
	if len(n.Outputs) > nCarried+nScans {
		return nil, fmt.Errorf("Loop of %d outputs: its body gives %d", len(n.Outputs), nCarried+nScans)
	}
	trips, hasM, err := c.loopScalar(n, 0, "trip count M")
	if err != nil {
		return nil, err
	}
	cond, hasCond, err := c.loopScalar(n, 1, "condition")
	if err != nil {
		return nil, err
	}
	if hasM && trips > maxLoopTrips {
		return nil, fmt.Errorf("Loop of %d iterations: more than %d do not fold, and the engine has no control flow: %w", trips, maxLoopTrips, ErrUnsupported)
	}
	st := &loopState{cond: !hasCond || cond != 0, scans: make([][]*value, nScans)}
	for k := range nCarried {
		v, err := c.need(n, 2+k)
		if err != nil {
			return nil, err
		}
		st.carried = append(st.carried, v)
	}
	for i := int64(0); (!hasM || i < trips) && st.cond; i++ {
		if i >= maxLoopTrips {
			return nil, fmt.Errorf("Loop still running after %d iterations: longer ones do not fold, and the engine has no control flow: %w", i, ErrUnsupported)
		}
		if err := c.loopIteration(body, i, hasCond, st); err != nil {
			return nil, fmt.Errorf("Loop iteration %d: %w", i, err)
		}
	}
	return c.loopOutputs(n, body, st)
}

// loopScalar is the integer value of the Loop's optional scalar input k,
// which must be a constant of one element.
func (c *compiler) loopScalar(n *onnx.Node, k int, what string) (int64, bool, error) {
	v, err := c.in(n, k)
	if err != nil || v == nil {
		return 0, false, err
	}
	if !v.isConst || v.len() != 1 {
		return 0, false, fmt.Errorf("Loop's %s %s: want a constant of one element: %w", what, v, ErrUnsupported)
	}
	return v.ints()[0], true, nil
}

// loopIteration folds the body once, from its iteration number i, the
// condition and the carried values of st, and advances st to its outputs.
// Without a condition input, the body's condition output is ignored, as
// ONNX's for loop of a trip count alone ignores it.
func (c *compiler) loopIteration(body *onnx.Graph, i int64, hasCond bool, st *loopState) error {
	sub := &compiler{opts: c.opts, g: body, vals: map[string]*value{}, uses: map[string]int{}, outputs: map[string]bool{},
		reduced: map[string]bool{}, opsetVer: c.opsetVer, dims: c.dims}
	bind := func(name string, v *value) {
		cp := *v
		cp.name, cp.isConst = name, true
		sub.vals[name] = &cp
	}
	bind(body.Inputs[0].Name, constInt("", onnx.Int64, nil, []int64{i}))
	bind(body.Inputs[1].Name, constInt("", onnx.Bool, nil, []int64{boolInt(st.cond)}))
	for k, v := range st.carried {
		bind(body.Inputs[2+k].Name, v)
	}
	for _, t := range body.Initializers {
		v, err := fromTensor(t)
		if err != nil {
			return fmt.Errorf("body initializer: %w", err)
		}
		bind(t.Name, v)
	}
	for k, n := range body.Nodes {
		if err := c.foldBodyNode(sub, n); err != nil {
			return fmt.Errorf("body node %d (%s %q): %w", k, n.OpType, n.Name, err)
		}
	}
	outs := make([]*value, len(body.Outputs))
	for k, o := range body.Outputs {
		v := sub.vals[o.Name]
		if v == nil {
			if v = c.vals[o.Name]; v == nil || !v.isConst {
				return fmt.Errorf("body output %q is not a constant", o.Name)
			}
		}
		outs[k] = v
	}
	if hasCond {
		if outs[0].len() != 1 {
			return fmt.Errorf("body condition %s: want one element", outs[0])
		}
		st.cond = outs[0].ints()[0] != 0
	}
	nCarried := len(st.carried)
	st.carried = outs[1 : 1+nCarried]
	for k, v := range outs[1+nCarried:] {
		st.scans[k] = append(st.scans[k], v)
	}
	return nil
}

// foldBodyNode folds one node of a Loop body in sub, whose values are the
// body's; what the body reads from the enclosing graph must be a constant
// there.
func (c *compiler) foldBodyNode(sub *compiler, n *onnx.Node) error {
	if n.Domain != "" && n.Domain != "ai.onnx" {
		return fmt.Errorf("operator domain %q: %w", n.Domain, ErrUnsupported)
	}
	for _, in := range n.Inputs {
		if in == "" || sub.vals[in] != nil {
			continue
		}
		outer := c.vals[in]
		if outer == nil {
			return fmt.Errorf("input %q is not defined before use", in)
		}
		if !outer.isConst {
			return fmt.Errorf("the body reads %s, known only at run time: the engine has no control flow: %w", outer, ErrUnsupported)
		}
		sub.vals[in] = outer
	}
	if err := sub.checkStrings(n); err != nil {
		return err
	}
	done, err := sub.fold(n)
	if err != nil {
		return err
	}
	if !done {
		return fmt.Errorf("operator %s does not fold, and the engine has no control flow: %w", n.OpType, ErrUnsupported)
	}
	return nil
}

// loopOutputs sets n's outputs from the final state and returns its first.
func (c *compiler) loopOutputs(n *onnx.Node, body *onnx.Graph, st *loopState) (*value, error) {
	var first *value
	for k, name := range n.Outputs {
		var v *value
		if k < len(st.carried) {
			cp := *st.carried[k]
			v = &cp
		} else {
			s, err := stackScan(body.Outputs[1+k], st.scans[k-len(st.carried)])
			if err != nil {
				return nil, err
			}
			v = s
		}
		v.isConst = true
		if k == 0 {
			first = v
		} else if name != "" {
			c.set(n, k, v)
		}
	}
	return first, nil
}

// stackScan stacks one scan output's iteration values along a new first
// axis. With no iteration, its shape is the body's declaration of it.
func stackScan(decl onnx.ValueInfo, iters []*value) (*value, error) {
	if len(iters) == 0 {
		shape := []int{0}
		if decl.Dims == nil || decl.ElemType.Bits() == 0 {
			return nil, fmt.Errorf("Loop of no iterations: the body does not declare scan output %q's type and shape: %w", decl.Name, ErrUnsupported)
		}
		for _, d := range decl.Dims {
			if d.Param != "" || d.Value <= 0 {
				return nil, fmt.Errorf("Loop of no iterations: scan output %q has a free dimension: %w", decl.Name, ErrUnsupported)
			}
			shape = append(shape, int(d.Value))
		}
		return emptyValue(decl.ElemType, shape), nil
	}
	first := iters[0]
	out := &value{shape: append([]int{len(iters)}, first.shape...), typ: first.typ}
	if _, err := foldedShape(out.shape); err != nil {
		return nil, fmt.Errorf("scan output %q: %w", decl.Name, err)
	}
	for k, v := range iters {
		if v.typ != first.typ || !slices.Equal(v.shape, first.shape) {
			return nil, fmt.Errorf("scan output %q: iteration %d gives %v %v, iteration 0 %v %v", decl.Name, k, v.typ, v.shape, first.typ, first.shape)
		}
		if first.isFloat() {
			out.f = append(out.f, v.floats()...)
		} else {
			out.i = append(out.i, v.ints()...)
		}
	}
	if out.f == nil && out.i == nil {
		return emptyValue(first.typ, out.shape), nil
	}
	return out, nil
}
