package onnxtest

import "math"

// int8Cosine is the least cosine similarity of an output row of an int8
// model to the reference's: the rule for embeddings and hidden
// states.
const int8Cosine = 0.99

// int8Error is the worst error relative to the int8 rule of a
// floating-point output of an int8 model, whose rows are its vectors along
// the last axis: either every row's cosine similarity to the reference's
// row is at least int8Cosine — embeddings, hidden states — or every row's
// top-1 (argmax) equals the reference's — a classifier's logits or
// probabilities. The folder does not say which an output is, so it passes
// by either: the error is (1 − the worst row's cosine)/(1 − int8Cosine),
// at most 1 when the cosines pass, and 1 when only the top-1s do.
func int8Error(g, w []float32, dims []int64) float64 {
	n := 1
	if len(dims) > 0 {
		n = int(dims[len(dims)-1])
	}
	for _, v := range g {
		if v != v {
			return math.Inf(1) // NaN: no argmax or cosine to speak of
		}
	}
	same, worst := true, 1.0
	for o := 0; o+n <= len(w); o += n {
		gr, wr := g[o:o+n], w[o:o+n]
		same = same && argmaxOf(gr) == argmaxOf(wr)
		worst = min(worst, cosine(gr, wr))
	}
	e := (1 - worst) / (1 - int8Cosine)
	if same && e > 1 {
		return 1
	}
	return e
}

// cosine is the cosine similarity of a and b: 1 for two zero vectors, 0
// for a zero vector and another.
func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for k := range a {
		ab += float64(a[k]) * float64(b[k])
		aa += float64(a[k]) * float64(a[k])
		bb += float64(b[k]) * float64(b[k])
	}
	switch {
	case aa == 0 && bb == 0:
		return 1
	case aa == 0 || bb == 0:
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

func argmaxOf(v []float32) int {
	best := 0
	for k := range v {
		if v[k] > v[best] {
			best = k
		}
	}
	return best
}
