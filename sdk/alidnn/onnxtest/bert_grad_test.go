package onnxtest_test

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestBertGradients compares the BERT trainer's gradients of the loss,
// with respect to every parameter of a small BERT (2 heads of 3, two
// layers, a sequence of 6 whose last token is masked out), with central
// differences. Biases and LayerNormalizations start random.
func TestBertGradients(t *testing.T) {
	a := bertArch{vocab: 12, types: 2, positions: 6, h: 6, heads: 2, f: 10, layers: 2, classes: 3, eps: 1e-5}
	r := rand.New(rand.NewPCG(13, 13))
	p := a.initParams(r)
	jitterVectors(p, a.dims(), r)
	s := bertSeq{ids: []int{1, 5, 7, 5, 11, 3}, types: []int{0, 0, 0, 1, 1, 1}, keep: []bool{true, true, true, true, true, false}}
	const label = 1
	loss := func() float64 {
		l, _ := softmaxXent(a.forward(p, s).logits, label)
		return l
	}
	tp := a.forward(p, s)
	_, dz := softmaxXent(tp.logits, label)
	g := zeroParams(a.dims())
	a.backward(p, s, tp, dz, g)

	checkGradients(t, p, g, loss)
	// The masked token (id 3, nowhere else) is a key of no query, and the
	// pooler reads only the first token: its embedding learns nothing.
	for c := range a.h {
		if d := g["word"][3*a.h+c]; d != 0 {
			t.Errorf("the masked token's embedding has gradient %g", d)
		}
	}
}

// TestBertTrainerForward checks that the trainer's forward pass is the
// graph's reference (bertWeights.classify) on the same numbers.
func TestBertTrainerForward(t *testing.T) {
	a := trainedBertArch
	p := a.initParams(rand.New(rand.NewPCG(3, 3)))
	p.roundTo32()
	w := bertWeights(p.weights())
	seqs, _ := newBertTask(5).batch(3, 12)
	for _, s := range seqs {
		want, _ := w.classifierSet([]bertSeq{s}).outs[0].Float32s()
		got := a.forward(p, s).logits
		for k := range want {
			if math.Abs(got[k]-float64(want[k])) > 1e-5*(1+math.Abs(float64(want[k]))) {
				t.Errorf("logit %d: trainer %.7g, reference %.7g", k, got[k], want[k])
			}
		}
	}
}
