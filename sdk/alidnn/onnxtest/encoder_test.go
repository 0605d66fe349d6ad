package onnxtest_test

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// One transformer encoder block as torch.onnx writes BERT's (post-norm):
// self-attention with 2 heads of 16 over x [batch, seq, 32] (the heads
// split and merged by views whose shapes come from Shape, Slice and
// Concat, the keys permuted and then transposed), the scores
// scaled by 1/√16 plus an additive mask [batch, 1, 1, seq], Softmax, the
// heads merged and projected, a residual and LayerNormalization, then a
// GELU MLP (32 → 64 → 32, GELU as x·½(1 + erf(x/√2))), a residual and
// LayerNormalization. Batch and sequence are symbolic and bound per data
// set; weights are random, the outputs a float64 forward pass.

func init() { caseFamilies = append(caseFamilies, encoderCases) }

const (
	encE, encH, encD, encF = 32, 2, 16, 64
)

// encoderWeights are the block's parameters, by initializer name.
type encoderWeights map[string][]float32

func (w encoderWeights) tensors() []*onnx.Tensor {
	dims := map[string][]int64{
		"wq": {encE, encE}, "wk": {encE, encE}, "wv": {encE, encE}, "wo": {encE, encE}, "w1": {encE, encF}, "w2": {encF, encE},
		"bq": {encE}, "bk": {encE}, "bv": {encE}, "bo": {encE}, "b1": {encF}, "b2": {encE},
		"g1": {encE}, "be1": {encE}, "g2": {encE}, "be2": {encE},
	}
	var ts []*onnx.Tensor
	for _, name := range []string{"wq", "wk", "wv", "wo", "w1", "w2", "bq", "bk", "bv", "bo", "b1", "b2", "g1", "be1", "g2", "be2"} {
		ts = append(ts, onnx.NewFloat32(name, dims[name], w[name]))
	}
	return ts
}

// linear is x [rows, k] · w [k, n] + b in float64.
func linear(x []float64, w, b []float32, k, n int) []float64 {
	rows := len(x) / k
	y := make([]float64, rows*n)
	for r := range rows {
		for j := range n {
			s := float64(b[j])
			for i := range k {
				s += x[r*k+i] * float64(w[i*n+j])
			}
			y[r*n+j] = s
		}
	}
	return y
}

// layerNorm64 normalises rows of n values, eps 1e-5.
func layerNorm64(x []float64, g, b []float32, n int) []float64 {
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
		s := math.Sqrt(v/float64(n) + float64(float32(1e-5)))
		for k, a := range x[r : r+n] {
			y[r+k] = (a-m)/s*float64(g[k]) + float64(b[k])
		}
	}
	return y
}

// forward runs the block on x [N,S,E] with mask [N,1,1,S] in float64.
func (w encoderWeights) forward(x, mask []float32, N, S int) []float32 {
	x64 := make([]float64, len(x))
	for k, v := range x {
		x64[k] = float64(v)
	}
	q, k, v := linear(x64, w["wq"], w["bq"], encE, encE), linear(x64, w["wk"], w["bk"], encE, encE), linear(x64, w["wv"], w["bv"], encE, encE)
	ctx := make([]float64, N*S*encE)
	for n := range N {
		for h := range encH {
			for i := range S {
				sc := make([]float64, S)
				m := math.Inf(-1)
				for j := range S {
					var s float64
					for d := range encD {
						s += q[(n*S+i)*encE+h*encD+d] * k[(n*S+j)*encE+h*encD+d]
					}
					sc[j] = s/4 + float64(mask[n*S+j])
					m = math.Max(m, sc[j])
				}
				var sum float64
				for j := range S {
					sc[j] = math.Exp(sc[j] - m)
					sum += sc[j]
				}
				for d := range encD {
					var c float64
					for j := range S {
						c += sc[j] / sum * v[(n*S+j)*encE+h*encD+d]
					}
					ctx[(n*S+i)*encE+h*encD+d] = c
				}
			}
		}
	}
	o := linear(ctx, w["wo"], w["bo"], encE, encE)
	for k := range o {
		o[k] += x64[k]
	}
	l1 := layerNorm64(o, w["g1"], w["be1"], encE)
	f := linear(l1, w["w1"], w["b1"], encE, encF)
	for k, a := range f {
		f[k] = a * 0.5 * (1 + math.Erf(a/math.Sqrt2))
	}
	f2 := linear(f, w["w2"], w["b2"], encF, encE)
	for k := range f2 {
		f2[k] += l1[k]
	}
	y := layerNorm64(f2, w["g2"], w["be2"], encE)
	out := make([]float32, len(y))
	for k, a := range y {
		out[k] = float32(a)
	}
	return out
}

