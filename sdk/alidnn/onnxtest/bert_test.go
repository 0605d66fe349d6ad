package onnxtest_test

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// A BERT encoder as torch.onnx writes HuggingFace's BertModel (opset 17,
// last_hidden_state and pooler_output): INT64 input_ids, token_type_ids and
// attention_mask [batch, seq], batch and sequence symbolic. Embeddings:
// Gathers of the word and token-type tables by the inputs, the position
// table by the position_ids buffer sliced to the sequence (folded), summed
// and layer-normalised. The extended attention mask as BertModel builds it:
// Unsqueeze → Cast to FLOAT → Sub(1, ·) → Mul(·, finfo(float32).min), added
// to the scores. Two post-norm layers of hidden 64, 4 heads of 16 and an
// intermediate 256 with erf GELU; the pooler, tanh of a Linear of the
// first token (Gather axis 1, Gemm with transB). Random weights; outputs
// from a float64 forward pass.

func init() { caseFamilies = append(caseFamilies, bertCases) }

const (
	bertV, bertT, bertP             = 100, 2, 32 // vocabulary, token types, positions
	bertH, bertHeads, bertD         = 64, 4, 16
	bertF, bertLayers               = 256, 2
	bertEps                         = 1e-12
	bertMaskMin             float32 = -math.MaxFloat32 // torch.finfo(torch.float32).min
)

// bertSize is a BERT's dimensions: the generated case's (bertSmall) and
// BERT-base's, which the benchmark builds (bertBase).
type bertSize struct {
	vocab, types, positions   int64
	hidden, heads, ff, layers int64
}

var (
	bertSmall = bertSize{bertV, bertT, bertP, bertH, bertHeads, bertF, bertLayers}
	bertBase  = bertSize{30522, 2, 512, 768, 12, 3072, 12}
)

func (s bertSize) headDim() int64 { return s.hidden / s.heads }

type bertWeights map[string][]float32

func (s bertSize) dims() map[string][]int64 {
	h := s.hidden
	d := map[string][]int64{"word": {s.vocab, h}, "pos": {s.positions, h}, "type": {s.types, h}, "emb_g": {h}, "emb_b": {h},
		"pool_w": {h, h}, "pool_b": {h}}
	encoderLayerDims(d, int(s.layers), h, s.ff)
	return d
}

func newBertWeights(s bertSize) bertWeights {
	w := bertWeights{}
	seed := 400.0
	all := s.dims()
	for _, name := range slices.Sorted(maps.Keys(all)) {
		dims := all[name]
		scale, shift := float32(0.06), float32(0)
		switch {
		case name == "word" || name == "pos" || name == "type":
			scale = 0.2
		case len(dims) == 1 && (name[len(name)-2:] == "g1" || name[len(name)-2:] == "g2" || name == "emb_g"):
			scale, shift = 0.02, 1
		case len(dims) == 1:
			scale = 0.02
		case name[len(name)-2:] == "w2":
			scale = 0.04
		}
		seed++
		w[name] = mapF(data(dims, seed), func(v float32) float32 { return v*scale + shift })
	}
	return w
}

// layerNormEps normalises rows of n values.
func layerNormEps(x []float64, g, b []float32, n int, eps float32) []float64 {
	y := make([]float64, len(x))
	for r := 0; r < len(x); r += n {
		var m, v float64
		for _, a := range x[r : r+n] {
			m += a
		}
		m /= float64(n)
		for _, a := range x[r : r+n] {
			v += (a - m) * (a - m)
		}
		s := math.Sqrt(v/float64(n) + float64(eps))
		for k, a := range x[r : r+n] {
			y[r+k] = (a-m)/s*float64(g[k]) + float64(b[k])
		}
	}
	return y
}

// attention64 is multi-head attention of q, k, v [N,S,H] in float64, the
// scores scaled by 1/√D plus bias(n, i, j).
func attention64(q, k, v []float64, N, S, heads, D int, bias func(n, i, j int) float64) []float64 {
	H := heads * D
	ctx := make([]float64, N*S*H)
	for n := range N {
		for h := range heads {
			for i := range S {
				sc := make([]float64, S)
				m := math.Inf(-1)
				for j := range S {
					var s float64
					for d := range D {
						s += q[(n*S+i)*H+h*D+d] * k[(n*S+j)*H+h*D+d]
					}
					sc[j] = s/math.Sqrt(float64(D)) + bias(n, i, j)
					m = math.Max(m, sc[j])
				}
				var sum float64
				for j := range S {
					sc[j] = math.Exp(sc[j] - m)
					sum += sc[j]
				}
				for d := range D {
					var c float64
					for j := range S {
						c += sc[j] / sum * v[(n*S+j)*H+h*D+d]
					}
					ctx[(n*S+i)*H+h*D+d] = c
				}
			}
		}
	}
	return ctx
}

