package onnxtest_test

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// A small ViT as torch.onnx writes HuggingFace's ViTForImageClassification
// (opset 17): a FLOAT pixel_values [batch, 3, 32, 32], batch symbolic.
// Embeddings: the patch Conv (kernel = stride = 8, 16 patches of hidden
// 64), flatten(2) as Shape → Slice → Concat(−1) → Reshape, transpose(1, 2),
// the class token expanded to the batch (cls_token.expand(batch, −1, −1):
// the batch gathered from the input's Shape, −1 replaced by Equal/Where
// before the Expand, all folded), Concat along the tokens and the position
// embedding added. Two pre-norm layers (LayerNormalization, 4 heads of 16,
// a residual; LayerNormalization, GELU MLP 64 → 128 → 64 with Erf, a
// residual), the final LayerNormalization (last_hidden_state), and the
// classifier, a Gemm (transB) of token 0 (Gather axis 1) to 10 logits.
// Random weights; outputs from a float64 forward pass. trained_vit_test.go
// writes the same graph with trained weights.

func init() { caseFamilies = append(caseFamilies, vitCases) }

const (
	vitImg, vitPatch, vitC              = 32, 8, 3
	vitGrid                             = vitImg / vitPatch
	vitTokens                           = vitGrid*vitGrid + 1 // patches and the class token
	vitH, vitHeads, vitD                = 64, 4, 16
	vitF, vitLayers, vitClasses         = 128, 2, 10
	vitEps                      float32 = 1e-12
)

// vitSize is a ViT's dimensions: the generated cases' (vitSmall) and
// ViT-B/16's at 224, which the benchmark builds (vitBase).
type vitSize struct {
	img, patch, channels               int64
	hidden, heads, ff, layers, classes int64
}

var (
	vitSmall = vitSize{vitImg, vitPatch, vitC, vitH, vitHeads, vitF, vitLayers, vitClasses}
	vitBase  = vitSize{224, 16, 3, 768, 12, 3072, 12, 1000}
)

func (s vitSize) grid() int64    { return s.img / s.patch }
func (s vitSize) tokens() int64  { return s.grid()*s.grid() + 1 } // patches and the class token
func (s vitSize) headDim() int64 { return s.hidden / s.heads }

type vitWeights map[string][]float32

func (s vitSize) dims() map[string][]int64 {
	h := s.hidden
	d := map[string][]int64{"patch_w": {h, s.channels, s.patch, s.patch}, "patch_b": {h},
		"cls": {1, 1, h}, "pos": {1, s.tokens(), h}, "lnf_g": {h}, "lnf_b": {h},
		"head_w": {s.classes, h}, "head_b": {s.classes}}
	encoderLayerDims(d, int(s.layers), h, s.ff)
	return d
}

func newVitWeights(s vitSize) vitWeights {
	w := vitWeights{}
	seed := 600.0
	dims := s.dims()
	for _, name := range slices.Sorted(maps.Keys(dims)) {
		scale, shift := float32(0.06), float32(0)
		switch {
		case name == "cls" || name == "pos":
			scale = 0.05
		case name == "patch_w":
			// Patches dominate the tokens, so that the logits depend
			// on the image more than on the constant class token.
			scale = 0.12
		case name == "lnf_g" || len(name) > 3 && (name[len(name)-2:] == "g1" || name[len(name)-2:] == "g2"):
			scale, shift = 0.02, 1
		case len(dims[name]) == 1:
			scale = 0.02
		case name[len(name)-2:] == "w2":
			scale = 0.05
		}
		seed++
		w[name] = mapF(data(dims[name], seed), func(v float32) float32 { return v*scale + shift })
	}
	return w
}

// patchFunc is the patch Conv as a case computes it: [N, vitGrid², vitH]
// from img [N, vitC, vitImg, vitImg], weights w [vitH, vitC, vitPatch,
// vitPatch] and bias b; patchConv, or dynPatchConv for a dynamically
// quantised graph.
type patchFunc func(img []float32, N int, w, b []float32) []float64

