package onnxtest_test

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// A net of refnet_test.go as an ONNX graph (opset 13), as a framework's
// exporter writes it: Conv without bias then BatchNormalization, ReLU6 as
// Clip(0, 6), Gemm with transposed weights; and its parameters read back
// from such a graph.

// param is one initializer of the exported graph, backed by the net.
type param struct {
	name string
	dims []int64
	v    []float64
}

func (n *net) params() []param {
	var ps []param
	for k, l := range n.layers {
		pre := fmt.Sprintf("l%d.", k+1)
		switch l.kind {
		case opConv:
			cin := n.shapeOf(l.in[0]).c
			ps = append(ps, param{pre + "w", []int64{int64(l.out.c), int64(cin / l.group), int64(l.k), int64(l.k)}, l.w})
			if l.b != nil {
				ps = append(ps, param{pre + "b", []int64{int64(l.out.c)}, l.b})
			}
		case opBN:
			c := []int64{int64(l.out.c)}
			ps = append(ps, param{pre + "scale", c, l.w}, param{pre + "bias", c, l.b},
				param{pre + "mean", c, l.mean}, param{pre + "var", c, l.vr})
		case opGemm:
			in := int64(n.shapeOf(l.in[0]).c)
			ps = append(ps, param{pre + "w", []int64{int64(l.out.c), in}, l.w}, param{pre + "b", []int64{int64(l.out.c)}, l.b})
		}
	}
	return ps
}

func (n *net) valueName(v int) string {
	switch v {
	case 0:
		return "x"
	case len(n.layers):
		return "y"
	}
	return fmt.Sprintf("t%d", v)
}

func (n *net) inputDims() []int64 { return []int64{1, int64(n.in.c), int64(n.in.h), int64(n.in.w)} }

// outputDims are a classifier's logits' [1, classes], or a feature map's
// [1, C, H, W].
func (n *net) outputDims() []int64 {
	l := n.layers[len(n.layers)-1]
	if l.kind == opGemm || l.kind == opSoftmax {
		return []int64{1, int64(l.out.c)}
	}
	return []int64{1, int64(l.out.c), int64(l.out.h), int64(l.out.w)}
}

func (n *net) graph() graph {
	g := graph{
		inputs:  []valueInfo{fvi("x", n.inputDims())},
		outputs: []valueInfo{fvi("y", n.outputDims())},
		inits:   []*onnx.Tensor{scalar("zero", 0), scalar("six", 6)},
	}
	if n.style == stylePaddle {
		g.inits = append(g.inits, scalar("three", 3))
	}
	for _, p := range n.params() {
		g.inits = append(g.inits, onnx.NewFloat32(p.name, p.dims, to32(p.v)))
	}
	for k, l := range n.layers {
		nd := node{outputs: []string{n.valueName(k + 1)}}
		pre := fmt.Sprintf("l%d.", k+1)
		for _, v := range l.in {
			nd.inputs = append(nd.inputs, n.valueName(v))
		}
		window := []attr{isAttr("kernel_shape", int64(l.k), int64(l.k)), isAttr("strides", int64(l.stride), int64(l.stride)),
			isAttr("pads", int64(l.pad), int64(l.pad), int64(l.pad), int64(l.pad))}
		switch l.kind {
		case opConv:
			nd.op, nd.attrs = "Conv", append(window, iAttr("group", int64(l.group)))
			nd.inputs = append(nd.inputs, pre+"w")
			if l.b != nil {
				nd.inputs = append(nd.inputs, pre+"b")
			}
		case opHardSwish, opHardSigmoid, opScale:
			g.nodes = append(g.nodes, n.exportMBv3(l, nd)...)
			continue
		case opBN:
			nd.op, nd.attrs = "BatchNormalization", []attr{fAttr("epsilon", bnEps32)}
			nd.inputs = append(nd.inputs, pre+"scale", pre+"bias", pre+"mean", pre+"var")
		case opRelu:
			nd.op = "Relu"
		case opRelu6:
			nd.op = "Clip"
			nd.inputs = append(nd.inputs, "zero", "six")
		case opAdd:
			nd.op = "Add"
		case opMaxPool:
			nd.op, nd.attrs = "MaxPool", window
		case opGAP:
			nd.op = "GlobalAveragePool"
		case opFlatten:
			nd.op, nd.attrs = "Flatten", []attr{iAttr("axis", 1)}
		case opSoftmax:
			nd.op, nd.attrs = "Softmax", []attr{iAttr("axis", -1)}
		case opGemm:
			nd.op, nd.attrs = "Gemm", []attr{iAttr("transB", 1)}
			nd.inputs = append(nd.inputs, pre+"w", pre+"b")
		}
		g.nodes = append(g.nodes, nd)
	}
	return g
}

func to32(v []float64) []float32 {
	f := make([]float32, len(v))
	for k := range v {
		f[k] = float32(v[k])
	}
	return f
}

// load sets the net's parameters from the initializers of m, a graph
// exported from the same architecture.
func (n *net) load(m *onnx.Model) error {
	for _, p := range n.params() {
		t := m.Graph.Initializer(p.name)
		if t == nil {
			return fmt.Errorf("%s: no initializer %s", n.name, p.name)
		}
		f, err := t.Float32s()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", n.name, p.name, err)
		}
		if len(f) != len(p.v) {
			return fmt.Errorf("%s: %s has %d values, want %d", n.name, p.name, len(f), len(p.v))
		}
		for k := range f {
			p.v[k] = float64(f[k])
		}
	}
	return nil
}
