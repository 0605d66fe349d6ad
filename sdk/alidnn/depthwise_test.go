package alidnn_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// dwCase is a depthwise Conv + Clip(0, 6) of x [images, c, h, w] by a k×k
// kernel.
type dwCase struct {
	name             string
	c, h, w, k, s, d int
	pads             [4]int // top, left, bottom, right
	images           int    // the batch, 1 when 0
	zero, wide       bool   // a zero weight; weights spanning 2^30
	wantALU          bool
}

func (dc dwCase) out() (int, int) {
	span := (dc.k-1)*dc.d + 1
	return (dc.h+dc.pads[0]+dc.pads[2]-span)/dc.s + 1, (dc.w+dc.pads[1]+dc.pads[3]-span)/dc.s + 1
}

// TestDepthwiseALU runs fp32 depthwise convolutions — strided, dilated,
// asymmetrically padded, 5×5, tiles of several rows and blocks with a
// channel block partly used — against a float64 reference, and checks
// which unit ran them: the ALU's Horner form (no fp32 GEMM at all), or the
// array when a zero weight or weights over too wide a range refuse that
// form.
func TestDepthwiseALU(t *testing.T) {
	for _, dc := range []dwCase{
		{name: "3x3", c: 32, h: 12, w: 10, k: 3, s: 1, d: 1, pads: [4]int{1, 1, 1, 1}, wantALU: true},
		{name: "3x3 stride 2, 3 blocks, several tiles", c: 40, h: 45, w: 43, k: 3, s: 2, d: 1, pads: [4]int{1, 1, 1, 1}, wantALU: true},
		{name: "5x5 tall, several tiles", c: 18, h: 40, w: 36, k: 5, s: 1, d: 1, pads: [4]int{2, 2, 2, 2}, wantALU: true},
		{name: "dilated, asymmetric pads", c: 20, h: 9, w: 11, k: 3, s: 1, d: 2, pads: [4]int{2, 1, 0, 2}, wantALU: true},
		{name: "two images", c: 24, h: 8, w: 7, k: 3, s: 1, d: 1, pads: [4]int{1, 1, 1, 1}, images: 2, wantALU: true},
		{name: "a zero weight", c: 16, h: 6, w: 6, k: 3, s: 1, d: 1, pads: [4]int{1, 1, 1, 1}, zero: true},
		{name: "weights over 2^30", c: 16, h: 6, w: 6, k: 3, s: 1, d: 1, pads: [4]int{1, 1, 1, 1}, wide: true},
	} {
		t.Run(dc.name, func(t *testing.T) { runDepthwise(t, dc) })
	}
}