// patchSums is the patch Conv's sums of products without the bias, of the
// image's values pix(i) by the weights' w(i), in float64.
func patchSums(N int, pix, w func(int) float64) []float64 {
	out := make([]float64, N*vitGrid*vitGrid*vitH)
	for n := range N {
		for t := range vitGrid * vitGrid {
			py, px := t/vitGrid, t%vitGrid
			for e := range vitH {
				var s float64
				for c := range vitC {
					for i := range vitPatch {
						for j := range vitPatch {
							s += pix(((n*vitC+c)*vitImg+py*vitPatch+i)*vitImg+px*vitPatch+j) * w(((e*vitC+c)*vitPatch+i)*vitPatch+j)
						}
					}
				}
				out[(n*vitGrid*vitGrid+t)*vitH+e] = s
			}
		}
	}
	return out
}

// patchConv is the fp32 graph's patch Conv.
func patchConv(img []float32, N int, w, b []float32) []float64 {
	out := patchSums(N, func(i int) float64 { return float64(img[i]) }, func(i int) float64 { return float64(w[i]) })
	for k := range out {
		out[k] += float64(b[k%vitH])
	}
	return out
}

// embed is the patch Conv by patch, the class token and the position
// embedding: [N, vitTokens, vitH].
func (w vitWeights) embed(patch patchFunc, img []float32, N int) []float64 {
	p := patch(img, N, w["patch_w"], w["patch_b"])
	x := make([]float64, N*vitTokens*vitH)
	for n := range N {
		for t := range vitTokens {
			for e := range vitH {
				v := float64(w["pos"][t*vitH+e])
				if t == 0 {
					v += float64(w["cls"][e])
				} else {
					v += p[(n*(vitTokens-1)+t-1)*vitH+e]
				}
				x[(n*vitTokens+t)*vitH+e] = v
			}
		}
	}
	return x
}

// forward runs the ViT in float64, its LayerNormalizations' ε eps, its
// patch Conv by patch and its MatMuls' linear layers by lin:
// last_hidden_state and the logits.
func (w vitWeights) forward(lin linearFunc, patch patchFunc, img []float32, N int, eps float32) ([]float32, []float32) {
	x := w.embed(patch, img, N)
	none := func(_, _, _ int) float64 { return 0 }
	for l := range vitLayers {
		p := fmt.Sprintf("l%d.", l)
		h := layerNormEps(x, w[p+"g1"], w[p+"be1"], vitH, eps)
		q, k, v := lin(h, w[p+"wq"], w[p+"bq"], vitH, vitH), lin(h, w[p+"wk"], w[p+"bk"], vitH, vitH), lin(h, w[p+"wv"], w[p+"bv"], vitH, vitH)
		o := lin(attention64(q, k, v, N, vitTokens, vitHeads, vitD, none), w[p+"wo"], w[p+"bo"], vitH, vitH)
		for k := range o {
			x[k] += o[k]
		}
		h = layerNormEps(x, w[p+"g2"], w[p+"be2"], vitH, eps)
		f := lin(h, w[p+"w1"], w[p+"b1"], vitH, vitF)
		for k, a := range f {
			f[k] = a * 0.5 * (1 + math.Erf(a/math.Sqrt2))
		}
		f2 := lin(f, w[p+"w2"], w[p+"b2"], vitF, vitH)
		for k := range f2 {
			x[k] += f2[k]
		}
	}
	x = layerNormEps(x, w["lnf_g"], w["lnf_b"], vitH, eps)
	hidden := make([]float32, len(x))
	for k, a := range x {
		hidden[k] = float32(a)
	}
	classes := len(w["head_b"])
	logits := make([]float32, N*classes)
	for n := range N {
		for o := range classes {
			v := float64(w["head_b"][o])
			for i := range vitH {
				v += x[n*vitTokens*vitH+i] * float64(w["head_w"][o*vitH+i])
			}
			logits[n*classes+o] = float32(v)
		}
	}
	return hidden, logits
}

