package onnxtest_test

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestViTGradients compares the ViT trainer's gradients of the loss, with
// respect to every parameter of a small ViT (2 heads of 3, 5 tokens, two
// layers), with central differences. Biases, LayerNormalizations' scales
// and shifts start random, not at their trained-from values 0 and 1, so
// that every term of the backward pass is exercised.
func TestViTGradients(t *testing.T) {
	a := vitArch{img: 6, patch: 3, c: 2, h: 6, heads: 2, f: 10, layers: 2, classes: 4, eps: 1e-5}
	r := rand.New(rand.NewPCG(11, 11))
	p := a.initParams(r)
	jitterVectors(p, a.dims(), r)
	img := make([]float64, a.pixels())
	for k := range img {
		img[k] = 4*r.Float64() - 2
	}
	const label = 2
	loss := func() float64 {
		l, _ := softmaxXent(a.forward(p, img).logits, label)
		return l
	}
	_, dz := softmaxXent(a.forward(p, img).logits, label)
	g := zeroParams(a.dims())
	a.backward(p, a.forward(p, img), dz, g)

	checkGradients(t, p, g, loss)
}

// TestViTTrainerForward checks that the trainer's forward pass is the
// graph's reference (vitWeights.forward) on the same numbers: the logits
// it trains are the ones the cases' outputs hold.
func TestViTTrainerForward(t *testing.T) {
	a := trainedViTArch
	p := a.initParams(rand.New(rand.NewPCG(3, 3)))
	p.roundTo32()
	w := vitWeights(p.weights())
	imgs, _ := newSynth(5).batch(2)
	for _, img := range imgs {
		x32 := to32(img)
		_, want := w.forward(linear, patchConv, x32, 1, a.eps)
		got := a.forward(p, from32(x32)).logits
		for k := range want {
			if math.Abs(got[k]-float64(want[k])) > 1e-5*(1+math.Abs(float64(want[k]))) {
				t.Errorf("logit %d: trainer %.7g, reference %.7g", k, got[k], want[k])
			}
		}
	}
}

// TestViTTrainerErf checks the trainer's erf against math.Erf.
func TestViTTrainerErf(t *testing.T) {
	for x := -7.0; x <= 7; x += 0.01 {
		if d := math.Abs(erf(x) - math.Erf(x)); d > 1e-13 {
			t.Errorf("erf(%g) = %.17g, math.Erf %.17g", x, erf(x), math.Erf(x))
		}
	}
}
