package onnxtest_test

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
)

// gpt2_test.go's decoder with GPT2LMHeadModel's language-model head (the
// logits of the final LayerNormalization's output by the token embedding
// table, tied), in float64 for the trainer, one sequence at a time, no
// padding: forward and backward passes built of tflayers_test.go's
// layers. Its parameters are named as gptDims names the graph's. The
// cases' reference outputs come from gptWeights.logits64, never from
// here; TestGPT2TrainerForward checks the two agree.

// gptArch is a GPT-2 block's sizes.
type gptArch struct{ vocab, positions, h, heads, f int }

// gptDefault is gpt2_decoder_block's.
var gptDefault = gptArch{gptV, gptP, gptH, gptHeads, gptF}

// dims are the parameters' shapes by name, the graph's initializers.
func (a gptArch) dims() map[string][]int64 {
	v, p, h, f := int64(a.vocab), int64(a.positions), int64(a.h), int64(a.f)
	return map[string][]int64{
		"wte": {v, h}, "wpe": {p, h},
		"ln1_g": {h}, "ln1_b": {h}, "ln2_g": {h}, "ln2_b": {h}, "lnf_g": {h}, "lnf_b": {h},
		"attn_w": {h, 3 * h}, "attn_b": {3 * h}, "proj_w": {h, h}, "proj_b": {h},
		"fc_w": {h, f}, "fc_b": {f}, "mproj_w": {f, h}, "mproj_b": {h},
	}
}

// initParams draws the embedding tables at ±0.1 and the weights at
// ±√(3 / fan-in); LayerNormalizations start as the identity, biases at 0.
func (a gptArch) initParams(r *rand.Rand) tfParams {
	dims := a.dims()
	p := zeroParams(dims)
	for _, name := range slices.Sorted(maps.Keys(dims)) {
		d, lim := dims[name], 0.0
		switch {
		case name == "wte" || name == "wpe":
			lim = 0.1
		case name[len(name)-2:] == "_g":
			for k := range p[name] {
				p[name][k] = 1
			}
		case len(d) == 1:
		default: // Conv1D weights [in, out]
			lim = math.Sqrt(3 / float64(d[0]))
		}
		for k := range p[name] {
			if lim != 0 {
				p[name][k] = float64(lim * float64(2*r.Float64()-1))
			}
		}
	}
	return p
}

type gptTape struct {
	ids          []int
	x            []float64 // the embeddings [S, h]
	ln1, ln2, lf lnTape
	q, k, v      []float64
	probs, ctx   []float64
	h1           []float64
	fc, gelu     []float64
	logits       []float64 // [S, vocab]
}

// forward runs the language model on the tokens ids.
func (a gptArch) forward(p tfParams, ids []int) *gptTape {
	S, h := len(ids), a.h
	tp := &gptTape{ids: ids, x: make([]float64, S*h)}
	for t := range S {
		for c := range h {
			tp.x[t*h+c] = p["wte"][ids[t]*h+c] + p["wpe"][t*h+c]
		}
	}
	tp.ln1 = layerNormFwd(tp.x, p["ln1_g"], p["ln1_b"], h, gptEps)
	qkv := linear64(tp.ln1.y, p["attn_w"], p["attn_b"], h, 3*h)
	tp.q, tp.k, tp.v = make([]float64, S*h), make([]float64, S*h), make([]float64, S*h)
	for t := range S {
		copy(tp.q[t*h:(t+1)*h], qkv[t*3*h:])
		copy(tp.k[t*h:(t+1)*h], qkv[t*3*h+h:])
		copy(tp.v[t*h:(t+1)*h], qkv[t*3*h+2*h:])
	}
	tp.ctx, tp.probs = causalAttention(tp.q, tp.k, tp.v, S, h, a.heads)
	tp.h1 = linear64(tp.ctx, p["proj_w"], p["proj_b"], h, h)
	addTo(tp.h1, tp.x)
	tp.ln2 = layerNormFwd(tp.h1, p["ln2_g"], p["ln2_b"], h, gptEps)
	tp.fc = linear64(tp.ln2.y, p["fc_w"], p["fc_b"], h, a.f)
	tp.gelu = make([]float64, len(tp.fc))
	for k, z := range tp.fc {
		tp.gelu[k] = geluNew(z)
	}
	h2 := linear64(tp.gelu, p["mproj_w"], p["mproj_b"], a.f, h)
	addTo(h2, tp.h1)
	tp.lf = layerNormFwd(h2, p["lnf_g"], p["lnf_b"], h, gptEps)
	tp.logits = linearT(tp.lf.y, p["wte"], make([]float64, a.vocab), h, a.vocab)
	return tp
}