// vitImages is N images spread over about [−2, 2].
func vitImages(N int, seed float64) ([]int64, []float32) {
	dims := []int64{int64(N), vitC, vitImg, vitImg}
	return dims, mapF(data(dims, seed), func(v float32) float32 { return v * 0.4 })
}

// vitSet is one data set of N images, its outputs from forward with lin
// and patch.
func (w vitWeights) vitSet(lin linearFunc, patch patchFunc, N int, seed float64) dataSet {
	dims, img := vitImages(N, seed)
	hidden, logits := w.forward(lin, patch, img, N, vitEps)
	return dataSet{
		ins: []*onnx.Tensor{onnx.NewFloat32("pixel_values", dims, img)},
		outs: []*onnx.Tensor{onnx.NewFloat32("last_hidden_state", []int64{int64(N), vitTokens, vitH}, hidden),
			onnx.NewFloat32("logits", []int64{int64(N), int64(len(w["head_b"]))}, logits)},
	}
}

func vitCases() []genCase {
	w := newVitWeights(vitSmall)
	dyn := vitSets(w, dynLinear, dynPatchConv, 1)
	return []genCase{vitCase(w, "vit_tiny", false, 1), vitCase(w, "vit_tiny_sdpa", true, 7),
		{name: "vit_tiny_dynamic_int8", opset: 17, g: quantizeDynamic(vitGraph(vitSmall, w, false)), ins: dyn[0].ins, outs: dyn[0].outs, more: dyn[1:]}}
}

// vitSets are the data sets of 2, 1 and 3 images from seed on, their
// outputs from forward with lin and patch.
func vitSets(w vitWeights, lin linearFunc, patch patchFunc, seed float64) []dataSet {
	return []dataSet{w.vitSet(lin, patch, 2, seed), w.vitSet(lin, patch, 1, seed+1), w.vitSet(lin, patch, 3, seed+2)}
}

// vitCase is the ViT with its attention as eager PyTorch writes it, or
// (sdpa) as torch.onnx writes scaled_dot_product_attention, which
// HuggingFace's ViT calls by default: q and kᵀ each multiplied by
// √(1/√D), the scale computed from the query's Shape (folded). Its data
// sets are of 2, 1 and 3 images from seed on.
func vitCase(w vitWeights, name string, sdpa bool, seed float64) genCase {
	sets := vitSets(w, linear, patchConv, seed)
	return genCase{name: name, opset: 17, int8: true, g: vitGraph(vitSmall, w, sdpa), ins: sets[0].ins, outs: sets[0].outs, more: sets[1:]}
}

// vitGraph is the ViT of size s with weights w, batch symbolic, its
// attention as vitCase's sdpa says.
func vitGraph(s vitSize, w vitWeights, sdpa bool) graph {
	var inits []*onnx.Tensor
	dims := s.dims()
	for _, name := range slices.Sorted(maps.Keys(dims)) {
		inits = append(inits, onnx.NewFloat32(name, dims[name], w[name]))
	}
	ints := func(name string, v ...int64) *onnx.Tensor {
		return intTensor(name, onnx.Int64, []int64{int64(len(v))}, v)
	}
	inits = append(inits, ints("split", s.heads, s.headDim()), ints("merge", s.hidden), ints("lead_start", 0), ints("lead_end", 2),
		ints("minus1", -1), ints("minus1x2", -1, -1), ints("minus1x3", -1, -1, -1), ints("ones3", 1, 1, 1), ints("zero_i", 0),
		intTensor("first", onnx.Int64, nil, []int64{0}), scalar("sqrt_d", float32(math.Sqrt(float64(s.headDim())))),
		scalar("sqrt2", float32(math.Sqrt2)), scalar("one", 1), scalar("half", 0.5))
	if sdpa {
		inits = append(inits, ints("last_start", -1), ints("last_end", math.MaxInt64))
	}
	nodes := vitEmbeddings(s)
	x := "emb"
	for l := range s.layers {
		var ns []node
		ns, x = vitLayer(fmt.Sprintf("l%d.", l), x, sdpa)
		nodes = append(nodes, ns...)
	}
	nodes = append(nodes,
		node{op: "LayerNormalization", inputs: []string{x, "lnf_g", "lnf_b"}, outputs: []string{"last_hidden_state"}, attrs: []attr{fAttr("epsilon", vitEps)}},
		node{op: "Gather", inputs: []string{"last_hidden_state", "first"}, outputs: []string{"cls_out"}, attrs: []attr{iAttr("axis", 1)}},
		node{op: "Gemm", inputs: []string{"cls_out", "head_w", "head_b"}, outputs: []string{"logits"}, attrs: []attr{fAttr("alpha", 1), fAttr("beta", 1), iAttr("transB", 1)}})
	return graph{
		nodes:  nodes,
		inits:  inits,
		inputs: []valueInfo{{name: "pixel_values", typ: onnx.Float, dims: []int64{0, s.channels, s.img, s.img}, params: []string{"batch", "", "", ""}}},
		outputs: []valueInfo{{name: "last_hidden_state", typ: onnx.Float, dims: []int64{0, s.tokens(), s.hidden}, params: []string{"batch", "", ""}},
			{name: "logits", typ: onnx.Float, dims: []int64{0, s.classes}, params: []string{"batch", ""}}},
	}
}

