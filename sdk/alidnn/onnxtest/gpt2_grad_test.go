package onnxtest_test

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGPT2Gradients compares the GPT-2 trainer's gradients of a loss at
// three positions with central differences, parameter by parameter, on a
// small block (2 heads of 3, a sequence of 6 that repeats a token, so the
// tied table's rows get gradients from the embedding and the head).
// Biases and LayerNormalizations start random.
func TestGPT2Gradients(t *testing.T) {
	a := gptArch{vocab: 9, positions: 7, h: 6, heads: 2, f: 10}
	r := rand.New(rand.NewPCG(17, 17))
	p := a.initParams(r)
	jitterVectors(p, a.dims(), r)
	ids := []int{1, 4, 7, 2, 4, 7}
	labels := map[int]int{2: 2, 3: 4, 4: 7}
	loss := func() float64 {
		logits := a.forward(p, ids).logits
		var l float64
		for pos, y := range labels {
			v, _ := softmaxXent(logits[pos*a.vocab:(pos+1)*a.vocab], y)
			l += v
		}
		return l
	}
	tp := a.forward(p, ids)
	dz := make([]float64, len(tp.logits))
	for pos, y := range labels {
		_, d := softmaxXent(tp.logits[pos*a.vocab:(pos+1)*a.vocab], y)
		copy(dz[pos*a.vocab:], d)
	}
	g := zeroParams(a.dims())
	a.backward(p, tp, dz, g)
	checkGradients(t, p, g, loss)
	// Position 6 holds no token: its embedding learns nothing.
	for c := range a.h {
		if d := g["wpe"][6*a.h+c]; d != 0 {
			t.Errorf("position 6's embedding has gradient %g", d)
		}
	}
}

// TestGPT2TrainerForward checks that the trainer's forward pass is the
// graph's reference (gptWeights.logits64) on the same numbers.
func TestGPT2TrainerForward(t *testing.T) {
	a := gptDefault
	p := a.initParams(rand.New(rand.NewPCG(3, 3)))
	p.roundTo32()
	w := gptWeights(p.weights())
	for _, s := range newGPTCopyTask(5).batch(3, 12) {
		want, _ := w.lmSet([][]int{s}, 0).outs[0].Float32s()
		got := a.forward(p, s).logits
		for k := range want {
			if math.Abs(got[k]-float64(want[k])) > 1e-5*(1+math.Abs(float64(want[k]))) {
				t.Errorf("logit %d: trainer %.7g, reference %.7g", k, got[k], want[k])
			}
		}
	}
}
