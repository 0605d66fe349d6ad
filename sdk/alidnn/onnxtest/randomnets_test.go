package onnxtest_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// mobilenetV2 is MobileNet-v2 at width 1.0 for 224×224 images and 1000
// classes, as torchvision builds it (every block with its 1×1 expansion):
// a stride-2 3×3 conv-BN-ReLU6 stem to 32 channels, the inverted residual
// stages (expansion t, channels c, blocks n, first stride s) below, a 1×1
// conv-BN-ReLU6 to 1280 and the classifier.
func mobilenetV2() *net {
	b := builder{&net{name: "mobilenet_v2", in: shape{3, 224, 224}}}
	x := b.unary(opRelu6, b.convBN(0, 32, 3, 2, 1))
	for _, st := range []struct{ t, c, n, s int }{
		{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2}, {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1},
	} {
		for k := range st.n {
			stride := 1
			if k == 0 {
				stride = st.s
			}
			x = b.invertedResidual(x, st.c, st.t, stride)
		}
	}
	x = b.unary(opRelu6, b.convBN(x, 1280, 1, 1, 1))
	b.head(x, 1000)
	return b.n
}

// resnet50 is ResNet-50 (v1.5: the stride on the 3×3 convolution) for
// 224×224 images and 1000 classes: a 7×7 stride-2 conv-BN-ReLU stem and a
// 3×3 stride-2 MaxPool, bottleneck stages of 3, 4, 6 and 3 blocks, the
// classifier.
func resnet50() *net {
	b := builder{&net{name: "resnet50", in: shape{3, 224, 224}}}
	x := b.unary(opRelu, b.convBN(0, 64, 7, 2, 1))
	x = b.maxPool(x, 3, 2, 1)
	for s, st := range []struct{ width, blocks int }{{64, 3}, {128, 4}, {256, 6}, {512, 3}} {
		for k := range st.blocks {
			stride := 1
			if k == 0 && s > 0 {
				stride = 2
			}
			x = b.bottleneck(x, st.width, stride)
		}
	}
	b.head(x, 1000)
	return b.n
}

// bottleneck is a ResNet bottleneck block: 1×1 conv-BN-ReLU to width, 3×3
// (strided) conv-BN-ReLU, 1×1 conv-BN to 4·width, plus the input (or its
// strided 1×1 conv-BN projection), then a ReLU.
func (b *builder) bottleneck(x, width, stride int) int {
	y := b.unary(opRelu, b.convBN(x, width, 1, 1, 1))
	y = b.unary(opRelu, b.convBN(y, width, 3, stride, 1))
	y = b.convBN(y, 4*width, 1, 1, 1)
	short := x
	if stride != 1 || b.n.shapeOf(x).c != 4*width {
		short = b.convBN(x, 4*width, 1, stride, 1)
	}
	return b.unary(opRelu, b.sum(y, short))
}

// TestNetMobileNetV2 runs MobileNet-v2 at its usual input size with random
// weights and normalisation statistics on the simulator: the logits must be
// near the float64 reference's (see the tolerance in runRandomNet) with the
// same top-1. It logs the modeled device time.
func TestNetMobileNetV2(t *testing.T) { runRandomNet(t, mobilenetV2()) }

// TestNetResNet50Random is TestNetMobileNetV2 for ResNet-50.
func TestNetResNet50Random(t *testing.T) { runRandomNet(t, resnet50()) }

// TestNetMobileNetV3Small is TestNetMobileNetV2 for MobileNet-v3-small as
// torch.onnx writes it below opset 14 (HardSwish as x · HardSigmoid(x)):
// nine squeeze-and-excitation gates.
func TestNetMobileNetV3Small(t *testing.T) { runRandomNet(t, mobilenetV3Small()) }

// runRandomNet runs n with random weights and normalisation statistics on
// the simulator and compares its logits with the float64 reference's.
func runRandomNet(t *testing.T, n *net) {
	testenv.FullNetwork(t)
	m, x := randomNet(t, n)
	want := n.forward(x)
	logits := want[len(want)-1]
	p, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := alidnn.Load(ctx, local(t), p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, onnx.NewFloat32("x", n.inputDims(), to32(x)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := res.Outputs[0].Float32s()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(logits) {
		t.Fatalf("%d logits, want %d", len(got), len(logits))
	}
	// The shared tolerance, widened by 1e-4 of the largest logit: random
	// weights make many logits cancel to near zero over thousands of
	// terms, where fp32's rounding of the big partial sums dominates
	// (about 6e-6 of the largest logit for MobileNet-v2).
	var scale float64
	for _, w := range logits {
		scale = max(scale, math.Abs(w))
	}
	var worst float64
	best, bestWant := 0, 0
	for k, w := range logits {
		worst = max(worst, math.Abs(float64(got[k])-w)/(1e-5+1e-3*math.Abs(w)+1e-4*scale))
		if got[k] > got[best] {
			best = k
		}
		if w > logits[bestWant] {
			bestWant = k
		}
	}
	if worst > 1 {
		t.Errorf("worst logit error %.3g× the tolerance", worst)
	}
	if best != bestWant {
		t.Errorf("top-1 is class %d, the reference's %d", best, bestWant)
	}
	t.Logf("%d layers, %.3f G MACs; modeled %.2f ms, host %v; worst error %.3g× the tolerance",
		p.Layers, float64(p.MACs)/1e9, float64(res.Stats.DeviceNS())/1e6, res.HostTime, worst)
}

// randomNet gives n random weights and normalisation statistics, as
// runRandomNet and the benchmarks use it, and returns its model and a
// random input image.
func randomNet(t testing.TB, n *net) (*onnx.Model, []float64) {
	r := rand.New(rand.NewPCG(2, 24))
	n.initWeights(r)
	for _, l := range n.layers {
		switch l.kind {
		case opBN:
			for c := range l.w {
				l.w[c], l.b[c] = 0.5+r.Float64(), 0.2*r.Float64()-0.1
				l.mean[c], l.vr[c] = 0.2*r.Float64()-0.1, 0.5+r.Float64()
			}
		case opGemm, opConv: // a convolution's bias where no BN follows
			for c := range l.b {
				l.b[c] = 0.1*r.Float64() - 0.05
			}
		}
	}
	// The exported weights are float32: the reference uses the same.
	for _, l := range n.layers {
		for _, v := range [][]float64{l.w, l.b, l.mean, l.vr} {
			for k := range v {
				v[k] = float64(float32(v[k]))
			}
		}
	}
	x := make([]float64, 3*224*224)
	for k := range x {
		x[k] = float64(float32(r.Float64()))
	}
	b, err := encodeModel(n.name, 13, n.graph())
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return m, x
}