func runDepthwise(t *testing.T, dc dwCase) {
	r := rand.New(rand.NewPCG(5, uint64(dc.c*dc.h)))
	ni := max(dc.images, 1)
	x := make([]float32, ni*dc.c*dc.h*dc.w)
	for k := range x {
		x[k] = float32(r.NormFloat64())
	}
	w := make([]float32, dc.c*dc.k*dc.k)
	for k := range w {
		w[k] = float32(r.NormFloat64() / 3)
	}
	b := make([]float32, dc.c)
	for k := range b {
		b[k] = float32(r.Float64() - 0.5)
	}
	if dc.zero {
		w[5] = 0
	}
	if dc.wide {
		w[3] = 0x1p-30
	}
	kk := int64(dc.k)
	conv := &onnx.Node{OpType: "Conv", Inputs: []string{"x", "w", "b"}, Outputs: []string{"c"}, Attrs: []*onnx.Attribute{
		{Name: "group", Type: onnx.AttrInt, I: int64(dc.c)},
		{Name: "kernel_shape", Type: onnx.AttrInts, Ints: []int64{kk, kk}},
		{Name: "strides", Type: onnx.AttrInts, Ints: []int64{int64(dc.s), int64(dc.s)}},
		{Name: "dilations", Type: onnx.AttrInts, Ints: []int64{int64(dc.d), int64(dc.d)}},
		{Name: "pads", Type: onnx.AttrInts, Ints: []int64{int64(dc.pads[0]), int64(dc.pads[1]), int64(dc.pads[2]), int64(dc.pads[3])}},
	}}
	lo, hi := onnx.NewFloat32("lo", nil, []float32{0}), onnx.NewFloat32("hi", nil, []float32{6})
	clip := &onnx.Node{OpType: "Clip", Inputs: []string{"c", "lo", "hi"}, Outputs: []string{"y"}}
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs: []onnx.ValueInfo{vinfo("x", int64(ni), int64(dc.c), int64(dc.h), int64(dc.w))},
		Initializers: []*onnx.Tensor{onnx.NewFloat32("w", []int64{int64(dc.c), 1, kk, kk}, w),
			onnx.NewFloat32("b", []int64{int64(dc.c)}, b), lo, hi},
		Nodes: []*onnx.Node{conv, clip}, Outputs: []onnx.ValueInfo{{Name: "y"}},
	}}
	p, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	gemm := false
	for _, in := range p.Insns {
		gemm = gemm || in.Op == isa.OpGEMM && in.FP32 && !in.Reset
	}
	if gemm == dc.wantALU {
		t.Errorf("fp32 GEMM instructions: %v, want %v", gemm, !dc.wantALU)
	}
	got := runProgram(t, local(t), p, onnx.NewFloat32("x", []int64{int64(ni), int64(dc.c), int64(dc.h), int64(dc.w)}, x))
	oh, ow := dc.out()
	if len(got) != ni*dc.c*oh*ow {
		t.Fatalf("%d outputs, want %d", len(got), ni*dc.c*oh*ow)
	}
	var worst float64
	for ic := range ni * dc.c {
		c := ic % dc.c
		for i := range oh {
			for j := range ow {
				s, mag := float64(b[c]), math.Abs(float64(b[c]))
				for ki := range dc.k {
					for kj := range dc.k {
						y, xx := i*dc.s+ki*dc.d-dc.pads[0], j*dc.s+kj*dc.d-dc.pads[1]
						if y < 0 || y >= dc.h || xx < 0 || xx >= dc.w {
							continue
						}
						v := float64(x[(ic*dc.h+y)*dc.w+xx]) * float64(w[(c*dc.k+ki)*dc.k+kj])
						s, mag = s+v, mag+math.Abs(v)
					}
				}
				want := min(max(s, 0), 6)
				// fp32 summation's error bound, a few ulps of each term.
				worst = max(worst, math.Abs(float64(got[(ic*oh+i)*ow+j])-want)/(1e-6*mag+1e-30))
			}
		}
	}
	if worst > 1 {
		t.Errorf("worst error %.3g× 1e-6 of the terms' magnitudes", worst)
	}
}

// TestDepthwiseCycles checks the modeled time of a 3×3 depthwise layer on
// 64 channels of 28×28: on the ALU 25 cycles per output vector of 16
// channels (two a tap, the first tap's LOAD, the input tile's LOAD, the
// bias and Clip, and the program's fixed costs), where the array's
// diagonal tiles took 41 (four a tap).
func TestDepthwiseCycles(t *testing.T) {
	const c, h = 64, 28
	w := make([]float32, c*9)
	for k := range w {
		w[k] = float32(k%7+1) / 20 // no zero, which would keep the layer on the array
	}
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs: []onnx.ValueInfo{vinfo("x", 1, c, h, h)},
		Initializers: []*onnx.Tensor{onnx.NewFloat32("w", []int64{c, 1, 3, 3}, w), ramp("b", []int64{c}, 0.1),
			onnx.NewFloat32("lo", nil, []float32{0}), onnx.NewFloat32("hi", nil, []float32{6})},
		Nodes: []*onnx.Node{
			{OpType: "Conv", Inputs: []string{"x", "w", "b"}, Outputs: []string{"c"}, Attrs: []*onnx.Attribute{
				{Name: "group", Type: onnx.AttrInt, I: c}, {Name: "pads", Type: onnx.AttrInts, Ints: []int64{1, 1, 1, 1}}}},
			{OpType: "Clip", Inputs: []string{"c", "lo", "hi"}, Outputs: []string{"y"}}},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}}
	p, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := alidnn.Load(ctx, local(t), p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, ramp("x", []int64{1, c, h, h}, 0.5))
	if err != nil {
		t.Fatal(err)
	}
	vectors := float64(c / 16 * h * h)
	if per := float64(res.Stats.Cycles) / vectors; per > 28 {
		t.Errorf("%.1f cycles per output vector, want at most 28", per)
	} else {
		t.Logf("%.1f cycles per output vector", per)
	}
}
