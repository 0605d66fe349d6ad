package onnxtest_test

import "math"

// The transformer layers the trainers of vit_train_model_test.go and
// bert_train_model_test.go share, in float64 with their backward passes.
// Every summed product is rounded explicitly (float64(a*b)) and
// exponentials use exp and erf, so that training writes the same bits on
// any machine.

// tfParams are a transformer's parameters by name, in float64.
type tfParams map[string][]float64

// zeroParams are parameters of the shapes dims, all 0.
func zeroParams(dims map[string][]int64) tfParams {
	p := tfParams{}
	for name, d := range dims {
		p[name] = make([]float64, numel(d))
	}
	return p
}

// weights are p rounded to float32, as the graph's initializers.
func (p tfParams) weights() map[string][]float32 {
	w := map[string][]float32{}
	for name, v := range p {
		w[name] = to32(v)
	}
	return w
}

// roundTo32 rounds every parameter to float32, as the ONNX file stores
// them.
func (p tfParams) roundTo32() {
	for _, v := range p {
		for k := range v {
			v[k] = float64(float32(v[k]))
		}
	}
}

// lnTape is a LayerNormalization's normalised rows, their 1/σ and output.
type lnTape struct{ xhat, inv, y []float64 }

// attention is softmax(q·kᵀ/√D)·v per head, of q, k, v [T, h] split into
// heads of D = h/heads, the keys where keep is false (if keep is not nil)
// left out as a mask of finfo.min leaves them: the context [T, h] and the
// probabilities [heads, T, T].
func attention(q, k, v []float64, T, h, heads int, keep []bool) ([]float64, []float64) {
	return maskedAttention(q, k, v, T, h, heads, func(_, j int) bool { return keep == nil || keep[j] })
}

// maskedAttention is attention with query i attending to key j only where
// keep(i, j).
func maskedAttention(q, k, v []float64, T, h, heads int, keep func(i, j int) bool) ([]float64, []float64) {
	D := h / heads
	scale := 1 / math.Sqrt(float64(D))
	ctx, probs := make([]float64, T*h), make([]float64, heads*T*T)
	for hd := range heads {
		for i := range T {
			pr := probs[(hd*T+i)*T : (hd*T+i+1)*T]
			m := math.Inf(-1)
			for j := range T {
				if !keep(i, j) {
					continue
				}
				var s float64
				for d := range D {
					s += float64(q[i*h+hd*D+d] * k[j*h+hd*D+d])
				}
				pr[j] = float64(s * scale)
				m = max(m, pr[j])
			}
			var sum float64
			for j := range T {
				if !keep(i, j) {
					continue // e^(finfo.min) is 0
				}
				pr[j] = exp(pr[j] - m)
				sum += pr[j]
			}
			for j := range T {
				pr[j] /= sum
			}
			for d := range D {
				var c float64
				for j := range T {
					c += float64(pr[j] * v[j*h+hd*D+d])
				}
				ctx[i*h+hd*D+d] = c
			}
		}
	}
	return ctx, probs
}

// attentionBack is attention's backward: the gradients with respect to q,
// k and v given dctx's with respect to the context, for attention's
// probabilities probs (a left-out key's are 0, so it gets none).
func attentionBack(q, k, v, probs, dctx []float64, T, h, heads int) (dq, dk, dv []float64) {
	D := h / heads
	scale := 1 / math.Sqrt(float64(D))
	dq, dk, dv = make([]float64, T*h), make([]float64, T*h), make([]float64, T*h)
	dp := make([]float64, T)
	for hd := range heads {
		for i := range T {
			pr := probs[(hd*T+i)*T : (hd*T+i+1)*T]
			// Through ctx = P·v, then Softmax: dS = P ∘ (dP − Σ P∘dP).
			var dot float64
			for j := range T {
				var s float64
				for d := range D {
					dc := dctx[i*h+hd*D+d]
					s += float64(dc * v[j*h+hd*D+d])
					dv[j*h+hd*D+d] += float64(pr[j] * dc)
				}
				dp[j] = s
				dot += float64(pr[j] * s)
			}
			for j := range T {
				ds := float64(float64(pr[j]*(dp[j]-dot)) * scale)
				for d := range D {
					dq[i*h+hd*D+d] += float64(ds * k[j*h+hd*D+d])
					dk[j*h+hd*D+d] += float64(ds * q[i*h+hd*D+d])
				}
			}
		}
	}
	return dq, dk, dv
}

// linear64 is x [rows, k] · w [k, n] + b, MatMul's layout.
func linear64(x, w, b []float64, k, n int) []float64 {
	rows := len(x) / k
	y := make([]float64, rows*n)
	for r := range rows {
		for j := range n {
			s := b[j]
			for i := range k {
				s += float64(x[r*k+i] * w[i*n+j])
			}
			y[r*n+j] = s
		}
	}
	return y
}

// linearT is x [rows, k] · wᵀ + b for w [n, k], the layout of a Conv's
// and a transB Gemm's weights.
func linearT(x, w, b []float64, k, n int) []float64 {
	rows := len(x) / k
	y := make([]float64, rows*n)
	for r := range rows {
		for j := range n {
			s := b[j]
			for i := range k {
				s += float64(x[r*k+i] * w[j*k+i])
			}
			y[r*n+j] = s
		}
	}
	return y
}

// layerNormFwd normalises rows of n values of x, scaled by g, shifted by b.
func layerNormFwd(x, g, b []float64, n int, eps float32) lnTape {
	t := lnTape{xhat: make([]float64, len(x)), inv: make([]float64, len(x)/n), y: make([]float64, len(x))}
	for r := range len(x) / n {
		row := x[r*n : (r+1)*n]
		var m, v float64
		for _, a := range row {
			m += a
		}
		m /= float64(n)
		for _, a := range row {
			v += float64((a - m) * (a - m))
		}
		t.inv[r] = 1 / math.Sqrt(v/float64(n)+float64(eps))
		for k, a := range row {
			xh := float64((a - m) * t.inv[r])
			t.xhat[r*n+k], t.y[r*n+k] = xh, float64(xh*g[k])+b[k]
		}
	}
	return t
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

// geluAll is x·Φ(x) of every x, as the graphs' Erf GELU.
func geluAll(x []float64) []float64 {
	y := make([]float64, len(x))
	for k, v := range x {
		y[k] = float64(v * float64(0.5*(1+erf(float64(v/math.Sqrt2)))))
	}
	return y
}

// tanh is math.Tanh from exp: (1 − e^(−2|x|)) / (1 + e^(−2|x|)), signed.
func tanh(x float64) float64 {
	e := exp(-2 * math.Abs(x))
	return math.Copysign((1-e)/(1+e), x)
}
