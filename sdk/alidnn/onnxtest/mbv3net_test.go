package onnxtest_test

import (
	"math"
	"math/rand/v2"
)

// A small MobileNet-v3 whole, as paddle2onnx writes PaddleClas's
// MobileNetV3 (opset 11, NCHW, each Conv followed by its unfolded
// BatchNormalization, HardSwish as (x · Clip(x + 3, 0, 6)) / 6 and the
// gate's HardSigmoid(0.2, 0.5)): a 3×3 stride-2 conv-BN-HardSwish stem,
// three bottlenecks — a 3×3 depthwise with the gate and ReLU (no
// expansion, stride 2), a 5×5 depthwise expanding to 40 with ReLU (stride
// 2), a 5×5 depthwise expanding to 72 with the gate and HardSwish and the
// residual — a 1×1 conv-BN-HardSwish to 96, and the head: global average
// pooling, the last 1×1 Conv with a bias and HardSwish (as PaddleClas has
// it after the pool), Flatten, a Gemm to ten classes and Softmax. Random
// weights (randomize's He-uniform and BN statistics, not trained; the
// head's bias centred, see centreHead): the outputs are the float64
// reference's on the exported numbers.

// mbv3Small is that net for 3×32×32 images, in style.
func mbv3Small(style exportStyle) *net {
	b := builder{&net{name: "mbv3_small", in: shape{3, 32, 32}, style: style}}
	x := b.unary(opHardSwish, b.convBN(0, 16, 3, 2, 1))
	x = b.mbv3Block(x, 16, 16, 3, 2, 8, opRelu)
	x = b.mbv3Block(x, 40, 24, 5, 2, 0, opRelu)
	x = b.mbv3Block(x, 72, 24, 5, 1, 16, opHardSwish)
	x = b.unary(opHardSwish, b.convBN(x, 96, 1, 1, 1))
	x = b.add(&layer{kind: opGAP, in: []int{x}, out: shape{96, 1, 1}})
	x = b.unary(opHardSwish, b.conv1x1(x, 64))
	x = b.add(&layer{kind: opFlatten, in: []int{x}, out: shape{64, 1, 1}})
	x = b.fc(x, 10)
	b.unary(opSoftmax, x)
	return b.n
}

// softmax64 is the softmax of the logits x.
func softmax64(x []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	y := make([]float64, len(x))
	var s float64
	for k, v := range x {
		y[k] = math.Exp(v - m)
		s += y[k]
	}
	for k := range y {
		y[k] /= s
	}
	return y
}

func init() { caseFamilies = append(caseFamilies, mbv3NetCases) }

func mbv3NetCases() []genCase {
	n := mbv3Small(stylePaddle)
	r := rand.New(rand.NewPCG(51, 25))
	n.randomize(r)
	n.centreHead(rand.New(rand.NewPCG(52, 25)), 64)
	c := netCase("mbv3_small_paddle", n, r, 4)
	c.int8 = true
	return []genCase{c}
}

// centreHead subtracts from the classifier's bias its mean logits over
// images random images: a random net's pooled features are much alike, so
// one class would win on every image, and the int8 comparison of top-1
// classes would prove little.
func (n *net) centreHead(r *rand.Rand, images int) {
	g := -1
	for k, l := range n.layers {
		if l.kind == opGemm {
			g = k
		}
	}
	head := n.layers[g]
	mean := make([]float64, head.out.c)
	for range images {
		x := make([]float64, n.in.size())
		for p := range x {
			x[p] = float64(float32(4*r.Float64() - 2))
		}
		for o, v := range n.forward(x)[g+1] {
			mean[o] += v / float64(images)
		}
	}
	for o := range mean {
		head.b[o] = float64(float32(head.b[o] - mean[o]))
	}
}