// linearFunc is nn.Linear in float64 as a case computes it: x [rows, k] ·
// w [k, n] + b; linear, or dynLinear for a dynamically quantised graph.
type linearFunc func(x []float64, w, b []float32, k, n int) []float64

// forward runs the encoder in float64, its MatMuls' linear layers by lin:
// last_hidden_state and pooler_output, tanh(dense(the first token)) with
// the dense's weights [out, in] as nn.Linear holds them.
func (w bertWeights) forward(lin linearFunc, ids, types, mask []int64, N, S int) ([]float32, []float32) {
	x, pool := w.forward64(lin, ids, types, mask, N, S)
	return to32(x), to32(pool)
}

// forward64 is forward before its outputs are rounded to float32.
func (w bertWeights) forward64(lin linearFunc, ids, types, mask []int64, N, S int) ([]float64, []float64) {
	x := make([]float64, N*S*bertH)
	for n := range N {
		for s := range S {
			t := n*S + s
			for e := range bertH {
				x[t*bertH+e] = float64(w["word"][int(ids[t])*bertH+e]) + float64(w["type"][int(types[t])*bertH+e]) + float64(w["pos"][s*bertH+e])
			}
		}
	}
	x = layerNormEps(x, w["emb_g"], w["emb_b"], bertH, bertEps)
	bias := func(n, _, j int) float64 { return (1 - float64(mask[n*S+j])) * float64(bertMaskMin) }
	for l := range bertLayers {
		p := fmt.Sprintf("l%d.", l)
		q, k, v := lin(x, w[p+"wq"], w[p+"bq"], bertH, bertH), lin(x, w[p+"wk"], w[p+"bk"], bertH, bertH), lin(x, w[p+"wv"], w[p+"bv"], bertH, bertH)
		o := lin(attention64(q, k, v, N, S, bertHeads, bertD, bias), w[p+"wo"], w[p+"bo"], bertH, bertH)
		for k := range o {
			o[k] += x[k]
		}
		l1 := layerNormEps(o, w[p+"g1"], w[p+"be1"], bertH, bertEps)
		f := lin(l1, w[p+"w1"], w[p+"b1"], bertH, bertF)
		for k, a := range f {
			f[k] = a * 0.5 * (1 + math.Erf(a/math.Sqrt2))
		}
		f2 := lin(f, w[p+"w2"], w[p+"b2"], bertF, bertH)
		for k := range f2 {
			f2[k] += l1[k]
		}
		x = layerNormEps(f2, w[p+"g2"], w[p+"be2"], bertH, bertEps)
	}
	pool := make([]float64, N*bertH)
	for n := range N {
		for o := range bertH {
			v := float64(w["pool_b"][o])
			for i := range bertH {
				v += x[n*S*bertH+i] * float64(w["pool_w"][o*bertH+i])
			}
			pool[n*bertH+o] = math.Tanh(v)
		}
	}
	return x, pool
}

func intTensor(name string, typ onnx.DataType, dims []int64, v []int64) *onnx.Tensor {
	t, err := onnx.NewInt(name, typ, dims, v)
	if err != nil {
		panic(err)
	}
	return t
}

// bertSet is one data set: ids spread over the vocabulary, the second
// segment's tokens of type 1, and every second sequence's last pad tokens
// masked out; outputs from forward with lin.
func (w bertWeights) bertSet(lin linearFunc, N, S int, seed int64) dataSet {
	ids, types, mask := make([]int64, N*S), make([]int64, N*S), make([]int64, N*S)
	for n := range N {
		pad := 0
		if n%2 == 1 {
			pad = S / 4
		}
		for s := range S {
			t := n*S + s
			ids[t] = (seed*7 + int64(t)*37 + int64(t*t)*11) % bertV
			if s >= S/2 {
				types[t] = 1
			}
			if s < S-pad {
				mask[t] = 1
			}
		}
	}
	d := []int64{int64(N), int64(S)}
	hidden, pool := w.forward(lin, ids, types, mask, N, S)
	return dataSet{
		ins: []*onnx.Tensor{intTensor("input_ids", onnx.Int64, d, ids), intTensor("attention_mask", onnx.Int64, d, mask),
			intTensor("token_type_ids", onnx.Int64, d, types)},
		outs: []*onnx.Tensor{onnx.NewFloat32("last_hidden_state", []int64{int64(N), int64(S), bertH}, hidden),
			onnx.NewFloat32("pooler_output", []int64{int64(N), bertH}, pool)},
	}
}

