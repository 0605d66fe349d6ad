package onnxtest_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// MobileNet-v3's pieces in the float64 reference, as PaddleOCR's direction
// classifier and DB detector and torchvision build them: HardSwish, and
// the squeeze-and-excitation gate (GlobalAveragePool, 1×1 Conv with bias,
// ReLU, 1×1 Conv with bias, HardSigmoid) that scales its block's channels;
// and the way each exporter writes them.

// exportStyle is the exporter whose graph net.graph writes.
type exportStyle int

const (
	// styleTorch14 is torch.onnx at opset 14: HardSwish, the gate's
	// HardSigmoid(1/6, 1/2), Mul(gate, x).
	styleTorch14 exportStyle = iota
	// styleTorch13 is torch.onnx below opset 14, whose HardSwish is
	// x · HardSigmoid(x) with α = 1/6.
	styleTorch13
	// stylePaddle is paddle2onnx: HardSwish as (x · Clip(x + 3, 0, 6)) / 6,
	// the gate's HardSigmoid(0.2, 0.5) (PaddleOCR's slope), Mul(x, gate).
	stylePaddle
)

func (s exportStyle) opset() int64 { return [...]int64{14, 13, 11}[s] }

// gateAlpha is the slope of the gate's HardSigmoid in the style's
// framework.
func (s exportStyle) gateAlpha() float64 {
	if s == stylePaddle {
		return 0.2
	}
	return 1.0 / 6
}

// hard is HardSwish or HardSigmoid of v.
func (l *layer) hard(v float64) float64 {
	if l.kind == opHardSwish {
		return v * min(max(v/6+0.5, 0), 1)
	}
	return min(max(float64(l.alpha*v)+l.beta, 0), 1)
}

func addBias(y, b []float64) {
	if b == nil {
		return
	}
	plane := len(y) / len(b)
	for p := range y {
		y[p] += b[p/plane]
	}
}

// scaleChannels multiplies each channel of x by its gate value.
func scaleChannels(x, gate []float64) []float64 {
	plane := len(x) / len(gate)
	y := make([]float64, len(x))
	for p := range y {
		y[p] = x[p] * gate[p/plane]
	}
	return y
}

// exportMBv3 writes the nodes of l, a HardSwish, HardSigmoid or gate
// scaling, as the net's style does; nd has l's inputs and output.
func (n *net) exportMBv3(l *layer, nd node) []node {
	x, y := nd.inputs[0], nd.outputs[0]
	switch {
	case l.kind == opHardSigmoid:
		nd.op, nd.attrs = "HardSigmoid", []attr{fAttr("alpha", float32(l.alpha)), fAttr("beta", float32(l.beta))}
	case l.kind == opScale && n.style == stylePaddle:
		nd.op = "Mul"
	case l.kind == opScale:
		nd.op, nd.inputs = "Mul", []string{nd.inputs[1], x}
	case n.style == styleTorch14:
		nd.op = "HardSwish"
	case n.style == styleTorch13:
		return []node{
			{op: "HardSigmoid", inputs: []string{x}, outputs: []string{y + "/hs"}, attrs: []attr{fAttr("alpha", 1.0/6), fAttr("beta", 0.5)}},
			{op: "Mul", inputs: []string{x, y + "/hs"}, outputs: []string{y}},
		}
	default:
		return []node{
			{op: "Add", inputs: []string{x, "three"}, outputs: []string{y + "/add"}},
			{op: "Clip", inputs: []string{y + "/add", "zero", "six"}, outputs: []string{y + "/clip"}},
			{op: "Mul", inputs: []string{x, y + "/clip"}, outputs: []string{y + "/mul"}},
			{op: "Div", inputs: []string{y + "/mul", "six"}, outputs: []string{y}},
		}
	}
	return []node{nd}
}

// conv1x1 is a 1×1 convolution with a bias and no BN, as a gate's.
func (b *builder) conv1x1(x, cout int) int {
	is := b.n.shapeOf(x)
	return b.add(&layer{kind: opConv, in: []int{x}, out: shape{cout, is.h, is.w}, k: 1, stride: 1, group: 1,
		w: make([]float64, cout*is.c), b: make([]float64, cout)})
}

