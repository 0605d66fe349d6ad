package onnxtest_test

import (
	"math"
	"math/rand/v2"
	"testing"
)

// gradCheckNet has every layer kind the trainer differentiates, on odd
// sizes so strided windows hit the padding unevenly: a strided conv, a
// grouped and a depthwise one, BN, ReLU, ReLU6 (reached on both sides), a
// residual Add, MaxPool and the head.
func gradCheckNet(r *rand.Rand) *net {
	b := builder{&net{name: "gradcheck", in: shape{3, 7, 7}}}
	x := b.unary(opRelu, b.convBN(0, 4, 3, 2, 1))
	x = b.maxPool(x, 3, 1, 1)
	y := b.unary(opRelu6, b.convBN(x, 4, 3, 1, 4))
	y = b.convBN(y, 4, 1, 1, 2)
	x = b.sum(y, x)
	b.head(x, 5)
	n := b.n
	n.initWeights(r)
	for _, l := range n.layers {
		if l.kind != opBN {
			continue
		}
		for c := range l.w {
			l.w[c], l.b[c] = 4*r.Float64()-2, 6*r.Float64()-2
			l.mean[c], l.vr[c] = r.Float64()-0.5, 0.5+r.Float64()
		}
	}
	return n
}

// TestBackpropGradients compares backward's gradients of the loss, with
// respect to every parameter and the input, with central differences.
func TestBackpropGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	n := gradCheckNet(r)
	x := make([]float64, n.in.size())
	for p := range x {
		x[p] = 4*r.Float64() - 2
	}
	const label = 3
	loss := func() float64 {
		vals := n.forward(x)
		l, _ := softmaxXent(vals[len(vals)-1], label)
		return l
	}
	vals := n.forward(x)
	_, dz := softmaxXent(vals[len(vals)-1], label)
	g := newGrads(n)
	dx := n.backward(vals, dz, g)

	const h = 1e-6
	check := func(what string, k int, v []float64, p int, analytic float64) {
		t.Helper()
		old := v[p]
		v[p] = old + h
		up := loss()
		v[p] = old - h
		down := loss()
		v[p] = old
		numeric := (up - down) / (2 * h)
		if math.Abs(analytic-numeric) > 1e-6+1e-4*math.Abs(numeric) {
			t.Errorf("layer %d %s[%d]: gradient %.8g, central difference %.8g", k, what, p, analytic, numeric)
		}
	}
	checked := map[opKind]bool{}
	for k, l := range n.layers {
		for p := range l.w {
			check("w", k, l.w, p, g.w[k][p])
		}
		for p := range l.b {
			check("b", k, l.b, p, g.b[k][p])
		}
		checked[l.kind] = true
	}
	for p := range x {
		check("input", -1, x, p, dx[p])
	}
	for kind := opConv; kind <= opGemm; kind++ {
		if !checked[kind] {
			t.Errorf("layer kind %d is not in the checked net", kind)
		}
	}
	var clipped, linear bool
	for _, l := range n.layers {
		if l.kind != opRelu6 {
			continue
		}
		for _, v := range vals[l.in[0]] {
			clipped = clipped || v > 6
			linear = linear || (v > 0 && v < 6)
		}
	}
	if !clipped || !linear {
		t.Errorf("ReLU6 inputs reach above 6: %v, between 0 and 6: %v; want both", clipped, linear)
	}
}