func bertCases() []genCase {
	w := newBertWeights(bertSmall)
	g := bertGraph(bertSmall, w)
	bertCase := func(name string, w bertWeights, g graph, lin linearFunc) genCase {
		first := w.bertSet(lin, 2, 16, 1)
		return genCase{name: name, opset: 17, g: g, ins: first.ins, outs: first.outs,
			more: []dataSet{w.bertSet(lin, 1, 16, 2), w.bertSet(lin, 2, 9, 3), w.bertSet(lin, 2, 20, 4)}}
	}
	fp32 := bertCase("bert_encoder", w, g, linear)
	fp32.int8 = true
	// The dynamically quantised graph gathers int8 embeddings: its
	// reference, dequantised ones.
	dw := maps.Clone(w)
	for _, name := range []string{"word", "type", "pos"} {
		dw[name] = dequantised(w[name])
	}
	return []genCase{fp32, bertCase("bert_encoder_dynamic_int8", dw, quantizeDynamic(g), dynLinear)}
}

// bertGraph is the encoder of size s with weights w, batch and sequence
// symbolic.
func bertGraph(s bertSize, w bertWeights) graph {
	var inits []*onnx.Tensor
	dims := s.dims()
	for _, name := range slices.Sorted(maps.Keys(dims)) {
		inits = append(inits, onnx.NewFloat32(name, dims[name], w[name]))
	}
	positions := make([]int64, s.positions)
	for k := range positions {
		positions[k] = int64(k)
	}
	ints := func(name string, v ...int64) *onnx.Tensor {
		return intTensor(name, onnx.Int64, []int64{int64(len(v))}, v)
	}
	inits = append(inits, intTensor("position_ids", onnx.Int64, []int64{1, s.positions}, positions),
		ints("split", s.heads, s.headDim()), ints("merge", s.hidden), ints("lead_start", 0), ints("lead_end", 2),
		ints("one_i", 1), ints("zero_i", 0), intTensor("first", onnx.Int64, nil, []int64{0}), ints("axes_12", 1, 2),
		scalar("sqrt_d", float32(math.Sqrt(float64(s.headDim())))), scalar("sqrt2", float32(math.Sqrt2)),
		scalar("one", 1), scalar("half", 0.5), scalar("mask_min", bertMaskMin))
	nodes := bertEmbeddings()
	x := "emb"
	for l := range s.layers {
		var ns []node
		ns, x = bertLayer(fmt.Sprintf("l%d.", l), x, l == s.layers-1)
		nodes = append(nodes, ns...)
	}
	// BertPooler: hidden_states[:, 0] → Linear (Gemm, transB) → Tanh.
	nodes = append(nodes,
		node{op: "Gather", inputs: []string{x, "first"}, outputs: []string{"cls"}, attrs: []attr{iAttr("axis", 1)}},
		node{op: "Gemm", inputs: []string{"cls", "pool_w", "pool_b"}, outputs: []string{"pool_lin"}, attrs: []attr{fAttr("alpha", 1), fAttr("beta", 1), iAttr("transB", 1)}},
		node{op: "Tanh", inputs: []string{"pool_lin"}, outputs: []string{"pooler_output"}})
	sym := []string{"batch", "seq"}
	return graph{
		nodes: nodes,
		inits: inits,
		inputs: []valueInfo{
			{name: "input_ids", typ: onnx.Int64, dims: []int64{0, 0}, params: sym},
			{name: "attention_mask", typ: onnx.Int64, dims: []int64{0, 0}, params: sym},
			{name: "token_type_ids", typ: onnx.Int64, dims: []int64{0, 0}, params: sym},
		},
		outputs: []valueInfo{{name: "last_hidden_state", typ: onnx.Float, dims: []int64{0, 0, s.hidden}, params: []string{"batch", "seq", ""}},
			{name: "pooler_output", typ: onnx.Float, dims: []int64{0, s.hidden}, params: []string{"batch", ""}}},
	}
}

