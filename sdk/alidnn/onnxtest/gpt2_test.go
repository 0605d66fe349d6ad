package onnxtest_test

import (
	"maps"
	"math"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// A GPT-2-style decoder as torch.onnx writes HuggingFace's GPT2Model with
// one block (opset 17): INT64 input_ids and attention_mask [batch, seq],
// batch and sequence symbolic. Token and position embeddings (the position ids a Range over
// the sequence, folded); the block pre-norm: LayerNormalization, the fused
// QKV projection as Conv1D writes it (Reshape to [-1, 64], Gemm, Reshape
// back) and Split into query, key and value, 4 heads of 16, the scores
// divided by √16 and the causal mask applied as
// Where(bias[:, :, 0:seq, 0:seq], scores, finfo(float32).min) — the
// boolean buffer sliced to the sequence, folded — plus the padding mask
// (1 − attention_mask[:, None, None, :]) · finfo.min, Softmax, the heads
// merged and projected, a residual; LayerNormalization, an MLP 64 → 256 →
// 64 with gelu_new (0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))), a
// residual; the final LayerNormalization. Random weights; outputs from a
// float64 forward pass.

func init() { caseFamilies = append(caseFamilies, gpt2Cases) }

const (
	gptV, gptP, gptH, gptHeads, gptD, gptF = 100, 32, 64, 4, 16, 256
	gptEps                                 = 1e-5
)

type gptWeights map[string][]float32

func gptDims() map[string][]int64 { return gptDefault.dims() }

func newGptWeights() gptWeights {
	w := gptWeights{}
	seed := 500.0
	dims := gptDims()
	for _, name := range slices.Sorted(maps.Keys(dims)) {
		scale, shift := float32(0.06), float32(0)
		switch {
		case name == "wte" || name == "wpe":
			scale = 0.3
		case name[len(name)-2:] == "_g":
			scale, shift = 0.02, 1
		case len(dims[name]) == 1:
			scale = 0.02
		case name == "mproj_w":
			scale = 0.04
		}
		seed++
		w[name] = mapF(data(dims[name], seed), func(v float32) float32 { return v*scale + shift })
	}
	return w
}

// forward is the block's last_hidden_state [N, S, gptH] in float64.
func (w gptWeights) forward(ids, mask []int64, N, S int) []float64 {
	x := make([]float64, N*S*gptH)
	for t := range N * S {
		for e := range gptH {
			x[t*gptH+e] = float64(w["wte"][int(ids[t])*gptH+e]) + float64(w["wpe"][(t%S)*gptH+e])
		}
	}
	h := layerNormEps(x, w["ln1_g"], w["ln1_b"], gptH, gptEps)
	qkv := linear(h, w["attn_w"], w["attn_b"], gptH, 3*gptH)
	q, k, v := make([]float64, N*S*gptH), make([]float64, N*S*gptH), make([]float64, N*S*gptH)
	for t := range N * S {
		copy(q[t*gptH:], qkv[t*3*gptH:t*3*gptH+gptH])
		copy(k[t*gptH:], qkv[t*3*gptH+gptH:t*3*gptH+2*gptH])
		copy(v[t*gptH:], qkv[t*3*gptH+2*gptH:t*3*gptH+3*gptH])
	}
	// Where replaces a future position's score by finfo.min; its weight
	// after Softmax is 0 as with any score that far below the row's.
	causal := func(n, i, j int) float64 {
		b := (1 - float64(mask[n*S+j])) * -math.MaxFloat32
		if j > i {
			return b - math.MaxFloat32
		}
		return b
	}
	a := linear(attention64(q, k, v, N, S, gptHeads, gptD, causal), w["proj_w"], w["proj_b"], gptH, gptH)
	for k := range a {
		x[k] += a[k]
	}
	h = layerNormEps(x, w["ln2_g"], w["ln2_b"], gptH, gptEps)
	f := linear(h, w["fc_w"], w["fc_b"], gptH, gptF)
	for k, z := range f {
		f[k] = 0.5 * z * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(z+0.044715*z*z*z)))
	}
	m := linear(f, w["mproj_w"], w["mproj_b"], gptF, gptH)
	for k := range m {
		x[k] += m[k]
	}
	return layerNormEps(x, w["lnf_g"], w["lnf_b"], gptH, gptEps)
}