// backward adds to g the gradients of a loss whose gradient with respect
// to the logits is dz [S, vocab], for the tape of forward.
func (a gptArch) backward(p tfParams, tp *gptTape, dz []float64, g tfParams) {
	S, h := len(tp.ids), a.h
	dy := make([]float64, S*h)
	linearTBack(tp.lf.y, p["wte"], dz, h, a.vocab, dy, g["wte"], make([]float64, a.vocab))
	dh2 := layerNormBack(tp.lf, p["lnf_g"], dy, h, g["lnf_g"], g["lnf_b"])
	dgelu := make([]float64, len(tp.gelu))
	linearBack(tp.gelu, p["mproj_w"], dh2, a.f, h, dgelu, g["mproj_w"], g["mproj_b"])
	for k, z := range tp.fc {
		dgelu[k] = float64(dgelu[k] * geluNewGrad(z))
	}
	dln2 := make([]float64, S*h)
	linearBack(tp.ln2.y, p["fc_w"], dgelu, h, a.f, dln2, g["fc_w"], g["fc_b"])
	dh1 := layerNormBack(tp.ln2, p["ln2_g"], dln2, h, g["ln2_g"], g["ln2_b"])
	addTo(dh1, dh2)
	dctx := make([]float64, S*h)
	linearBack(tp.ctx, p["proj_w"], dh1, h, h, dctx, g["proj_w"], g["proj_b"])
	dq, dk, dv := attentionBack(tp.q, tp.k, tp.v, tp.probs, dctx, S, h, a.heads)
	dqkv := make([]float64, S*3*h)
	for t := range S {
		copy(dqkv[t*3*h:], dq[t*h:(t+1)*h])
		copy(dqkv[t*3*h+h:], dk[t*h:(t+1)*h])
		copy(dqkv[t*3*h+2*h:], dv[t*h:(t+1)*h])
	}
	dln1 := make([]float64, S*h)
	linearBack(tp.ln1.y, p["attn_w"], dqkv, h, 3*h, dln1, g["attn_w"], g["attn_b"])
	dx := layerNormBack(tp.ln1, p["ln1_g"], dln1, h, g["ln1_g"], g["ln1_b"])
	addTo(dx, dh1)
	for t := range S {
		for c := range h {
			g["wte"][tp.ids[t]*h+c] += dx[t*h+c]
			g["wpe"][t*h+c] += dx[t*h+c]
		}
	}
}

// causalAttention is attention with the keys after each query left out,
// as GPT-2's causal mask leaves them.
func causalAttention(q, k, v []float64, T, h, heads int) ([]float64, []float64) {
	return maskedAttention(q, k, v, T, h, heads, func(i, j int) bool { return j <= i })
}

// geluNew is GPT-2's gelu_new, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
func geluNew(x float64) float64 {
	return float64(float64(0.5*x) * (1 + tanh(geluNewArg(x))))
}

func geluNewArg(x float64) float64 {
	return float64(math.Sqrt(2/math.Pi) * (x + float64(0.044715*float64(float64(x*x)*x))))
}

// geluNewGrad is gelu_new's derivative: 0.5·(1 + t) + 0.5·x·(1 − t²)·
// √(2/π)·(1 + 3·0.044715·x²), t the tanh.
func geluNewGrad(x float64) float64 {
	t := tanh(geluNewArg(x))
	du := float64(math.Sqrt(2/math.Pi) * (1 + float64(3*0.044715*float64(x*x))))
	return float64(0.5*(1+t)) + float64(float64(float64(0.5*x)*(1-float64(t*t)))*du)
}
