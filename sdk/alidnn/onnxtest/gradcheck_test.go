package onnxtest_test

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// jitterVectors moves every one-dimensional parameter of p (biases,
// LayerNormalizations' scales and shifts) off its initial value by up to
// ±0.5, so that a gradient check exercises every term of the backward
// pass, not just those of 0 biases and unit scales. Names go in order, so
// that r draws the same values every run.
func jitterVectors(p tfParams, dims map[string][]int64, r *rand.Rand) {
	for _, name := range slices.Sorted(maps.Keys(dims)) {
		if len(dims[name]) == 1 {
			for k := range p[name] {
				p[name][k] += r.Float64() - 0.5
			}
		}
	}
}

// checkGradients compares g, the backward pass's gradient of loss at p,
// with central differences of loss, parameter by parameter.
func checkGradients(t *testing.T, p, g tfParams, loss func() float64) {
	t.Helper()
	const h = 1e-6
	for _, name := range slices.Sorted(maps.Keys(p)) {
		v := p[name]
		for k := range v {
			old := v[k]
			v[k] = old + h
			up := loss()
			v[k] = old - h
			down := loss()
			v[k] = old
			numeric := (up - down) / (2 * h)
			if math.Abs(g[name][k]-numeric) > 1e-7+1e-5*math.Abs(numeric) {
				t.Errorf("%s[%d]: gradient %.8g, central difference %.8g", name, k, g[name][k], numeric)
			}
		}
	}
}
