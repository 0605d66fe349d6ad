package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Cases of a graph with several outputs, as exporters write a classifier
// that also returns an intermediate feature map: the feature map is read by
// the graph output and by the layers after it.

func init() { caseFamilies = append(caseFamilies, expOutputCases) }

// expOutputsCase is Conv → c, Relu (or nothing) → feat, Flatten → f and
// Gemm → logits, and, when probs, Softmax → probs; outputs logits, feat
// (f when flat) and probs.
func expOutputsCase(name string, relu, probs, flat bool, seed float64) genCase {
	x := data(convXDims, seed)
	w := mapF(data(convWDims, seed+1), func(v float32) float32 { return v / 10 })
	b := data([]int64{20}, seed+2)
	feat := conv3x3(x, w, b, 3, 6, 6, 20)
	nodes := []node{{op: "Conv", inputs: []string{"x", "w", "b"}, outputs: []string{"feat"}, attrs: []attr{isAttr("pads", 1, 1, 1, 1)}}}
	if relu {
		nodes[0].outputs = []string{"c"}
		nodes = append(nodes, node{op: "Relu", inputs: []string{"c"}, outputs: []string{"feat"}})
		feat = mapF(feat, func(v float32) float32 { return max(v, 0) })
	}
	k := len(feat)
	fc := mapF(data([]int64{expClasses, int64(k)}, seed+3), func(v float32) float32 { return v / 50 })
	bias := data([]int64{expClasses}, seed+4)
	logits := make([]float32, expClasses)
	for j := range logits {
		s := bias[j]
		for i := range k {
			s += feat[i] * fc[j*k+i]
		}
		logits[j] = s
	}
	cd := []int64{1, expClasses}
	nodes = append(nodes,
		node{op: "Flatten", inputs: []string{"feat"}, outputs: []string{"f"}},
		node{op: "Gemm", inputs: []string{"f", "fc", "bias"}, outputs: []string{"logits"}, attrs: []attr{iAttr("transB", 1)}})
	fo := onnx.NewFloat32("feat", convYDims, feat)
	if flat {
		fo = onnx.NewFloat32("f", []int64{1, int64(k)}, feat)
	}
	c := genCase{name: name, opset: 13,
		g: graph{
			nodes: nodes,
			inits: []*onnx.Tensor{onnx.NewFloat32("w", convWDims, w), onnx.NewFloat32("b", []int64{20}, b),
				onnx.NewFloat32("fc", []int64{expClasses, int64(k)}, fc), onnx.NewFloat32("bias", []int64{expClasses}, bias)},
			inputs:  []valueInfo{fvi("x", convXDims)},
			outputs: []valueInfo{fvi("logits", cd), fvi(fo.Name, fo.Dims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", convXDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("logits", cd, logits), fo},
	}
	if probs {
		m := float32(math.Inf(-1))
		for _, v := range logits {
			m = max(m, v)
		}
		var sum float64
		p := make([]float32, expClasses)
		for j, v := range logits {
			p[j] = float32(math.Exp(float64(v - m)))
			sum += float64(p[j])
		}
		p = mapF(p, func(v float32) float32 { return float32(float64(v) / sum) })
		c.g.nodes = append(c.g.nodes, node{op: "Softmax", inputs: []string{"logits"}, outputs: []string{"probs"}, attrs: []attr{iAttr("axis", -1)}})
		c.g.outputs = append(c.g.outputs, fvi("probs", cd))
		c.outs = append(c.outs, onnx.NewFloat32("probs", cd, p))
	}
	return c
}

func expOutputCases() []genCase {
	// Relu's zeros tie along the feature map's last axis, and int8 runs
	// compare by argmax there: the int8 case returns the features
	// flattened, whose largest value stands out.
	features := expOutputsCase("export_outputs_logits_features_probs", true, true, false, 100)
	flat := expOutputsCase("export_outputs_logits_flat_features", false, false, true, 105)
	flat.int8 = true
	return []genCase{features, flat}
}
