package onnxtest_test

import (
	"fmt"
	"math"
)

// The hand-written backward pass of vit_train_model_test.go's forward
// pass, checked against central differences by TestViTGradients.

// backward adds to g (shaped as the parameters) the gradients of a loss
// whose gradient with respect to the logits is dz, for the tape of
// forward. The image's gradient is not needed: nothing before it learns.
func (a vitArch) backward(p vitParams, tp *vitTape, dz []float64, g vitParams) {
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
func (a vitArch) layerBack(p vitParams, pre string, lt *vitLayerTape, dout []float64, g vitParams) []float64 {
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
	dq, dk, dv := a.attentionBack(lt, dctx)
	dln1 := make([]float64, len(lt.ln1.y))
	linearBack(lt.ln1.y, p[pre+"wq"], dq, h, h, dln1, g[pre+"wq"], g[pre+"bq"])
	linearBack(lt.ln1.y, p[pre+"wk"], dk, h, h, dln1, g[pre+"wk"], g[pre+"bk"])
	linearBack(lt.ln1.y, p[pre+"wv"], dv, h, h, dln1, g[pre+"wv"], g[pre+"bv"])
	addTo(dx, layerNormBack(lt.ln1, p[pre+"g1"], dln1, h, g[pre+"g1"], g[pre+"be1"]))
	return dx
}

// attentionBack is attention's backward: the gradients with respect to q,
// k and v given dctx's with respect to the context.
func (a vitArch) attentionBack(lt *vitLayerTape, dctx []float64) (dq, dk, dv []float64) {
	T, h, D := a.tokens(), a.h, a.d()
	scale := 1 / math.Sqrt(float64(D))
	dq, dk, dv = make([]float64, T*h), make([]float64, T*h), make([]float64, T*h)
	dp := make([]float64, T)
	for hd := range a.heads {
		for i := range T {
			pr := lt.probs[(hd*T+i)*T : (hd*T+i+1)*T]
			// Through ctx = P·v, then Softmax: dS = P ∘ (dP − Σ P∘dP).
			var dot float64
			for j := range T {
				var s float64
				for d := range D {
					dc := dctx[i*h+hd*D+d]
					s += float64(dc * lt.v[j*h+hd*D+d])
					dv[j*h+hd*D+d] += float64(pr[j] * dc)
				}
				dp[j] = s
				dot += float64(pr[j] * s)
			}
			for j := range T {
				ds := float64(float64(pr[j]*(dp[j]-dot)) * scale)
				for d := range D {
					dq[i*h+hd*D+d] += float64(ds * lt.k[j*h+hd*D+d])
					dk[j*h+hd*D+d] += float64(ds * lt.q[i*h+hd*D+d])
				}
			}
		}
	}
	return dq, dk, dv
}

// geluGrad is the derivative of x·Φ(x): Φ(x) + x·φ(x).
func geluGrad(x float64) float64 {
	phi := exp(-float64(x*x)/2) / math.Sqrt(2*math.Pi)
	return float64(0.5*(1+erf(float64(x/math.Sqrt2)))) + float64(x*phi)
}

// erf is the error function from correctly rounded operations only, as
// exp is (math.Erf is fused into FMAs where the compiler may): by the
// series of positive terms (2/√π)·e^(−x²)·Σ 2ⁿx²ⁿ⁺¹/(1·3·…·(2n+1)),
// accurate to about 1e-14; beyond |x| = 6, erf is ±1 in float64.
func erf(x float64) float64 {
	if math.Abs(x) > 6 {
		return math.Copysign(1, x)
	}
	x2 := float64(2 * float64(x*x))
	s, t := x, x
	for n := 1; t != 0 && (float64(n) < x2 || math.Abs(t) > 1e-17*math.Abs(s)); n++ {
		t = float64(t*x2) / float64(2*n+1)
		s += t
	}
	return float64(float64(2/math.SqrtPi) * float64(exp(-float64(x*x))*s))
}

// linearBack is the backward of y = x·w + b (x [rows, k], w [k, n]): it
// adds the weights' and bias's gradients to gw and gb, and the input's to
// dx.
func linearBack(x, w, dy []float64, k, n int, dx, gw, gb []float64) {
	for r := range len(x) / k {
		xr, dr := x[r*k:(r+1)*k], dy[r*n:(r+1)*n]
		for j, d := range dr {
			gb[j] += d
		}
		for i, xv := range xr {
			var s float64
			for j, d := range dr {
				gw[i*n+j] += float64(xv * d)
				s += float64(w[i*n+j] * d)
			}
			dx[r*k+i] += s
		}
	}
}

// linearTBack is linearBack for linearT's weights [n, k]; dx may be nil.
func linearTBack(x, w, dy []float64, k, n int, dx, gw, gb []float64) {
	for r := range len(x) / k {
		xr, dr := x[r*k:(r+1)*k], dy[r*n:(r+1)*n]
		for j, d := range dr {
			gb[j] += d
			for i, xv := range xr {
				gw[j*k+i] += float64(xv * d)
				if dx != nil {
					dx[r*k+i] += float64(w[j*k+i] * d)
				}
			}
		}
	}
}

// layerNormBack adds the scale's and shift's gradients to gg and gb and
// returns the input's: (1/σ)·(dx̂ − mean(dx̂) − x̂·mean(dx̂∘x̂)), dx̂ = dy∘g.
func layerNormBack(t lnTape, g, dy []float64, n int, gg, gb []float64) []float64 {
	dx := make([]float64, len(dy))
	dxh := make([]float64, n)
	for r := range len(dy) / n {
		var m1, m2 float64
		for k := range n {
			d, xh := dy[r*n+k], t.xhat[r*n+k]
			gg[k] += float64(d * xh)
			gb[k] += d
			dxh[k] = float64(d * g[k])
			m1 += dxh[k]
			m2 += float64(dxh[k] * xh)
		}
		m1, m2 = m1/float64(n), m2/float64(n)
		for k := range n {
			dx[r*n+k] = float64(t.inv[r] * (dxh[k] - m1 - float64(t.xhat[r*n+k]*m2)))
		}
	}
	return dx
}

func addTo(dst, src []float64) {
	for k := range src {
		dst[k] += src[k]
	}
}
