package onnxtest_test

import (
	"math"
	"math/rand/v2"
)

// A small trainer for the trained cases: plain SGD with momentum on
// softmax cross-entropy, over minibatches of synthetic images
// (synth_test.go), deterministic for fixed seeds.

type trainConfig struct {
	steps, batch int
	lr, momentum float64
	// seed seeds the weights and the stream of training images.
	seed uint64
}

// bnImages is the number of training images that set the BN statistics.
const bnImages = 64

// fit trains the net from scratch and rounds its parameters to float32.
func (n *net) fit(cfg trainConfig) {
	n.initWeights(rand.New(rand.NewPCG(cfg.seed, 1)))
	ds := newSynth(cfg.seed)
	xs, _ := ds.batch(bnImages)
	n.initBN(xs)
	n.train(ds, cfg)
	n.roundTo32()
}

// initWeights draws convolution and Gemm weights uniformly at He scale,
// ±√(6 / fan-in).
func (n *net) initWeights(r *rand.Rand) {
	for _, l := range n.layers {
		if l.kind != opConv && l.kind != opGemm {
			continue
		}
		a := math.Sqrt(6 / float64(len(l.w)/l.out.c))
		for p := range l.w {
			l.w[p] = float64(a * float64(2*r.Float64()-1))
		}
	}
}

// initBN sets every BN's running statistics, in order, to its input's
// mean and variance over the images xs, as an exporter's would be after
// training: they normalise the activations from the first step, and are
// far from the trivial 0 and 1, so the compiler folds real numbers.
func (n *net) initBN(xs [][]float64) {
	for _, l := range n.layers {
		if l.kind != opBN {
			continue
		}
		is := n.shapeOf(l.in[0])
		plane := is.h * is.w
		sum, sq := make([]float64, is.c), make([]float64, is.c)
		for _, x := range xs {
			v := n.forward(x)[l.in[0]]
			for p, f := range v {
				sum[p/plane] += f
				sq[p/plane] += float64(f * f)
			}
		}
		cnt := float64(len(xs) * plane)
		for c := range is.c {
			m := sum[c] / cnt
			l.mean[c] = m
			l.vr[c] = max(sq[c]/cnt-float64(m*m), 0)
		}
	}
}

// train runs cfg.steps minibatch steps of SGD with momentum on images
// drawn by ds.
func (n *net) train(ds *synth, cfg trainConfig) {
	g, vel := newGrads(n), newGrads(n)
	for range cfg.steps {
		clear2(g.w)
		clear2(g.b)
		for range cfg.batch {
			x, label := ds.next()
			vals := n.forward(x)
			_, dz := softmaxXent(vals[len(vals)-1], label)
			for k := range dz {
				dz[k] /= float64(cfg.batch)
			}
			n.backward(vals, dz, g)
		}
		for k, l := range n.layers {
			sgd(l.w, g.w[k], vel.w[k], cfg)
			sgd(l.b, g.b[k], vel.b[k], cfg)
		}
	}
}

func clear2(s [][]float64) {
	for _, v := range s {
		clear(v)
	}
}

// sgd is one step of SGD with momentum: v ← μv + g, w ← w − ηv.
func sgd(w, g, v []float64, cfg trainConfig) {
	for p := range w {
		v[p] = float64(cfg.momentum*v[p]) + g[p]
		w[p] -= float64(cfg.lr * v[p])
	}
}

// accuracy is the share of the images xs with labels ys the net
// classifies right.
func (n *net) accuracy(xs [][]float64, ys []int) float64 {
	right := 0
	for k, x := range xs {
		vals := n.forward(x)
		if argmax64(vals[len(vals)-1]) == ys[k] {
			right++
		}
	}
	return float64(right) / float64(len(xs))
}

func argmax64(v []float64) int {
	best := 0
	for k := range v {
		if v[k] > v[best] {
			best = k
		}
	}
	return best
}

// roundTo32 rounds every parameter to float32, as the ONNX file stores
// them, so the reference runs on the exported numbers.
func (n *net) roundTo32() {
	for _, l := range n.layers {
		for _, s := range [][]float64{l.w, l.b, l.mean, l.vr} {
			for p := range s {
				s[p] = float64(float32(s[p]))
			}
		}
	}
}