// squeezeExcite scales x's channels by a gate computed from x: global
// average pool, 1×1 conv to squeeze channels, ReLU, 1×1 conv back,
// HardSigmoid with the style's slope.
func (b *builder) squeezeExcite(x, squeeze int) int {
	c := b.n.shapeOf(x).c
	g := b.add(&layer{kind: opGAP, in: []int{x}, out: shape{c, 1, 1}})
	g = b.unary(opRelu, b.conv1x1(g, squeeze))
	g = b.conv1x1(g, c)
	g = b.add(&layer{kind: opHardSigmoid, in: []int{g}, out: shape{c, 1, 1}, alpha: b.n.style.gateAlpha(), beta: 0.5})
	return b.add(&layer{kind: opScale, in: []int{x, g}, out: b.n.shapeOf(x)})
}

// mbv3Block is a MobileNet-v3 bottleneck: 1×1 expansion conv-BN-act
// (none when hidden is the input's channels), k×k depthwise conv-BN-act,
// the squeeze-and-excitation gate squeezing to se channels (none if 0),
// 1×1 linear projection conv-BN, plus the input when the shape is kept;
// act is HardSwish or ReLU.
func (b *builder) mbv3Block(x, hidden, cout, k, stride, se int, act opKind) int {
	cin := b.n.shapeOf(x).c
	y := x
	if hidden != cin {
		y = b.unary(act, b.convBN(x, hidden, 1, 1, 1))
	}
	y = b.unary(act, b.convBN(y, hidden, k, stride, hidden))
	if se > 0 {
		y = b.squeezeExcite(y, se)
	}
	y = b.convBN(y, cout, 1, 1, 1)
	if stride == 1 && cin == cout {
		y = b.sum(y, x)
	}
	return y
}

// mbv3Tiny is a conv-BN-HardSwish stem (stride 2) to 20 channels, one
// MobileNet-v3 block 20 → 40 → 20 with a 3×3 depthwise and the residual,
// and a six-class head, for 3×16×16 images. 20 and 40 channels leave
// 16-lane blocks partly filled; the gate squeezes 40 to 10.
func mbv3Tiny(style exportStyle) *net {
	b := builder{&net{name: "mbv3_block", in: shape{3, 16, 16}, style: style}}
	x := b.unary(opHardSwish, b.convBN(0, 20, 3, 2, 1))
	x = b.mbv3Block(x, 40, 20, 3, 1, 10, opHardSwish)
	b.head(x, 6)
	return b.n
}

// mobilenetV3Small is MobileNet-v3-small for 224×224 images and 1000
// classes as torchvision builds it: a stride-2 3×3 conv-BN-HardSwish stem
// to 16 channels, the bottlenecks below (kernel, expansion, channels,
// gate, activation, stride; a gate squeezes to a quarter of the expansion
// rounded to a multiple of 8), a 1×1 conv-BN-HardSwish to 576, global
// average pooling, a fully connected layer to 1024 with HardSwish and the
// classifier.
func mobilenetV3Small() *net {
	b := builder{&net{name: "mobilenet_v3_small", in: shape{3, 224, 224}, style: styleTorch13}}
	x := b.unary(opHardSwish, b.convBN(0, 16, 3, 2, 1))
	for _, c := range []struct {
		k, exp, out int
		se          bool
		act         opKind
		stride      int
	}{
		{3, 16, 16, true, opRelu, 2}, {3, 72, 24, false, opRelu, 2}, {3, 88, 24, false, opRelu, 1},
		{5, 96, 40, true, opHardSwish, 2}, {5, 240, 40, true, opHardSwish, 1}, {5, 240, 40, true, opHardSwish, 1},
		{5, 120, 48, true, opHardSwish, 1}, {5, 144, 48, true, opHardSwish, 1}, {5, 288, 96, true, opHardSwish, 2},
		{5, 576, 96, true, opHardSwish, 1}, {5, 576, 96, true, opHardSwish, 1},
	} {
		se := 0
		if c.se {
			se = max(8, (c.exp/4+4)/8*8)
		}
		x = b.mbv3Block(x, c.exp, c.out, c.k, c.stride, se, c.act)
	}
	x = b.unary(opHardSwish, b.convBN(x, 576, 1, 1, 1))
	x = b.add(&layer{kind: opGAP, in: []int{x}, out: shape{576, 1, 1}})
	x = b.add(&layer{kind: opFlatten, in: []int{x}, out: shape{576, 1, 1}})
	x = b.unary(opHardSwish, b.fc(x, 1024))
	b.fc(x, 1000)
	return b.n
}

// fc is a fully connected layer with a bias.
func (b *builder) fc(x, out int) int {
	in := b.n.shapeOf(x).c
	return b.add(&layer{kind: opGemm, in: []int{x}, out: shape{out, 1, 1}, w: make([]float64, out*in), b: make([]float64, out)})
}