func (w gptWeights) set(N, S int, seed int64) dataSet {
	ids, mask := make([]int64, N*S), make([]int64, N*S)
	for t := range ids {
		ids[t] = (seed*13 + int64(t)*29 + int64(t*t)*7) % gptV
		// Every second sequence ends in S/4 pad tokens.
		if t/S%2 == 0 || t%S < S-S/4 {
			mask[t] = 1
		}
	}
	d := []int64{int64(N), int64(S)}
	return dataSet{
		ins:  []*onnx.Tensor{intTensor("input_ids", onnx.Int64, d, ids), intTensor("attention_mask", onnx.Int64, d, mask)},
		outs: []*onnx.Tensor{onnx.NewFloat32("last_hidden_state", []int64{int64(N), int64(S), gptH}, to32(w.forward(ids, mask, N, S)))},
	}
}

func gpt2Cases() []genCase {
	w := newGptWeights()
	g := gpt2Graph(w)
	gptCase := func(name string, w gptWeights, g graph) genCase {
		first := w.set(1, 16, 1)
		return genCase{name: name, opset: 17, g: g, ins: first.ins, outs: first.outs, more: []dataSet{w.set(2, 16, 2), w.set(2, 7, 3)}}
	}
	fp32 := gptCase("gpt2_decoder_block", w, g)
	fp32.int8 = true
	// quantize_dynamic leaves Conv1D's Gemms fp32 (Gemm is not in its
	// IntegerOps registry): it quantises the embeddings' Gathers only.
	dw := maps.Clone(w)
	for _, name := range []string{"wte", "wpe"} {
		dw[name] = dequantised(w[name])
	}
	return []genCase{fp32, gptCase("gpt2_decoder_block_dynamic_int8", dw, quantizeDynamic(g))}
}

// gpt2Graph is the block's graph with the weights w.
func gpt2Graph(w gptWeights) graph {
	dims := gptDims()
	var inits []*onnx.Tensor
	for _, name := range slices.Sorted(maps.Keys(dims)) {
		inits = append(inits, onnx.NewFloat32(name, dims[name], w[name]))
	}
	tri := make([]int64, gptP*gptP)
	for i := range gptP {
		for j := 0; j <= i; j++ {
			tri[i*gptP+j] = 1
		}
	}
	ints := func(name string, v ...int64) *onnx.Tensor {
		return intTensor(name, onnx.Int64, []int64{int64(len(v))}, v)
	}
	inits = append(inits, intTensor("bias", onnx.Bool, []int64{1, 1, gptP, gptP}, tri),
		ints("split", gptHeads, gptD), ints("merge", gptH), ints("lead_start", 0), ints("lead_end", 2), ints("minus1", -1),
		ints("one_i", 1), ints("axis2", 2), ints("axis3", 3), ints("qkv_sizes", gptH, gptH, gptH),
		ints("qkv_nf", 3*gptH), ints("fc_nf", gptF), ints("axes_12", 1, 2),
		intTensor("r0", onnx.Int64, nil, []int64{0}), intTensor("r1", onnx.Int64, nil, []int64{1}),
		scalar("sqrt_d", 4), scalar("mask_min", -math.MaxFloat32), scalar("half", 0.5), scalar("three", 3),
		scalar("c_cube", 0.044715), scalar("c_sqrt", float32(math.Sqrt(2/math.Pi))), scalar("one", 1))
	sym := []string{"batch", "seq"}
	return graph{
		nodes: gpt2Nodes(),
		inits: inits,
		inputs: []valueInfo{{name: "input_ids", typ: onnx.Int64, dims: []int64{0, 0}, params: sym},
			{name: "attention_mask", typ: onnx.Int64, dims: []int64{0, 0}, params: sym}},
		outputs: []valueInfo{{name: "last_hidden_state", typ: onnx.Float, dims: []int64{0, 0, gptH}, params: []string{"batch", "seq", ""}}},
	}
}

