package onnxtest_test

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
)

// The ViT of vit_test.go in float64 for the trainer, one image at a time:
// a forward pass that keeps what vit_backprop_test.go's backward pass
// needs. Its sizes are a vitArch, so that the gradient check runs a small
// one whole; its parameters are named as the graph's initializers. The cases' reference outputs come from vitWeights.forward,
// never from here; TestViTTrainerForward checks the two agree. Its layers
// are tflayers_test.go's, whose arithmetic gives the same bits on any
// machine.

// vitArch is a ViT's sizes.
type vitArch struct {
	img, patch, c   int // image side, patch side, channels
	h, heads, f     int // hidden, heads, MLP
	layers, classes int
	eps             float32 // LayerNormalization's ε
}

func (a vitArch) grid() int   { return a.img / a.patch }
func (a vitArch) tokens() int { return a.grid()*a.grid() + 1 }
func (a vitArch) pixels() int { return a.c * a.img * a.img }

// size is the graph builder's vitSize of the ViT.
func (a vitArch) size() vitSize {
	return vitSize{int64(a.img), int64(a.patch), int64(a.c), int64(a.h), int64(a.heads), int64(a.f), int64(a.layers), int64(a.classes)}
}

// dims are the parameters' shapes by name, as the graph's initializers.
func (a vitArch) dims() map[string][]int64 { return a.size().dims() }

// initParams draws weights uniformly at ±√(3 / fan-in) (variance 1/fan-in),
// the class token and positions at ±0.1; LayerNormalizations start as the
// identity and biases at 0.
func (a vitArch) initParams(r *rand.Rand) tfParams {
	p := zeroParams(a.dims())
	uniform := func(v []float64, lim float64) {
		for k := range v {
			v[k] = float64(lim * float64(2*r.Float64()-1))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p)) {
		d := a.dims()[name]
		switch m := layerParam(name); {
		case name == "cls" || name == "pos":
			uniform(p[name], 0.1)
		case m == "g1" || m == "g2" || name == "lnf_g":
			for k := range p[name] {
				p[name][k] = 1
			}
		case len(d) == 1:
		case name == "patch_w" || name == "head_w":
			uniform(p[name], math.Sqrt(3/float64(numel(d)/int(d[0]))))
		default: // MatMul weights [in, out]
			uniform(p[name], math.Sqrt(3/float64(d[0])))
		}
	}
	return p
}

// layerParam is a layer parameter's name without its layer prefix (wq of
// l1.wq), or the name itself.
func layerParam(name string) string {
	for k := range name {
		if name[k] == '.' {
			return name[k+1:]
		}
	}
	return name
}

// vitTape is what the forward pass of one image keeps for the backward.
type vitTape struct {
	patches []float64 // [grid², c·patch²], each patch in the Conv weights' order
	layers  []vitLayerTape
	final   lnTape
	logits  []float64
}

type vitLayerTape struct {
	x, res1  []float64 // the layer's input and the attention's residual sum [T, h]
	ln1, ln2 lnTape
	q, k, v  []float64 // [T, h]
	probs    []float64 // [heads, T, T]
	ctx      []float64 // [T, h], heads merged
	ff, gelu []float64 // the MLP's [T, f] before and after GELU
}

// forward runs the ViT on one image img [c, img, img].
func (a vitArch) forward(p tfParams, img []float64) *vitTape {
	tp := &vitTape{patches: a.patchRows(img)}
	T, h := a.tokens(), a.h
	pe := linearT(tp.patches, p["patch_w"], p["patch_b"], a.c*a.patch*a.patch, h)
	x := make([]float64, T*h)
	for e := range h {
		x[e] = p["cls"][e] + p["pos"][e]
	}
	for k := h; k < T*h; k++ {
		x[k] = pe[k-h] + p["pos"][k]
	}
	for l := range a.layers {
		var lt vitLayerTape
		x, lt = a.layerForward(p, fmt.Sprintf("l%d.", l), x)
		tp.layers = append(tp.layers, lt)
	}
	tp.final = layerNormFwd(x, p["lnf_g"], p["lnf_b"], h, a.eps)
	tp.logits = linearT(tp.final.y[:h], p["head_w"], p["head_b"], h, a.classes)
	return tp
}

// layerForward is one pre-norm layer on x [T, h]: its output and tape.
func (a vitArch) layerForward(p tfParams, pre string, x []float64) ([]float64, vitLayerTape) {
	h := a.h
	lt := vitLayerTape{x: x}
	lt.ln1 = layerNormFwd(x, p[pre+"g1"], p[pre+"be1"], h, a.eps)
	lt.q = linear64(lt.ln1.y, p[pre+"wq"], p[pre+"bq"], h, h)
	lt.k = linear64(lt.ln1.y, p[pre+"wk"], p[pre+"bk"], h, h)
	lt.v = linear64(lt.ln1.y, p[pre+"wv"], p[pre+"bv"], h, h)
	lt.ctx, lt.probs = attention(lt.q, lt.k, lt.v, a.tokens(), h, a.heads, nil)
	o := linear64(lt.ctx, p[pre+"wo"], p[pre+"bo"], h, h)
	lt.res1 = make([]float64, len(x))
	for k := range x {
		lt.res1[k] = x[k] + o[k]
	}
	lt.ln2 = layerNormFwd(lt.res1, p[pre+"g2"], p[pre+"be2"], h, a.eps)
	lt.ff = linear64(lt.ln2.y, p[pre+"w1"], p[pre+"b1"], h, a.f)
	lt.gelu = geluAll(lt.ff)
	f2 := linear64(lt.gelu, p[pre+"w2"], p[pre+"b2"], a.f, h)
	out := make([]float64, len(x))
	for k := range out {
		out[k] = lt.res1[k] + f2[k]
	}
	return out, lt
}

// patchRows cuts img into the Conv's non-overlapping patches, one row
// each, in raster order.
func (a vitArch) patchRows(img []float64) []float64 {
	g, ps := a.grid(), a.patch
	row := a.c * ps * ps
	out := make([]float64, g*g*row)
	for t := range g * g {
		py, px := t/g, t%g
		for c := range a.c {
			for i := range ps {
				for j := range ps {
					out[t*row+(c*ps+i)*ps+j] = img[(c*a.img+py*ps+i)*a.img+px*ps+j]
				}
			}
		}
	}
	return out
}
