package onnxtest_test

import "math"

// The hand-written backward pass of refnet_test.go's forward pass, for the
// trainer. BatchNormalization trains in its inference form: its running
// statistics are fixed from data before training (see initBN) and only
// its scale and bias learn, so it is a per-channel affine map here.

// grads holds a gradient for every parameter of a net, by layer.
type grads struct{ w, b [][]float64 }

func newGrads(n *net) grads {
	g := grads{w: make([][]float64, len(n.layers)), b: make([][]float64, len(n.layers))}
	for k, l := range n.layers {
		if l.w != nil {
			g.w[k] = make([]float64, len(l.w))
		}
		if l.b != nil {
			g.b[k] = make([]float64, len(l.b))
		}
	}
	return g
}

// backward adds to g the gradients of a loss whose gradient with respect
// to the net's output is dy, for the values vals of forward, and returns
// the gradient with respect to the input.
func (n *net) backward(vals [][]float64, dy []float64, g grads) []float64 {
	dv := make([][]float64, len(vals))
	dv[len(vals)-1] = dy
	add := func(v int, d []float64) {
		if dv[v] == nil {
			dv[v] = make([]float64, len(vals[v]))
		}
		for p := range d {
			dv[v][p] += d[p]
		}
	}
	for k := len(n.layers) - 1; k >= 0; k-- {
		l, d := n.layers[k], dv[k+1]
		if d == nil {
			continue
		}
		is, x := n.shapeOf(l.in[0]), vals[l.in[0]]
		dx := make([]float64, len(x))
		switch l.kind {
		case opConv:
			s := l.stride
			l.convRows(is, func(wi, yo, xo, j0, j1 int) {
				w := l.w[wi]
				var gw float64
				for j := j0; j < j1; j++ {
					dx[xo+j*s] += float64(d[yo+j] * w)
					gw += float64(d[yo+j] * x[xo+j*s])
				}
				g.w[k][wi] += gw
			})
		case opBN:
			plane := is.h * is.w
			for c := range is.c {
				s, inv := l.bnScale(c), 1/math.Sqrt(l.vr[c]+bnEps)
				var gw, gb float64
				for p := c * plane; p < (c+1)*plane; p++ {
					dx[p] = float64(d[p] * s)
					gw += float64(d[p] * float64((x[p]-l.mean[c])*inv))
					gb += d[p]
				}
				g.w[k][c] += gw
				g.b[k][c] += gb
			}
		case opRelu, opRelu6:
			hi := math.Inf(1)
			if l.kind == opRelu6 {
				hi = 6
			}
			for p := range x {
				if x[p] > 0 && x[p] < hi {
					dx[p] = d[p]
				}
			}
		case opAdd:
			copy(dx, d)
			add(l.in[1], d)
		case opMaxPool:
			for o := range d {
				dx[l.poolArgmax(is, x, o)] += d[o]
			}
		case opGAP:
			plane := is.h * is.w
			for p := range dx {
				dx[p] = d[p/plane] / float64(plane)
			}
		case opFlatten:
			copy(dx, d)
		case opGemm:
			for o := range d {
				row := l.w[o*len(x) : (o+1)*len(x)]
				for i := range x {
					dx[i] += float64(row[i] * d[o])
					g.w[k][o*len(x)+i] += float64(d[o] * x[i])
				}
				g.b[k][o] += d[o]
			}
		}
		add(l.in[0], dx)
	}
	return dv[0]
}

// softmaxXent is the cross-entropy loss of logits z for class label and
// its gradient with respect to z.
func softmaxXent(z []float64, label int) (float64, []float64) {
	m := z[0]
	for _, v := range z {
		m = max(m, v)
	}
	e := make([]float64, len(z))
	var s float64
	for k, v := range z {
		e[k] = exp(v - m)
		s += e[k]
	}
	for k := range e {
		e[k] /= s
	}
	loss := -math.Log(e[label])
	e[label]--
	return loss, e
}

// exp is eˣ for x ≤ 0 from correctly rounded operations only: math.Exp is
// assembly on some architectures, and the gradients must be the same bits
// on every machine.
func exp(x float64) float64 {
	k := math.Round(x / math.Ln2)
	r := x - float64(k*math.Ln2) // |r| ≤ ln 2 / 2
	s, t := 1.0, 1.0
	for i := 1; i <= 16; i++ {
		t = float64(t*r) / float64(i)
		s += t
	}
	return math.Ldexp(s, int(k))
}
