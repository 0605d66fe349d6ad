package onnxtest_test

// The two architectures of the trained cases, scaled down to train in
// seconds: a ResNet-style and a MobileNet-v2-style classifier of
// synthShape images.

// builder appends layers to a net; each method returns the value it adds.
type builder struct{ n *net }

func (b *builder) add(l *layer) int {
	b.n.layers = append(b.n.layers, l)
	return len(b.n.layers)
}

// convBN is a k×k convolution with padding k/2 and no bias, followed by a
// BN, as exporters write a Conv whose BN is not yet folded.
func (b *builder) convBN(x, cout, k, stride, group int) int {
	is := b.n.shapeOf(x)
	pad := k / 2
	os := shape{cout, (is.h+2*pad-k)/stride + 1, (is.w+2*pad-k)/stride + 1}
	c := b.add(&layer{kind: opConv, in: []int{x}, out: os, k: k, stride: stride, pad: pad, group: group,
		w: make([]float64, cout*is.c/group*k*k)})
	return b.add(&layer{kind: opBN, in: []int{c}, out: os,
		w: fill64(cout, 1), b: make([]float64, cout), mean: make([]float64, cout), vr: fill64(cout, 1)})
}

func fill64(n int, v float64) []float64 {
	s := make([]float64, n)
	for k := range s {
		s[k] = v
	}
	return s
}

func (b *builder) unary(kind opKind, x int) int {
	return b.add(&layer{kind: kind, in: []int{x}, out: b.n.shapeOf(x)})
}

func (b *builder) sum(x, y int) int {
	return b.add(&layer{kind: opAdd, in: []int{x, y}, out: b.n.shapeOf(x)})
}

func (b *builder) maxPool(x, k, stride, pad int) int {
	is := b.n.shapeOf(x)
	os := shape{is.c, (is.h+2*pad-k)/stride + 1, (is.w+2*pad-k)/stride + 1}
	return b.add(&layer{kind: opMaxPool, in: []int{x}, out: os, k: k, stride: stride, pad: pad})
}

// head is global average pooling, Flatten and a fully connected layer to
// the classes' logits.
func (b *builder) head(x, classes int) int {
	c := b.n.shapeOf(x).c
	x = b.add(&layer{kind: opGAP, in: []int{x}, out: shape{c, 1, 1}})
	x = b.add(&layer{kind: opFlatten, in: []int{x}, out: shape{c, 1, 1}})
	return b.add(&layer{kind: opGemm, in: []int{x}, out: shape{classes, 1, 1},
		w: make([]float64, classes*c), b: make([]float64, classes)})
}

// basicBlock is a ResNet basic block: two 3×3 conv-BN, the first strided,
// a ReLU between, plus the input (or its 1×1 strided conv-BN projection
// when the shape changes), then a ReLU.
func (b *builder) basicBlock(x, cout, stride int) int {
	y := b.unary(opRelu, b.convBN(x, cout, 3, stride, 1))
	y = b.convBN(y, cout, 3, 1, 1)
	short := x
	if stride != 1 || b.n.shapeOf(x).c != cout {
		short = b.convBN(x, cout, 1, stride, 1)
	}
	return b.unary(opRelu, b.sum(y, short))
}

// invertedResidual is a MobileNet-v2 block: 1×1 expansion by expand and
// ReLU6, 3×3 depthwise (strided) and ReLU6, 1×1 linear projection, plus
// the input when the shape is kept.
func (b *builder) invertedResidual(x, cout, expand, stride int) int {
	cin := b.n.shapeOf(x).c
	hidden := cin * expand
	y := b.unary(opRelu6, b.convBN(x, hidden, 1, 1, 1))
	y = b.unary(opRelu6, b.convBN(y, hidden, 3, stride, hidden))
	y = b.convBN(y, cout, 1, 1, 1)
	if stride == 1 && cin == cout {
		y = b.sum(y, x)
	}
	return y
}

// resnetTiny: conv-BN-ReLU stem (stride 2) and a 3×3 MaxPool (stride 2),
// basic blocks 8→8, 8→16 (stride 2, projected) and 16→16, head.
func resnetTiny() *net {
	b := builder{&net{name: "resnet_tiny", in: synthShape}}
	x := b.unary(opRelu, b.convBN(0, 8, 3, 2, 1))
	x = b.maxPool(x, 3, 2, 1)
	x = b.basicBlock(x, 8, 1)
	x = b.basicBlock(x, 16, 2)
	x = b.basicBlock(x, 16, 1)
	b.head(x, synthClasses)
	return b.n
}

// mobilenetTiny: conv-BN-ReLU6 stem (stride 2), inverted residuals 8→12
// (stride 2), 12→12 (residual) and 12→16 (stride 2), a 1×1 conv-BN-ReLU6
// to 32 channels, head.
func mobilenetTiny() *net {
	b := builder{&net{name: "mobilenet_tiny", in: synthShape}}
	x := b.unary(opRelu6, b.convBN(0, 8, 3, 2, 1))
	x = b.invertedResidual(x, 12, 2, 2)
	x = b.invertedResidual(x, 12, 2, 1)
	x = b.invertedResidual(x, 16, 2, 2)
	x = b.unary(opRelu6, b.convBN(x, 32, 1, 1, 1))
	b.head(x, synthClasses)
	return b.n
}