// vitEmbeddings writes ViTEmbeddings: the patch Conv flattened and
// transposed to tokens, the class token expanded and concatenated in
// front, and the position embedding added; s gives the patch size.
func vitEmbeddings(s vitSize) []node {
	return []node{
		{op: "Conv", inputs: []string{"pixel_values", "patch_w", "patch_b"}, outputs: []string{"patches"},
			attrs: []attr{isAttr("kernel_shape", s.patch, s.patch), isAttr("strides", s.patch, s.patch), isAttr("pads", 0, 0, 0, 0), isAttr("dilations", 1, 1), iAttr("group", 1)}},
		// flatten(2): Shape → Slice [0:2] → Concat(−1) → Reshape.
		{op: "Shape", inputs: []string{"patches"}, outputs: []string{"patches_shape"}},
		{op: "Slice", inputs: []string{"patches_shape", "lead_start", "lead_end"}, outputs: []string{"patches_lead"}},
		{op: "Concat", inputs: []string{"patches_lead", "minus1"}, outputs: []string{"flat_to"}, attrs: []attr{iAttr("axis", 0)}},
		{op: "Reshape", inputs: []string{"patches", "flat_to"}, outputs: []string{"flat"}},
		{op: "Transpose", inputs: []string{"flat"}, outputs: []string{"tokens"}, attrs: []attr{isAttr("perm", 0, 2, 1)}},
		// cls_token.expand(batch, −1, −1): the batch from the input's
		// Shape, each −1 replaced by 1 (Expand broadcasts it).
		{op: "Shape", inputs: []string{"pixel_values"}, outputs: []string{"px_shape"}},
		{op: "Gather", inputs: []string{"px_shape", "first"}, outputs: []string{"batch"}, attrs: []attr{iAttr("axis", 0)}},
		{op: "Unsqueeze", inputs: []string{"batch", "zero_i"}, outputs: []string{"batch1"}},
		{op: "Concat", inputs: []string{"batch1", "minus1x2"}, outputs: []string{"cls_size"}, attrs: []attr{iAttr("axis", 0)}},
		{op: "Equal", inputs: []string{"cls_size", "minus1x3"}, outputs: []string{"cls_neg"}},
		{op: "Where", inputs: []string{"cls_neg", "ones3", "cls_size"}, outputs: []string{"cls_to"}},
		{op: "Expand", inputs: []string{"cls", "cls_to"}, outputs: []string{"cls_tokens"}},
		{op: "Concat", inputs: []string{"cls_tokens", "tokens"}, outputs: []string{"emb_cat"}, attrs: []attr{iAttr("axis", 1)}},
		{op: "Add", inputs: []string{"emb_cat", "pos"}, outputs: []string{"emb"}},
	}
}

