package onnxtest_test

import "math"

// A float64 reference of the small CNNs the trained cases export: its
// forward pass gives their reference outputs, and is what the trainer
// (backprop_test.go) differentiates. One image at a time, NCHW with N = 1.
//
// Every product that is summed is rounded explicitly (float64(a*b)): Go
// may fuse a*b+c on some architectures and not others, and training and
// the reference outputs must come out bit-identical on any machine.

type opKind int

const (
	opConv opKind = iota
	opBN
	opRelu
	opRelu6
	opAdd
	opMaxPool
	opGAP
	opFlatten
	opGemm
	// MobileNet-v3's (mbv3_test.go): HardSwish; HardSigmoid with the
	// layer's alpha and beta; a [C,H,W] input scaled by a [C,1,1] gate.
	opHardSwish
	opHardSigmoid
	opScale
	// Softmax of a classifier's logits (mbv3net_test.go).
	opSoftmax
)

// shape is one image's activation shape; a Flatten's or Gemm's output is
// c×1×1.
type shape struct{ c, h, w int }

func (s shape) size() int { return s.c * s.h * s.w }

// layer is one node of a net. Its output is the net's value index+1, value
// 0 being the input.
type layer struct {
	kind opKind
	in   []int
	out  shape
	// A convolution's or pool's square window, and a convolution's groups.
	k, stride, pad, group int
	// Conv: w [cout, cin/group, k, k], and b [cout] where no BN follows
	// (a squeeze-and-excitation gate's). Gemm: w [out, in], b [out]. BN: w
	// the scale (gamma), b the bias (beta), mean and vr the running
	// statistics.
	w, b, mean, vr []float64
	// HardSigmoid's slope and offset.
	alpha, beta float64
}

type net struct {
	name   string
	in     shape
	layers []*layer
	// style is how graph writes MobileNet-v3's operators.
	style exportStyle
}

func (n *net) shapeOf(v int) shape {
	if v == 0 {
		return n.in
	}
	return n.layers[v-1].out
}

// bnEps is BatchNormalization's ε as the exported file stores it, a
// float32.
const bnEps32 float32 = 1e-5

var bnEps = float64(bnEps32)

// forward returns every value of the net on x, the output last.
func (n *net) forward(x []float64) [][]float64 {
	vals := make([][]float64, len(n.layers)+1)
	vals[0] = x
	for k, l := range n.layers {
		is, in := n.shapeOf(l.in[0]), vals[l.in[0]]
		var y []float64
		switch l.kind {
		case opConv:
			y = l.conv(is, in)
			addBias(y, l.b)
		case opBN:
			y = make([]float64, len(in))
			plane := is.h * is.w
			for c := range is.c {
				s := l.bnScale(c)
				for p := c * plane; p < (c+1)*plane; p++ {
					y[p] = float64((in[p]-l.mean[c])*s) + l.b[c]
				}
			}
		case opRelu:
			y = mapSlice(in, func(v float64) float64 { return max(v, 0) })
		case opRelu6:
			y = mapSlice(in, func(v float64) float64 { return min(max(v, 0), 6) })
		case opAdd:
			other := vals[l.in[1]]
			y = make([]float64, len(in))
			for p := range y {
				y[p] = in[p] + other[p]
			}
		case opMaxPool:
			y = make([]float64, l.out.size())
			for o := range y {
				y[o] = in[l.poolArgmax(is, in, o)]
			}
		case opGAP:
			y = make([]float64, is.c)
			plane := is.h * is.w
			for c := range is.c {
				var s float64
				for _, v := range in[c*plane : (c+1)*plane] {
					s += v
				}
				y[c] = s / float64(plane)
			}
		case opFlatten:
			y = in
		case opHardSwish, opHardSigmoid:
			y = mapSlice(in, l.hard)
		case opScale:
			y = scaleChannels(in, vals[l.in[1]])
		case opSoftmax:
			y = softmax64(in)
		case opGemm:
			y = make([]float64, l.out.c)
			for o := range y {
				s := l.b[o]
				for i, v := range in {
					s += float64(l.w[o*len(in)+i] * v)
				}
				y[o] = s
			}
		}
		vals[k+1] = y
	}
	return vals
}

func mapSlice(x []float64, f func(float64) float64) []float64 {
	y := make([]float64, len(x))
	for k, v := range x {
		y[k] = f(v)
	}
	return y
}

// bnScale is channel c's gamma / √(var + ε), as BatchNormalization
// computes it.
func (l *layer) bnScale(c int) float64 { return l.w[c] / math.Sqrt(l.vr[c]+bnEps) }

// convRows calls f for every run of a convolution's taps that share a
// weight: weight wi, the output row starting at element yo, and input
// element xo + j·stride for its output elements yo + j, j in [j0, j1). The
// forward pass and both gradients walk the same runs in the same order.
func (l *layer) convRows(is shape, f func(wi, yo, xo, j0, j1 int)) {
	os := l.out
	cig, cog := is.c/l.group, os.c/l.group
	for o := range os.c {
		g := o / cog
		for ci := range cig {
			c := g*cig + ci
			for ki := range l.k {
				for kj := range l.k {
					wi := ((o*cig+ci)*l.k+ki)*l.k + kj
					j0 := max(0, ceilDiv(l.pad-kj, l.stride))
					j1 := min(os.w, ceilDiv(is.w+l.pad-kj, l.stride))
					for i := range os.h {
						ii := i*l.stride + ki - l.pad
						if ii < 0 || ii >= is.h || j0 >= j1 {
							continue
						}
						f(wi, (o*os.h+i)*os.w, (c*is.h+ii)*is.w+kj-l.pad, j0, j1)
					}
				}
			}
		}
	}
}

// ceilDiv is ⌈a/b⌉ for b > 0, and at most 0 for a ≤ 0.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

func (l *layer) conv(is shape, x []float64) []float64 {
	y := make([]float64, l.out.size())
	s := l.stride
	l.convRows(is, func(wi, yo, xo, j0, j1 int) {
		w := l.w[wi]
		for j := j0; j < j1; j++ {
			y[yo+j] += float64(x[xo+j*s] * w)
		}
	})
	return y
}

// poolArgmax is the input element output element o of a MaxPool takes, the
// first of its window's largest (padding never wins: it is −∞).
func (l *layer) poolArgmax(is shape, x []float64, o int) int {
	os := l.out
	c, i, j := o/(os.h*os.w), o/os.w%os.h, o%os.w
	best := -1
	for ki := range l.k {
		ii := i*l.stride + ki - l.pad
		if ii < 0 || ii >= is.h {
			continue
		}
		for kj := range l.k {
			jj := j*l.stride + kj - l.pad
			if jj < 0 || jj >= is.w {
				continue
			}
			p := (c*is.h+ii)*is.w + jj
			if best < 0 || x[p] > x[best] {
				best = p
			}
		}
	}
	return best
}