func encoderCases() []genCase {
	w := encoderWeights{}
	seed := 160.0
	for _, p := range []struct {
		name  string
		n     int64
		scale float32
		shift float32
	}{
		{"wq", encE * encE, 0.06, 0}, {"wk", encE * encE, 0.06, 0}, {"wv", encE * encE, 0.06, 0}, {"wo", encE * encE, 0.06, 0},
		{"w1", encE * encF, 0.06, 0}, {"w2", encF * encE, 0.04, 0},
		{"bq", encE, 0.02, 0}, {"bk", encE, 0.02, 0}, {"bv", encE, 0.02, 0}, {"bo", encE, 0.02, 0}, {"b1", encF, 0.02, 0}, {"b2", encE, 0.02, 0},
		{"g1", encE, 0.02, 1}, {"be1", encE, 0.02, 0}, {"g2", encE, 0.02, 1}, {"be2", encE, 0.02, 0},
	} {
		seed++
		w[p.name] = mapF(data([]int64{p.n}, seed), func(v float32) float32 { return v*p.scale + p.shift })
	}
	set := func(N, S int, seed float64) dataSet {
		xd, md := []int64{int64(N), int64(S), encE}, []int64{int64(N), 1, 1, int64(S)}
		x := data(xd, seed)
		// The last token of every other sequence is padding.
		mask := make([]float32, N*S)
		for n := range N {
			if n%2 == 1 {
				mask[n*S+S-1] = -10000
			}
		}
		return dataSet{
			ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x), onnx.NewFloat32("mask", md, mask)},
			outs: []*onnx.Tensor{onnx.NewFloat32("y", xd, w.forward(x, mask, N, S))},
		}
	}
	shape := func(name string, v ...int64) *onnx.Tensor {
		t, err := onnx.NewInt(name, onnx.Int64, []int64{int64(len(v))}, v)
		if err != nil {
			panic(err)
		}
		return t
	}
	lin, view, heads := linearNodes, viewNodes, headNodes
	var nodes []node
	nodes = append(nodes, lin("x", "wq", "bq", "q")...)
	nodes = append(nodes, lin("x", "wk", "bk", "k")...)
	nodes = append(nodes, lin("x", "wv", "bv", "v")...)
	nodes = append(nodes, heads("q", "qh")...)
	nodes = append(nodes, heads("k", "kh")...)
	nodes = append(nodes, heads("v", "vh")...)
	nodes = append(nodes,
		// key.transpose(-1, -2)
		node{op: "Transpose", inputs: []string{"kh"}, outputs: []string{"kt"}, attrs: []attr{isAttr("perm", 0, 1, 3, 2)}},
		node{op: "MatMul", inputs: []string{"qh", "kt"}, outputs: []string{"scores"}},
		node{op: "Div", inputs: []string{"scores", "sqrt_d"}, outputs: []string{"scaled"}},
		node{op: "Add", inputs: []string{"scaled", "mask"}, outputs: []string{"masked"}},
		node{op: "Softmax", inputs: []string{"masked"}, outputs: []string{"probs"}, attrs: []attr{iAttr("axis", -1)}},
		node{op: "MatMul", inputs: []string{"probs", "vh"}, outputs: []string{"ctx"}},
		node{op: "Transpose", inputs: []string{"ctx"}, outputs: []string{"ctx_t"}, attrs: []attr{isAttr("perm", 0, 2, 1, 3)}})
	nodes = append(nodes, view("ctx_t", "ctx_m", "merge")...)
	nodes = append(nodes, lin("ctx_m", "wo", "bo", "attn")...)
	nodes = append(nodes,
		node{op: "Add", inputs: []string{"x", "attn"}, outputs: []string{"res1"}},
		node{op: "LayerNormalization", inputs: []string{"res1", "g1", "be1"}, outputs: []string{"ln1"}, attrs: []attr{fAttr("epsilon", 1e-5)}})
	nodes = append(nodes, lin("ln1", "w1", "b1", "ff")...)
	nodes = append(nodes, geluErf(func(s string) string { return s })...)
	nodes = append(nodes, lin("gelu", "w2", "b2", "ff2")...)
	nodes = append(nodes,
		node{op: "Add", inputs: []string{"ln1", "ff2"}, outputs: []string{"res2"}},
		node{op: "LayerNormalization", inputs: []string{"res2", "g2", "be2"}, outputs: []string{"y"}, attrs: []attr{fAttr("epsilon", 1e-5)}})
	inits := append(w.tensors(), shape("split", encH, encD), shape("merge", encE), shape("lead_start", 0), shape("lead_end", 2),
		scalar("sqrt_d", 4), scalar("sqrt2", float32(math.Sqrt2)), scalar("one", 1), scalar("half", 0.5))
	first, second := set(1, 5, 170), set(2, 7, 171)
	// 16 tokens fill the blocks the array transposes; 20 cross them.
	more := []dataSet{second, set(1, 16, 172), set(2, 20, 173)}
	return []genCase{{name: "transformer_encoder_block", opset: 17, int8: true,
		g: graph{
			nodes: nodes,
			inits: inits,
			inputs: []valueInfo{
				{name: "x", typ: onnx.Float, dims: []int64{0, 0, encE}, params: []string{"batch", "seq", ""}},
				{name: "mask", typ: onnx.Float, dims: []int64{0, 1, 1, 0}, params: []string{"batch", "", "", "seq"}},
			},
			outputs: []valueInfo{{name: "y", typ: onnx.Float, dims: []int64{0, 0, encE}, params: []string{"batch", "seq", ""}}},
		},
		ins: first.ins, outs: first.outs, more: more,
	}}
}

// geluErf is exact GELU as torch.onnx writes it, x·(1 + erf(x/√2))/2, from
// the value named n("ff") to n("gelu"); the constants "sqrt2", "one" and
// "half" are the graph's.
func geluErf(n func(string) string) []node {
	return []node{
		{op: "Div", inputs: []string{n("ff"), "sqrt2"}, outputs: []string{n("ff_s")}},
		{op: "Erf", inputs: []string{n("ff_s")}, outputs: []string{n("ff_e")}},
		{op: "Add", inputs: []string{n("ff_e"), "one"}, outputs: []string{n("ff_1")}},
		{op: "Mul", inputs: []string{n("ff"), n("ff_1")}, outputs: []string{n("ff_m")}},
		{op: "Mul", inputs: []string{n("ff_m"), "half"}, outputs: []string{n("gelu")}},
	}
}
