package onnxtest_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
)

// bert_test.go's encoder with a sequence classifier, as
// BertForSequenceClassification has it (logits of a Linear of the
// pooler_output), in float64 for the trainer, one sequence at a time:
// forward and backward passes built of tflayers_test.go's layers. Its
// parameters are named as bertSize.dims names the graph's, the
// classifier's cls_w [classes, h] and cls_b. The cases' reference outputs
// come from bertWeights.forward64, never from here;
// TestBertTrainerForward checks the two agree.

// bertArch is a BERT's sizes.
type bertArch struct {
	vocab, types, positions int
	h, heads, f             int
	layers, classes         int
	eps                     float32
}

// size is the graph builder's bertSize of the BERT.
func (a bertArch) size() bertSize {
	return bertSize{int64(a.vocab), int64(a.types), int64(a.positions), int64(a.h), int64(a.heads), int64(a.f), int64(a.layers)}
}

// dims are the parameters' shapes by name: the graph's initializers and
// the classifier's.
func (a bertArch) dims() map[string][]int64 {
	d := a.size().dims()
	d["cls_w"], d["cls_b"] = []int64{int64(a.classes), int64(a.h)}, []int64{int64(a.classes)}
	return d
}

// initParams draws the embedding tables at ±0.1 and weights at
// ±√(3 / fan-in); LayerNormalizations start as the identity, biases at 0.
func (a bertArch) initParams(r *rand.Rand) tfParams {
	p := zeroParams(a.dims())
	for _, name := range slices.Sorted(maps.Keys(p)) {
		d, lim := a.dims()[name], 0.0
		switch m := layerParam(name); {
		case name == "word" || name == "pos" || name == "type":
			lim = 0.1
		case m == "g1" || m == "g2" || name == "emb_g":
			for k := range p[name] {
				p[name][k] = 1
			}
		case len(d) == 1:
		case name == "pool_w" || name == "cls_w":
			lim = math.Sqrt(3 / float64(d[1]))
		default: // MatMul weights [in, out]
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

// bertSeq is one sequence: its token ids, token types and mask.
type bertSeq struct {
	ids, types []int
	keep       []bool // attention_mask
}

type bertTape struct {
	emb    lnTape
	layers []bertLayerTape
	pool   []float64 // tanh of the pooler's Linear
	logits []float64
}

type bertLayerTape struct {
	x          []float64 // the layer's input [S, h]
	q, k, v    []float64
	probs, ctx []float64
	ln1, ln2   lnTape
	ff, gelu   []float64
}

// forward runs the classifier on one sequence.
func (a bertArch) forward(p tfParams, s bertSeq) *bertTape {
	S, h := len(s.ids), a.h
	e := make([]float64, S*h)
	for t := range S {
		for c := range h {
			e[t*h+c] = p["word"][s.ids[t]*h+c] + p["type"][s.types[t]*h+c] + p["pos"][t*h+c]
		}
	}
	tp := &bertTape{emb: layerNormFwd(e, p["emb_g"], p["emb_b"], h, a.eps)}
	x := tp.emb.y
	for l := range a.layers {
		pre := fmt.Sprintf("l%d.", l)
		lt := bertLayerTape{x: x}
		lt.q = linear64(x, p[pre+"wq"], p[pre+"bq"], h, h)
		lt.k = linear64(x, p[pre+"wk"], p[pre+"bk"], h, h)
		lt.v = linear64(x, p[pre+"wv"], p[pre+"bv"], h, h)
		lt.ctx, lt.probs = attention(lt.q, lt.k, lt.v, S, h, a.heads, s.keep)
		res1 := linear64(lt.ctx, p[pre+"wo"], p[pre+"bo"], h, h)
		addTo(res1, x)
		lt.ln1 = layerNormFwd(res1, p[pre+"g1"], p[pre+"be1"], h, a.eps)
		lt.ff = linear64(lt.ln1.y, p[pre+"w1"], p[pre+"b1"], h, a.f)
		lt.gelu = geluAll(lt.ff)
		res2 := linear64(lt.gelu, p[pre+"w2"], p[pre+"b2"], a.f, h)
		addTo(res2, lt.ln1.y)
		lt.ln2 = layerNormFwd(res2, p[pre+"g2"], p[pre+"be2"], h, a.eps)
		x = lt.ln2.y
		tp.layers = append(tp.layers, lt)
	}
	tp.pool = linearT(x[:h], p["pool_w"], p["pool_b"], h, h)
	for k, v := range tp.pool {
		tp.pool[k] = tanh(v)
	}
	tp.logits = linearT(tp.pool, p["cls_w"], p["cls_b"], h, a.classes)
	return tp
}

// backward adds to g the gradients of a loss whose gradient with respect
// to the logits is dz, for the tape of forward on s.
func (a bertArch) backward(p tfParams, s bertSeq, tp *bertTape, dz []float64, g tfParams) {
	S, h := len(s.ids), a.h
	dpool := make([]float64, h)
	linearTBack(tp.pool, p["cls_w"], dz, h, a.classes, dpool, g["cls_w"], g["cls_b"])
	for k, y := range tp.pool {
		dpool[k] = float64(dpool[k] * (1 - float64(y*y)))
	}
	last := tp.emb.y
	if a.layers > 0 {
		last = tp.layers[a.layers-1].ln2.y
	}
	dx := make([]float64, S*h) // only the first token's row reaches the pooler
	linearTBack(last[:h], p["pool_w"], dpool, h, h, dx[:h], g["pool_w"], g["pool_b"])
	for l := a.layers - 1; l >= 0; l-- {
		dx = a.layerBack(p, fmt.Sprintf("l%d.", l), &tp.layers[l], dx, S, g)
	}
	de := layerNormBack(tp.emb, p["emb_g"], dx, h, g["emb_g"], g["emb_b"])
	for t := range S {
		for c := range h {
			d := de[t*h+c]
			g["word"][s.ids[t]*h+c] += d
			g["type"][s.types[t]*h+c] += d
			g["pos"][t*h+c] += d
		}
	}
}

// layerBack is one post-norm layer's backward: the gradient with respect
// to its input, given dout's with respect to its output.
func (a bertArch) layerBack(p tfParams, pre string, lt *bertLayerTape, dout []float64, S int, g tfParams) []float64 {
	h := a.h
	dres2 := layerNormBack(lt.ln2, p[pre+"g2"], dout, h, g[pre+"g2"], g[pre+"be2"])
	dff := make([]float64, len(lt.gelu))
	linearBack(lt.gelu, p[pre+"w2"], dres2, a.f, h, dff, g[pre+"w2"], g[pre+"b2"])
	for k, v := range lt.ff {
		dff[k] = float64(dff[k] * geluGrad(v))
	}
	dln1 := append([]float64(nil), dres2...)
	linearBack(lt.ln1.y, p[pre+"w1"], dff, h, a.f, dln1, g[pre+"w1"], g[pre+"b1"])
	dres1 := layerNormBack(lt.ln1, p[pre+"g1"], dln1, h, g[pre+"g1"], g[pre+"be1"])
	dctx := make([]float64, len(lt.ctx))
	linearBack(lt.ctx, p[pre+"wo"], dres1, h, h, dctx, g[pre+"wo"], g[pre+"bo"])
	dq, dk, dv := attentionBack(lt.q, lt.k, lt.v, lt.probs, dctx, S, h, a.heads)
	dx := dres1
	linearBack(lt.x, p[pre+"wq"], dq, h, h, dx, g[pre+"wq"], g[pre+"bq"])
	linearBack(lt.x, p[pre+"wk"], dk, h, h, dx, g[pre+"wk"], g[pre+"bk"])
	linearBack(lt.x, p[pre+"wv"], dv, h, h, dx, g[pre+"wv"], g[pre+"bv"])
	return dx
}
