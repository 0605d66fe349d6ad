package onnxtest_test

import (
	"math"
	"math/rand/v2"
)

// The transformers' trainer: Adam on softmax cross-entropy over
// minibatches of synthetic examples (synth_test.go's images,
// trained_bert_test.go's sequences), deterministic for a fixed seed. Adam,
// not train_test.go's SGD with momentum: attention and LayerNormalization
// scale their parameters' gradients very unevenly, and SGD needs many more
// steps to train a transformer.

type adamConfig struct {
	steps, batch int
	lr           float64
	// seed seeds the weights and the stream of training images.
	seed uint64
}

// Adam's usual decay rates and ε.
const adamB1, adamB2, adamEps = 0.9, 0.999, 1e-8

// fit trains the ViT from scratch and rounds its parameters to float32.
func (a vitArch) fit(cfg adamConfig) tfParams {
	p := a.initParams(rand.New(rand.NewPCG(cfg.seed, 1)))
	ds := newSynth(cfg.seed)
	adamTrain(p, cfg, func(g tfParams) {
		for range cfg.batch {
			x, label := ds.next()
			tp := a.forward(p, x)
			a.backward(p, tp, xentGrad(tp.logits, label, cfg.batch), g)
		}
	})
	p.roundTo32()
	return p
}

// xentGrad is the gradient of a minibatch's mean cross-entropy loss with
// respect to one example's logits z.
func xentGrad(z []float64, label, batch int) []float64 {
	_, dz := softmaxXent(z, label)
	for k := range dz {
		dz[k] /= float64(batch)
	}
	return dz
}

// adamTrain runs cfg.steps steps of Adam on p, each step's gradients
// added up by minibatch.
func adamTrain(p tfParams, cfg adamConfig, minibatch func(g tfParams)) {
	g, m, v := tfParams{}, tfParams{}, tfParams{}
	for name, w := range p {
		g[name], m[name], v[name] = make([]float64, len(w)), make([]float64, len(w)), make([]float64, len(w))
	}
	b1t, b2t := 1.0, 1.0 // β₁ᵗ and β₂ᵗ, by products rather than math.Pow
	for range cfg.steps {
		for _, s := range g {
			clear(s)
		}
		minibatch(g)
		b1t, b2t = float64(b1t*adamB1), float64(b2t*adamB2)
		for name, w := range p {
			adam(w, g[name], m[name], v[name], cfg.lr, b1t, b2t)
		}
	}
}

// adam is one Adam step of the weights w with gradients g and moments m
// and v, after t steps whose β₁ᵗ and β₂ᵗ are b1t and b2t.
func adam(w, g, m, v []float64, lr, b1t, b2t float64) {
	for k := range w {
		m[k] = float64(adamB1*m[k]) + float64((1-adamB1)*g[k])
		v[k] = float64(adamB2*v[k]) + float64((1-adamB2)*float64(g[k]*g[k]))
		mh, vh := m[k]/(1-b1t), v[k]/(1-b2t)
		w[k] -= float64(lr*mh) / (math.Sqrt(vh) + adamEps)
	}
}

// accuracy is the share of the images xs with labels ys the weights w
// classify right, by the graph's reference.
func (w vitWeights) accuracy(xs [][]float64, ys []int) float64 {
	right := 0
	for k, x := range xs {
		_, logits := w.forward(linear, patchConv, to32(x), 1, vitEps)
		if argmaxOf32(logits) == ys[k] {
			right++
		}
	}
	return float64(right) / float64(len(xs))
}