// conv1d writes HuggingFace's Conv1D as torch.onnx does: x.view(-1,
// x.size(-1)), addmm (Gemm), .view(x.size()[:-1] + (nf,)).
func conv1d(x, wn, bn, nf, out string) []node {
	return []node{
		{op: "Shape", inputs: []string{x}, outputs: []string{out + "_shape"}},
		{op: "Gather", inputs: []string{out + "_shape", "minus1"}, outputs: []string{out + "_last"}, attrs: []attr{iAttr("axis", 0)}},
		{op: "Concat", inputs: []string{"minus1", out + "_last"}, outputs: []string{out + "_2d"}, attrs: []attr{iAttr("axis", 0)}},
		{op: "Reshape", inputs: []string{x, out + "_2d"}, outputs: []string{out + "_x2"}},
		{op: "Gemm", inputs: []string{out + "_x2", wn, bn}, outputs: []string{out + "_mm"}, attrs: []attr{fAttr("alpha", 1), fAttr("beta", 1)}},
		{op: "Slice", inputs: []string{out + "_shape", "lead_start", "minus1"}, outputs: []string{out + "_lead"}},
		{op: "Concat", inputs: []string{out + "_lead", nf}, outputs: []string{out + "_to"}, attrs: []attr{iAttr("axis", 0)}},
		{op: "Reshape", inputs: []string{out + "_mm", out + "_to"}, outputs: []string{out}},
	}
}