// bertEmbeddings writes BertEmbeddings and the extended attention mask.
func bertEmbeddings() []node {
	return []node{
		// position_ids[:, 0:seq]: Shape → Gather(1) → Unsqueeze → Slice.
		{op: "Shape", inputs: []string{"input_ids"}, outputs: []string{"ids_shape"}},
		{op: "Gather", inputs: []string{"ids_shape", "one_i"}, outputs: []string{"seq_len"}, attrs: []attr{iAttr("axis", 0)}},
		{op: "Slice", inputs: []string{"position_ids", "zero_i", "seq_len", "one_i"}, outputs: []string{"pos_ids"}},
		{op: "Gather", inputs: []string{"word", "input_ids"}, outputs: []string{"word_emb"}},
		{op: "Gather", inputs: []string{"type", "token_type_ids"}, outputs: []string{"type_emb"}},
		{op: "Add", inputs: []string{"word_emb", "type_emb"}, outputs: []string{"emb_wt"}},
		{op: "Gather", inputs: []string{"pos", "pos_ids"}, outputs: []string{"pos_emb"}},
		{op: "Add", inputs: []string{"emb_wt", "pos_emb"}, outputs: []string{"emb_sum"}},
		{op: "LayerNormalization", inputs: []string{"emb_sum", "emb_g", "emb_b"}, outputs: []string{"emb"}, attrs: []attr{fAttr("epsilon", bertEps)}},
		// attention_mask[:, None, None, :], (1 − m) · finfo.min.
		{op: "Unsqueeze", inputs: []string{"attention_mask", "axes_12"}, outputs: []string{"mask4"}},
		{op: "Cast", inputs: []string{"mask4"}, outputs: []string{"mask_f"}, attrs: []attr{iAttr("to", int64(onnx.Float))}},
		{op: "Sub", inputs: []string{"one", "mask_f"}, outputs: []string{"mask_inv"}},
		{op: "Mul", inputs: []string{"mask_inv", "mask_min"}, outputs: []string{"ext_mask"}},
	}
}

// bertLayer writes one BertLayer reading x, as encoder_test.go's block
// with the extended mask; the last writes the graph output.
func bertLayer(p, x string, last bool) ([]node, string) {
	n := func(s string) string { return p + s }
	lin := func(in, wn, bn, out string) []node { return linearNodes(in, n(wn), n(bn), n(out)) }
	heads := func(in, out string) []node { return headNodes(n(in), n(out)) }
	var ns []node
	ns = append(ns, lin(x, "wq", "bq", "q")...)
	ns = append(ns, lin(x, "wk", "bk", "k")...)
	ns = append(ns, lin(x, "wv", "bv", "v")...)
	ns = append(ns, heads("q", "qh")...)
	ns = append(ns, heads("k", "kh")...)
	ns = append(ns, heads("v", "vh")...)
	ns = append(ns,
		node{op: "Transpose", inputs: []string{n("kh")}, outputs: []string{n("kt")}, attrs: []attr{isAttr("perm", 0, 1, 3, 2)}},
		node{op: "MatMul", inputs: []string{n("qh"), n("kt")}, outputs: []string{n("scores")}},
		node{op: "Div", inputs: []string{n("scores"), "sqrt_d"}, outputs: []string{n("scaled")}},
		node{op: "Add", inputs: []string{n("scaled"), "ext_mask"}, outputs: []string{n("masked")}},
		node{op: "Softmax", inputs: []string{n("masked")}, outputs: []string{n("probs")}, attrs: []attr{iAttr("axis", -1)}},
		node{op: "MatMul", inputs: []string{n("probs"), n("vh")}, outputs: []string{n("ctx")}},
		node{op: "Transpose", inputs: []string{n("ctx")}, outputs: []string{n("ctx_t")}, attrs: []attr{isAttr("perm", 0, 2, 1, 3)}})
	ns = append(ns, viewNodes(n("ctx_t"), n("ctx_m"), "merge")...)
	ns = append(ns, lin(n("ctx_m"), "wo", "bo", "attn")...)
	out := n("out")
	if last {
		out = "last_hidden_state"
	}
	ns = append(ns,
		node{op: "Add", inputs: []string{n("attn"), x}, outputs: []string{n("res1")}},
		node{op: "LayerNormalization", inputs: []string{n("res1"), n("g1"), n("be1")}, outputs: []string{n("ln1")}, attrs: []attr{fAttr("epsilon", bertEps)}})
	ns = append(ns, lin(n("ln1"), "w1", "b1", "ff")...)
	ns = append(ns, geluErf(n)...)
	ns = append(ns, lin(n("gelu"), "w2", "b2", "ff2")...)
	ns = append(ns,
		node{op: "Add", inputs: []string{n("ff2"), n("ln1")}, outputs: []string{n("res2")}},
		node{op: "LayerNormalization", inputs: []string{n("res2"), n("g2"), n("be2")}, outputs: []string{out}, attrs: []attr{fAttr("epsilon", bertEps)}})
	return ns, out
}
