// Package onnxref evaluates ONNX graphs in float64, as plainly as the
// operators' definitions read: the reference that tests hold the AliDNN
// engine's outputs to when no upstream output exists (PP-OCR's trained
// models, see testdata/README.md). It covers the operators of the
// project's vendored models — convolutions, pooling, normalisation,
// nearest resizing, MatMul, Softmax, element-wise arithmetic and the
// shape operators exporters write — and refuses others, and attributes it
// does not implement, with an error naming the node.
package onnxref

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Tensor is a dense row-major tensor. Integer tensors (shapes, indices)
// hold their values exactly as float64s.
type Tensor struct {
	Dims []int
	V    []float64
}

func (t Tensor) len() int { return size(t.Dims) }

func size(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

// FromONNX converts an ONNX tensor (floating-point or integer) to a Tensor.
func FromONNX(t *onnx.Tensor) (Tensor, error) {
	dims := make([]int, len(t.Dims))
	for k, d := range t.Dims {
		dims[k] = int(d)
	}
	out := Tensor{Dims: dims, V: make([]float64, size(dims))}
	switch t.DataType {
	case onnx.Float, onnx.Double:
		f, err := t.Float32s()
		if err != nil {
			return Tensor{}, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		for k, v := range f {
			out.V[k] = float64(v)
		}
	default:
		i, err := t.Int64s()
		if err != nil {
			return Tensor{}, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		for k, v := range i {
			out.V[k] = float64(v)
		}
	}
	if len(out.V) != size(dims) {
		return Tensor{}, fmt.Errorf("tensor %q: %d values for dims %v", t.Name, len(out.V), dims)
	}
	return out, nil
}

// Run evaluates graph g of a model importing opset of the default domain
// on inputs (by name) and returns every graph output by name.
func Run(g *onnx.Graph, opset int64, inputs map[string]Tensor) (map[string]Tensor, error) {
	e := &evaluator{opset: opset, vals: map[string]Tensor{}}
	for _, t := range g.Initializers {
		v, err := FromONNX(t)
		if err != nil {
			return nil, fmt.Errorf("initializer: %w", err)
		}
		e.vals[t.Name] = v
	}
	for _, in := range g.Inputs {
		// Values are float64 throughout: an integer input would meet
		// float arithmetic where ONNX truncates or wraps.
		if in.ElemType != onnx.Float && in.ElemType != onnx.Double && in.ElemType != 0 {
			return nil, fmt.Errorf("input %q: element type %v: only float graphs are evaluated", in.Name, in.ElemType)
		}
	}
	for name, t := range inputs {
		if len(t.V) != size(t.Dims) {
			return nil, fmt.Errorf("input %q: %d values for dims %v", name, len(t.V), t.Dims)
		}
		e.vals[name] = t
	}
	for k, n := range g.Nodes {
		if n.Domain != "" && n.Domain != "ai.onnx" {
			return nil, fmt.Errorf("node %d (%s %q): domain %q", k, n.OpType, n.Name, n.Domain)
		}
		outs, err := e.node(n)
		if err != nil {
			return nil, fmt.Errorf("node %d (%s %q): %w", k, n.OpType, n.Name, err)
		}
		for j, o := range outs {
			if j < len(n.Outputs) && n.Outputs[j] != "" {
				e.vals[n.Outputs[j]] = o
			}
		}
	}
	res := map[string]Tensor{}
	for _, o := range g.Outputs {
		v, ok := e.vals[o.Name]
		if !ok {
			return nil, fmt.Errorf("graph output %q is not computed", o.Name)
		}
		res[o.Name] = v
	}
	return res, nil
}

type evaluator struct {
	opset int64
	vals  map[string]Tensor
}

// in returns input k of n; ok is false when it is omitted.
func (e *evaluator) in(n *onnx.Node, k int) (t Tensor, ok bool, err error) {
	if k >= len(n.Inputs) || n.Inputs[k] == "" {
		return Tensor{}, false, nil
	}
	t, ok = e.vals[n.Inputs[k]]
	if !ok {
		return Tensor{}, false, fmt.Errorf("input %q is not defined before use", n.Inputs[k])
	}
	return t, true, nil
}

// need returns input k of n, which must be present.
func (e *evaluator) need(n *onnx.Node, k int) (Tensor, error) {
	t, ok, err := e.in(n, k)
	if err == nil && !ok {
		err = fmt.Errorf("input %d is required", k)
	}
	return t, err
}

func (e *evaluator) node(n *onnx.Node) ([]Tensor, error) {
	if f, ok := unary[n.OpType]; ok {
		x, err := e.need(n, 0)
		if err != nil {
			return nil, err
		}
		return one(mapT(x, f), nil)
	}
	if f, ok := binary[n.OpType]; ok {
		a, err := e.need(n, 0)
		if err != nil {
			return nil, err
		}
		b, err := e.need(n, 1)
		if err != nil {
			return nil, err
		}
		return one(broadcast(a, b, f))
	}
	op, ok := ops[n.OpType]
	if !ok {
		return nil, fmt.Errorf("operator %s is not implemented", n.OpType)
	}
	return one(op(e, n))
}

func one(t Tensor, err error) ([]Tensor, error) {
	if err != nil {
		return nil, err
	}
	return []Tensor{t}, nil
}

// ops are the operators beyond the element-wise ones.
var ops map[string]func(*evaluator, *onnx.Node) (Tensor, error)

func init() {
	ops = map[string]func(*evaluator, *onnx.Node) (Tensor, error){
		"Identity": identity, "Dropout": identity,
		"Conv": conv, "ConvTranspose": convTranspose, "MaxPool": maxPool, "AveragePool": averagePool,
		"GlobalAveragePool": globalAveragePool, "BatchNormalization": batchNorm, "Resize": resize,
		"MatMul": matMul, "Gemm": gemm, "Softmax": softmax, "ReduceMean": reduceMean,
		"Clip": clip, "HardSigmoid": hardSigmoid,
		"Reshape": reshape, "Flatten": flatten, "Transpose": transpose, "Slice": slice, "Squeeze": squeeze,
		"Unsqueeze": unsqueeze, "Concat": concat, "Shape": shape, "Cast": cast, "Constant": constant,
	}
}

func identity(e *evaluator, n *onnx.Node) (Tensor, error) { return e.need(n, 0) }