func gpt2Nodes() []node {
	view, heads := viewNodes, headNodes
	ns := []node{
		// position_ids = arange(0, seq).unsqueeze(0)
		{op: "Shape", inputs: []string{"input_ids"}, outputs: []string{"ids_shape"}},
		{op: "Gather", inputs: []string{"ids_shape", "r1"}, outputs: []string{"seq_len"}, attrs: []attr{iAttr("axis", 0)}},
		{op: "Range", inputs: []string{"r0", "seq_len", "r1"}, outputs: []string{"pos_range"}},
		{op: "Unsqueeze", inputs: []string{"pos_range", "lead_start"}, outputs: []string{"pos_ids"}},
		{op: "Gather", inputs: []string{"wte", "input_ids"}, outputs: []string{"tok_emb"}},
		{op: "Gather", inputs: []string{"wpe", "pos_ids"}, outputs: []string{"pos_emb"}},
		{op: "Add", inputs: []string{"tok_emb", "pos_emb"}, outputs: []string{"h0"}},
		{op: "LayerNormalization", inputs: []string{"h0", "ln1_g", "ln1_b"}, outputs: []string{"ln1"}, attrs: []attr{fAttr("epsilon", gptEps)}},
	}
	ns = append(ns, conv1d("ln1", "attn_w", "attn_b", "qkv_nf", "qkv")...)
	ns = append(ns, node{op: "Split", inputs: []string{"qkv", "qkv_sizes"}, outputs: []string{"q", "k", "v"}, attrs: []attr{iAttr("axis", 2)}})
	ns = append(ns, heads("q", "qh")...)
	ns = append(ns, heads("k", "kh")...)
	ns = append(ns, heads("v", "vh")...)
	ns = append(ns,
		node{op: "Transpose", inputs: []string{"kh"}, outputs: []string{"kt"}, attrs: []attr{isAttr("perm", 0, 1, 3, 2)}},
		node{op: "MatMul", inputs: []string{"qh", "kt"}, outputs: []string{"scores"}},
		node{op: "Div", inputs: []string{"scores", "sqrt_d"}, outputs: []string{"scaled"}},
		// bias[:, :, seq − seq : seq, :seq]
		node{op: "Sub", inputs: []string{"seq_len", "seq_len"}, outputs: []string{"q_start"}},
		node{op: "Unsqueeze", inputs: []string{"q_start", "lead_start"}, outputs: []string{"q_start1"}},
		node{op: "Unsqueeze", inputs: []string{"seq_len", "lead_start"}, outputs: []string{"seq_len1"}},
		node{op: "Slice", inputs: []string{"bias", "q_start1", "seq_len1", "axis2"}, outputs: []string{"bias_rows"}},
		node{op: "Slice", inputs: []string{"bias_rows", "lead_start", "seq_len1", "axis3"}, outputs: []string{"causal"}},
		node{op: "Where", inputs: []string{"causal", "scaled", "mask_min"}, outputs: []string{"causal_scores"}},
		// attention_mask[:, None, None, :] → (1 − m) · finfo.min, added.
		node{op: "Unsqueeze", inputs: []string{"attention_mask", "axes_12"}, outputs: []string{"mask4"}},
		node{op: "Cast", inputs: []string{"mask4"}, outputs: []string{"mask_f"}, attrs: []attr{iAttr("to", int64(onnx.Float))}},
		node{op: "Sub", inputs: []string{"one", "mask_f"}, outputs: []string{"mask_inv"}},
		node{op: "Mul", inputs: []string{"mask_inv", "mask_min"}, outputs: []string{"ext_mask"}},
		node{op: "Add", inputs: []string{"causal_scores", "ext_mask"}, outputs: []string{"masked"}},
		node{op: "Softmax", inputs: []string{"masked"}, outputs: []string{"probs"}, attrs: []attr{iAttr("axis", -1)}},
		node{op: "MatMul", inputs: []string{"probs", "vh"}, outputs: []string{"ctx"}},
		node{op: "Transpose", inputs: []string{"ctx"}, outputs: []string{"ctx_t"}, attrs: []attr{isAttr("perm", 0, 2, 1, 3)}})
	ns = append(ns, view("ctx_t", "ctx_m", "merge")...)
	ns = append(ns, conv1d("ctx_m", "proj_w", "proj_b", "merge", "attn")...)
	ns = append(ns,
		node{op: "Add", inputs: []string{"attn", "h0"}, outputs: []string{"h1"}},
		node{op: "LayerNormalization", inputs: []string{"h1", "ln2_g", "ln2_b"}, outputs: []string{"ln2"}, attrs: []attr{fAttr("epsilon", gptEps)}})
	ns = append(ns, conv1d("ln2", "fc_w", "fc_b", "fc_nf", "fc")...)
	ns = append(ns,
		node{op: "Mul", inputs: []string{"half", "fc"}, outputs: []string{"g_half"}},
		node{op: "Pow", inputs: []string{"fc", "three"}, outputs: []string{"g_cube"}},
		node{op: "Mul", inputs: []string{"c_cube", "g_cube"}, outputs: []string{"g_cube_c"}},
		node{op: "Add", inputs: []string{"fc", "g_cube_c"}, outputs: []string{"g_inner"}},
		node{op: "Mul", inputs: []string{"c_sqrt", "g_inner"}, outputs: []string{"g_scaled"}},
		node{op: "Tanh", inputs: []string{"g_scaled"}, outputs: []string{"g_tanh"}},
		node{op: "Add", inputs: []string{"one", "g_tanh"}, outputs: []string{"g_1"}},
		node{op: "Mul", inputs: []string{"g_half", "g_1"}, outputs: []string{"gelu"}})
	ns = append(ns, conv1d("gelu", "mproj_w", "mproj_b", "merge", "mproj")...)
	return append(ns,
		node{op: "Add", inputs: []string{"h1", "mproj"}, outputs: []string{"h2"}},
		node{op: "LayerNormalization", inputs: []string{"h2", "lnf_g", "lnf_b"}, outputs: []string{"last_hidden_state"}, attrs: []attr{fAttr("epsilon", gptEps)}})
}