// seGateNet is a gate alone on a 40×5×7 input: the output is the input
// scaled.
func seGateNet(style exportStyle) *net {
	b := builder{&net{name: "se_gate", in: shape{40, 5, 7}, style: style}}
	b.squeezeExcite(0, 10)
	return b.n
}

// randomize sets n's parameters from r, rounded to the float32 the model
// stores: He-uniform weights, BN statistics and biases as runRandomNet's.
func (n *net) randomize(r *rand.Rand) {
	n.initWeights(r)
	for _, l := range n.layers {
		switch l.kind {
		case opBN:
			for c := range l.w {
				l.w[c], l.b[c] = 0.5+r.Float64(), 0.2*r.Float64()-0.1
				l.mean[c], l.vr[c] = 0.2*r.Float64()-0.1, 0.5+r.Float64()
			}
		case opConv, opGemm:
			for c := range l.b {
				l.b[c] = 0.2*r.Float64() - 0.1
			}
		}
		for _, v := range [][]float64{l.w, l.b, l.mean, l.vr} {
			for k := range v {
				v[k] = float64(float32(v[k]))
			}
		}
	}
}

// randomNetCase is n with random parameters and sets random images in
// [−2, 2), its outputs the float64 reference's.
func randomNetCase(name string, n *net, seed uint64, sets int) genCase {
	r := rand.New(rand.NewPCG(seed, 25))
	n.randomize(r)
	return netCase(name, n, r, sets)
}

// netCase is n with sets random images from r in [−2, 2), its outputs
// the float64 reference's.
func netCase(name string, n *net, r *rand.Rand, sets int) genCase {
	c := genCase{name: name, opset: n.style.opset(), g: n.graph()}
	for k := range sets {
		x := make([]float32, n.in.size())
		for p := range x {
			x[p] = float32(4*r.Float64() - 2)
		}
		vals := n.forward(from32(x))
		set := dataSet{
			ins:  []*onnx.Tensor{onnx.NewFloat32("x", n.inputDims(), x)},
			outs: []*onnx.Tensor{onnx.NewFloat32("y", n.outputDims(), to32(vals[len(vals)-1]))},
		}
		if k == 0 {
			c.ins, c.outs = set.ins, set.outs
		} else {
			c.more = append(c.more, set)
		}
	}
	return c
}

func init() { caseFamilies = append(caseFamilies, mbv3Cases) }

func mbv3Cases() []genCase {
	var cs []genCase
	for _, st := range []struct {
		style exportStyle
		name  string
	}{{styleTorch14, "torch14"}, {styleTorch13, "torch13"}, {stylePaddle, "paddle"}} {
		cs = append(cs, randomNetCase(fmt.Sprintf("se_gate_%s", st.name), seGateNet(st.style), 31+uint64(st.style), 1))
		blk := randomNetCase(fmt.Sprintf("mbv3_block_%s", st.name), mbv3Tiny(st.style), 41+uint64(st.style), 4)
		blk.int8 = true
		cs = append(cs, blk)
	}
	return append(cs, globalPoolCase("globalaveragepool_large", "GlobalAveragePool", 33, 70),
		globalPoolCase("globalmaxpool_wide", "GlobalMaxPool", 3, 40))
}

// globalPoolCase is GlobalAveragePool or GlobalMaxPool of a [1,20,h,w]
// input, wider or taller than the POOL instruction's window: the engine
// folds the pixels with the ALU, in chunks when they outgrow the
// accumulator.
func globalPoolCase(name, op string, h, w int64) genCase {
	xd, yd := []int64{1, 20, h, w}, []int64{1, 20, 1, 1}
	x := data(xd, 160)
	plane := int(h * w)
	y := make([]float32, 20)
	for ch := range y {
		px := x[ch*plane : (ch+1)*plane]
		var s float64
		m := px[0]
		for _, v := range px {
			s += float64(v)
			m = max(m, v)
		}
		y[ch] = m
		if op == "GlobalAveragePool" {
			y[ch] = float32(s / float64(plane))
		}
	}
	return genCase{name: name, opset: 13,
		g:    graph{nodes: []node{{op: op, inputs: []string{"x"}, outputs: []string{"y"}}}, inputs: []valueInfo{fvi("x", xd)}, outputs: []valueInfo{fvi("y", yd)}},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xd, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", yd, y)},
	}
}
