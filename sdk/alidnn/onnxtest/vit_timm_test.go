package onnxtest_test

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// The same ViT as torch.onnx writes timm's VisionTransformer (opset 17,
// logits only): the embeddings as vit_test.go's, then in each layer the
// fused qkv Linear reshaped to [B, N, 3, heads, D] (B and N gathered from
// the Shape), permuted (2, 0, 3, 1, 4) to [3, B, heads, N, D] and unbound
// along axis 0 as Split → Squeeze writes it, q scaled by D^−½ before
// q·kᵀ, the context transposed back and reshaped to [B, N, C]; the
// LayerNormalizations' ε is timm's 1e-6. The qkv weights are the HF
// case's query, key and value weights side by side, so the float64
// reference is the same forward pass.

func init() { caseFamilies = append(caseFamilies, vitTimmCases) }

const vitTimmEps float32 = 1e-6

func vitTimmCases() []genCase {
	w := newVitWeights(vitSmall)
	var inits []*onnx.Tensor
	dims := vitSmall.dims()
	for _, name := range slices.Sorted(maps.Keys(dims)) {
		m := name[strings.Index(name, ".")+1:]
		if m == "wq" || m == "wk" || m == "wv" || m == "bq" || m == "bk" || m == "bv" {
			continue
		}
		inits = append(inits, onnx.NewFloat32(name, dims[name], w[name]))
	}
	for l := range vitLayers {
		p := fmt.Sprintf("l%d.", l)
		qkv := make([]float32, vitH*3*vitH)
		for i := range vitH {
			for k, m := range []string{"wq", "wk", "wv"} {
				copy(qkv[i*3*vitH+k*vitH:], w[p+m][i*vitH:(i+1)*vitH])
			}
		}
		b := slices.Concat(w[p+"bq"], w[p+"bk"], w[p+"bv"])
		inits = append(inits, onnx.NewFloat32(p+"wqkv", []int64{vitH, 3 * vitH}, qkv), onnx.NewFloat32(p+"bqkv", []int64{3 * vitH}, b))
	}
	ints := func(name string, v ...int64) *onnx.Tensor {
		return intTensor(name, onnx.Int64, []int64{int64(len(v))}, v)
	}
	inits = append(inits, ints("lead_start", 0), ints("lead_end", 2), ints("minus1", -1), ints("minus1x2", -1, -1),
		ints("minus1x3", -1, -1, -1), ints("ones3", 1, 1, 1), ints("zero_i", 0), ints("qkv_tail", 3, vitHeads, vitD), ints("hidden", vitH),
		ints("thirds", 1, 1, 1), intTensor("first", onnx.Int64, nil, []int64{0}), intTensor("second", onnx.Int64, nil, []int64{1}),
		scalar("scale", float32(1/math.Sqrt(vitD))), scalar("sqrt2", float32(math.Sqrt2)), scalar("one", 1), scalar("half", 0.5))
	nodes := vitEmbeddings(vitSmall)
	x := "emb"
	for l := range vitLayers {
		var ns []node
		ns, x = vitTimmLayer(fmt.Sprintf("l%d.", l), x)
		nodes = append(nodes, ns...)
	}
	nodes = append(nodes,
		node{op: "LayerNormalization", inputs: []string{x, "lnf_g", "lnf_b"}, outputs: []string{"normed"}, attrs: []attr{fAttr("epsilon", vitTimmEps)}},
		node{op: "Gather", inputs: []string{"normed", "first"}, outputs: []string{"cls_out"}, attrs: []attr{iAttr("axis", 1)}},
		node{op: "Gemm", inputs: []string{"cls_out", "head_w", "head_b"}, outputs: []string{"logits"}, attrs: []attr{fAttr("alpha", 1), fAttr("beta", 1), iAttr("transB", 1)}})
	set := func(N int, seed float64) dataSet {
		d, img := vitImages(N, seed)
		_, logits := w.forward(linear, patchConv, img, N, vitTimmEps)
		return dataSet{ins: []*onnx.Tensor{onnx.NewFloat32("pixel_values", d, img)},
			outs: []*onnx.Tensor{onnx.NewFloat32("logits", []int64{int64(N), vitClasses}, logits)}}
	}
	first := set(2, 4)
	return []genCase{{name: "vit_tiny_timm", opset: 17,
		g: graph{
			nodes:   nodes,
			inits:   inits,
			inputs:  []valueInfo{{name: "pixel_values", typ: onnx.Float, dims: []int64{0, vitC, vitImg, vitImg}, params: []string{"batch", "", "", ""}}},
			outputs: []valueInfo{{name: "logits", typ: onnx.Float, dims: []int64{0, vitClasses}, params: []string{"batch", ""}}},
		},
		ins: first.ins, outs: first.outs, more: []dataSet{set(1, 5), set(3, 6)},
		// Logits only: faas model test --int8's argmax is the class.
		int8: true,
	}}
}