// vitLayer writes one pre-norm ViTLayer reading x, its scores as
// vitCase's sdpa says.
func vitLayer(p, x string, sdpa bool) ([]node, string) {
	n := func(s string) string { return p + s }
	lin := func(in, wn, bn, out string) []node { return linearNodes(in, n(wn), n(bn), n(out)) }
	heads := func(in, out string) []node { return headNodes(n(in), n(out)) }
	ns := []node{{op: "LayerNormalization", inputs: []string{x, n("g1"), n("be1")}, outputs: []string{n("ln1")}, attrs: []attr{fAttr("epsilon", vitEps)}}}
	ns = append(ns, lin(n("ln1"), "wq", "bq", "q")...)
	ns = append(ns, lin(n("ln1"), "wk", "bk", "k")...)
	ns = append(ns, lin(n("ln1"), "wv", "bv", "v")...)
	ns = append(ns, heads("q", "qh")...)
	ns = append(ns, heads("k", "kh")...)
	ns = append(ns, heads("v", "vh")...)
	ns = append(ns, node{op: "Transpose", inputs: []string{n("kh")}, outputs: []string{n("kt")}, attrs: []attr{isAttr("perm", 0, 1, 3, 2)}})
	if sdpa {
		ns = append(ns,
			node{op: "Shape", inputs: []string{n("qh")}, outputs: []string{n("q_shape")}},
			node{op: "Slice", inputs: []string{n("q_shape"), "last_start", "last_end"}, outputs: []string{n("q_e")}},
			node{op: "Cast", inputs: []string{n("q_e")}, outputs: []string{n("q_ef")}, attrs: []attr{iAttr("to", int64(onnx.Float))}},
			node{op: "Sqrt", inputs: []string{n("q_ef")}, outputs: []string{n("q_sqrt")}},
			node{op: "Div", inputs: []string{"one", n("q_sqrt")}, outputs: []string{n("scale")}},
			node{op: "Sqrt", inputs: []string{n("scale")}, outputs: []string{n("scale_sqrt")}},
			node{op: "Mul", inputs: []string{n("qh"), n("scale_sqrt")}, outputs: []string{n("q_scaled")}},
			node{op: "Mul", inputs: []string{n("kt"), n("scale_sqrt")}, outputs: []string{n("k_scaled")}},
			node{op: "MatMul", inputs: []string{n("q_scaled"), n("k_scaled")}, outputs: []string{n("scaled")}})
	} else {
		ns = append(ns,
			node{op: "MatMul", inputs: []string{n("qh"), n("kt")}, outputs: []string{n("scores")}},
			node{op: "Div", inputs: []string{n("scores"), "sqrt_d"}, outputs: []string{n("scaled")}})
	}
	ns = append(ns,
		node{op: "Softmax", inputs: []string{n("scaled")}, outputs: []string{n("probs")}, attrs: []attr{iAttr("axis", -1)}},
		node{op: "MatMul", inputs: []string{n("probs"), n("vh")}, outputs: []string{n("ctx")}},
		node{op: "Transpose", inputs: []string{n("ctx")}, outputs: []string{n("ctx_t")}, attrs: []attr{isAttr("perm", 0, 2, 1, 3)}})
	ns = append(ns, viewNodes(n("ctx_t"), n("ctx_m"), "merge")...)
	ns = append(ns, lin(n("ctx_m"), "wo", "bo", "attn")...)
	ns = append(ns,
		node{op: "Add", inputs: []string{n("attn"), x}, outputs: []string{n("res1")}},
		node{op: "LayerNormalization", inputs: []string{n("res1"), n("g2"), n("be2")}, outputs: []string{n("ln2")}, attrs: []attr{fAttr("epsilon", vitEps)}})
	ns = append(ns, lin(n("ln2"), "w1", "b1", "ff")...)
	ns = append(ns, geluErf(n)...)
	ns = append(ns, lin(n("gelu"), "w2", "b2", "ff2")...)
	ns = append(ns, node{op: "Add", inputs: []string{n("ff2"), n("res1")}, outputs: []string{n("out")}})
	return ns, n("out")
}
