package onnxtest_test

import "fmt"

// The hand-written backward pass of vit_train_model_test.go's forward
// pass, checked against central differences by TestViTGradients.

// backward adds to g (shaped as the parameters) the gradients of a loss
// whose gradient with respect to the logits is dz, for the tape of
// forward. The image's gradient is not needed: nothing before it learns.
func (a vitArch) backward(p tfParams, tp *vitTape, dz []float64, g tfParams) {
	h := a.h
	dhid := make([]float64, a.tokens()*h) // only the class token's row reaches the head
	linearTBack(tp.final.y[:h], p["head_w"], dz, h, a.classes, dhid[:h], g["head_w"], g["head_b"])
	dx := layerNormBack(tp.final, p["lnf_g"], dhid, h, g["lnf_g"], g["lnf_b"])
	for l := a.layers - 1; l >= 0; l-- {
		dx = a.layerBack(p, fmt.Sprintf("l%d.", l), &tp.layers[l], dx, g)
	}
	for e := range h {
		g["cls"][e] += dx[e]
	}
	for k := range dx {
		g["pos"][k] += dx[k]
	}
	row := a.c * a.patch * a.patch
	linearTBack(tp.patches, p["patch_w"], dx[h:], row, h, nil, g["patch_w"], g["patch_b"])
}

// layerBack is one layer's backward: the gradient with respect to its
// input, given dout's with respect to its output.
func (a vitArch) layerBack(p tfParams, pre string, lt *vitLayerTape, dout []float64, g tfParams) []float64 {
	h := a.h
	dres1 := append([]float64(nil), dout...)
	dgelu := make([]float64, len(lt.gelu))
	linearBack(lt.gelu, p[pre+"w2"], dout, a.f, h, dgelu, g[pre+"w2"], g[pre+"b2"])
	for k, v := range lt.ff {
		dgelu[k] = float64(dgelu[k] * geluGrad(v))
	}
	dln2 := make([]float64, len(lt.ln2.y))
	linearBack(lt.ln2.y, p[pre+"w1"], dgelu, h, a.f, dln2, g[pre+"w1"], g[pre+"b1"])
	addTo(dres1, layerNormBack(lt.ln2, p[pre+"g2"], dln2, h, g[pre+"g2"], g[pre+"be2"]))

	dx := append([]float64(nil), dres1...)
	dctx := make([]float64, len(lt.ctx))
	linearBack(lt.ctx, p[pre+"wo"], dres1, h, h, dctx, g[pre+"wo"], g[pre+"bo"])
	dq, dk, dv := attentionBack(lt.q, lt.k, lt.v, lt.probs, dctx, a.tokens(), h, a.heads)
	dln1 := make([]float64, len(lt.ln1.y))
	linearBack(lt.ln1.y, p[pre+"wq"], dq, h, h, dln1, g[pre+"wq"], g[pre+"bq"])
	linearBack(lt.ln1.y, p[pre+"wk"], dk, h, h, dln1, g[pre+"wk"], g[pre+"bk"])
	linearBack(lt.ln1.y, p[pre+"wv"], dv, h, h, dln1, g[pre+"wv"], g[pre+"bv"])
	addTo(dx, layerNormBack(lt.ln1, p[pre+"g1"], dln1, h, g[pre+"g1"], g[pre+"be1"]))
	return dx
}