// vitTimmLayer writes one timm Block reading x.
func vitTimmLayer(p, x string) ([]node, string) {
	n := func(s string) string { return p + s }
	lin := func(in, wn, bn, out string) []node { return linearNodes(in, n(wn), n(bn), n(out)) }
	ns := []node{{op: "LayerNormalization", inputs: []string{x, n("g1"), n("be1")}, outputs: []string{n("ln1")}, attrs: []attr{fAttr("epsilon", vitTimmEps)}}}
	ns = append(ns, lin(n("ln1"), "wqkv", "bqkv", "qkv")...)
	// B, N = x.shape; qkv.reshape(B, N, 3, heads, D).permute(2, 0, 3, 1, 4).
	ns = append(ns,
		node{op: "Shape", inputs: []string{n("ln1")}, outputs: []string{n("shape")}},
		node{op: "Gather", inputs: []string{n("shape"), "first"}, outputs: []string{n("B")}, attrs: []attr{iAttr("axis", 0)}},
		node{op: "Gather", inputs: []string{n("shape"), "second"}, outputs: []string{n("N")}, attrs: []attr{iAttr("axis", 0)}},
		node{op: "Unsqueeze", inputs: []string{n("B"), "zero_i"}, outputs: []string{n("B1")}},
		node{op: "Unsqueeze", inputs: []string{n("N"), "zero_i"}, outputs: []string{n("N1")}},
		node{op: "Concat", inputs: []string{n("B1"), n("N1"), "qkv_tail"}, outputs: []string{n("qkv_to")}, attrs: []attr{iAttr("axis", 0)}},
		node{op: "Reshape", inputs: []string{n("qkv"), n("qkv_to")}, outputs: []string{n("qkv5")}},
		node{op: "Transpose", inputs: []string{n("qkv5")}, outputs: []string{n("qkv_p")}, attrs: []attr{isAttr("perm", 2, 0, 3, 1, 4)}},
		// q, k, v = qkv.unbind(0).
		node{op: "Split", inputs: []string{n("qkv_p"), "thirds"}, outputs: []string{n("q1"), n("k1"), n("v1")}, attrs: []attr{iAttr("axis", 0)}},
		node{op: "Squeeze", inputs: []string{n("q1"), "zero_i"}, outputs: []string{n("q")}},
		node{op: "Squeeze", inputs: []string{n("k1"), "zero_i"}, outputs: []string{n("k")}},
		node{op: "Squeeze", inputs: []string{n("v1"), "zero_i"}, outputs: []string{n("v")}},
		node{op: "Mul", inputs: []string{n("q"), "scale"}, outputs: []string{n("qs")}},
		node{op: "Transpose", inputs: []string{n("k")}, outputs: []string{n("kt")}, attrs: []attr{isAttr("perm", 0, 1, 3, 2)}},
		node{op: "MatMul", inputs: []string{n("qs"), n("kt")}, outputs: []string{n("scores")}},
		node{op: "Softmax", inputs: []string{n("scores")}, outputs: []string{n("probs")}, attrs: []attr{iAttr("axis", -1)}},
		node{op: "MatMul", inputs: []string{n("probs"), n("v")}, outputs: []string{n("ctx")}},
		node{op: "Transpose", inputs: []string{n("ctx")}, outputs: []string{n("ctx_t")}, attrs: []attr{isAttr("perm", 0, 2, 1, 3)}},
		node{op: "Concat", inputs: []string{n("B1"), n("N1"), "hidden"}, outputs: []string{n("ctx_to")}, attrs: []attr{iAttr("axis", 0)}},
		node{op: "Reshape", inputs: []string{n("ctx_t"), n("ctx_to")}, outputs: []string{n("ctx_m")}})
	ns = append(ns, lin(n("ctx_m"), "wo", "bo", "attn")...)
	ns = append(ns,
		node{op: "Add", inputs: []string{x, n("attn")}, outputs: []string{n("res1")}},
		node{op: "LayerNormalization", inputs: []string{n("res1"), n("g2"), n("be2")}, outputs: []string{n("ln2")}, attrs: []attr{fAttr("epsilon", vitTimmEps)}})
	ns = append(ns, lin(n("ln2"), "w1", "b1", "ff")...)
	ns = append(ns, geluErf(n)...)
	ns = append(ns, lin(n("gelu"), "w2", "b2", "ff2")...)
	ns = append(ns, node{op: "Add", inputs: []string{n("res1"), n("ff2")}, outputs: []string{n("out")}})
	return ns, n("out")
}
