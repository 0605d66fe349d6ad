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
	noBias           bool
	want             dwRunner
}

// dwRunner is what runs a depthwise layer.
type dwRunner int

const (
	onUnit  dwRunner = iota // the depthwise unit (POOL dw)
	onALU                   // the ALU's Horner form (depthwise.go)
	onArray                 // the array's diagonal weight tiles
)

func (r dwRunner) String() string { return [...]string{"the unit", "the ALU", "the array"}[r] }

// dwRunnerOf tells which unit a program's depthwise layer ran on.
func dwRunnerOf(p *alidnn.Program) dwRunner {
	gemm, pool := false, false
	for _, in := range p.Insns {
		gemm = gemm || in.Op == isa.OpGEMM && in.FP32 && !in.Reset
		pool = pool || in.Op == isa.OpPool && in.Pool.Depthwise()
	}
	switch {
	case pool && !gemm:
		return onUnit
	case gemm && !pool:
		return onArray
	case !gemm && !pool:
		return onALU
	}
	return -1
}

func (dc dwCase) out() (int, int) {
	span := (dc.k-1)*dc.d + 1
	return (dc.h+dc.pads[0]+dc.pads[2]-span)/dc.s + 1, (dc.w+dc.pads[1]+dc.pads[3]-span)/dc.s + 1
}

// TestDepthwiseFP32 runs fp32 depthwise convolutions — strided, dilated,
// asymmetrically padded, 5×5, tiles of several rows and blocks with a
// channel block partly used — against a float64 reference, and checks
// which unit ran them: the depthwise unit, whose fp32 products take any
// weights; the ALU's Horner form for a kernel wider than the unit's 15
// taps; the array when such a kernel has a zero weight or weights over
// too wide a range for the Horner form.
func TestDepthwiseFP32(t *testing.T) {
	for _, dc := range []dwCase{
		{name: "3x3", c: 32, h: 12, w: 10, k: 3, s: 1, d: 1, pads: [4]int{1, 1, 1, 1}},
		{name: "3x3 stride 2, 3 blocks, several tiles", c: 40, h: 45, w: 43, k: 3, s: 2, d: 1, pads: [4]int{1, 1, 1, 1}},
		{name: "5x5 tall, several tiles", c: 18, h: 40, w: 36, k: 5, s: 1, d: 1, pads: [4]int{2, 2, 2, 2}},
		{name: "dilated, asymmetric pads", c: 20, h: 9, w: 11, k: 3, s: 1, d: 2, pads: [4]int{2, 1, 0, 2}},
		{name: "no bias", c: 20, h: 9, w: 11, k: 3, s: 1, d: 1, pads: [4]int{1, 1, 1, 1}, noBias: true},
		{name: "two images", c: 24, h: 8, w: 7, k: 3, s: 1, d: 1, pads: [4]int{1, 1, 1, 1}, images: 2},
		{name: "a zero weight", c: 16, h: 6, w: 6, k: 3, s: 1, d: 1, pads: [4]int{1, 1, 1, 1}, zero: true},
		{name: "weights over 2^30", c: 16, h: 6, w: 6, k: 3, s: 1, d: 1, pads: [4]int{1, 1, 1, 1}, wide: true},
		{name: "wide input, one row a tile", c: 16, h: 4, w: 600, k: 3, s: 1, d: 1, pads: [4]int{1, 1, 1, 1}},
		{name: "17x17 on the ALU", c: 20, h: 18, w: 17, k: 17, s: 1, d: 1, pads: [4]int{8, 8, 8, 8}, want: onALU},
		{name: "17x17 with a zero weight on the array", c: 16, h: 17, w: 17, k: 17, s: 1, d: 1, pads: [4]int{8, 8, 8, 8}, zero: true, want: onArray},
	} {
		t.Run(dc.name, func(t *testing.T) { runDepthwise(t, dc) })
	}
}

// dwModel is dc's graph, its input, its reference output (float64; then
// each output's terms' magnitudes) and its largest weight magnitude:
// Conv(x, w[, b]) then Clip(0, 6).
func dwModel(dc dwCase) (*onnx.Model, *onnx.Tensor, []float64, float64) {
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
		if !dc.noBias {
			b[k] = float32(r.Float64() - 0.5)
		}
	}
	if dc.zero {
		w[5] = 0
	}
	if dc.wide {
		w[3] = 0x1p-30
	}
	kk := int64(dc.k)
	inputs, inits := []string{"x", "w", "b"}, []*onnx.Tensor{onnx.NewFloat32("w", []int64{int64(dc.c), 1, kk, kk}, w)}
	if dc.noBias {
		inputs = inputs[:2]
	} else {
		inits = append(inits, onnx.NewFloat32("b", []int64{int64(dc.c)}, b))
	}
	conv := &onnx.Node{OpType: "Conv", Inputs: inputs, Outputs: []string{"c"}, Attrs: []*onnx.Attribute{
		{Name: "group", Type: onnx.AttrInt, I: int64(dc.c)},
		{Name: "kernel_shape", Type: onnx.AttrInts, Ints: []int64{kk, kk}},
		{Name: "strides", Type: onnx.AttrInts, Ints: []int64{int64(dc.s), int64(dc.s)}},
		{Name: "dilations", Type: onnx.AttrInts, Ints: []int64{int64(dc.d), int64(dc.d)}},
		{Name: "pads", Type: onnx.AttrInts, Ints: []int64{int64(dc.pads[0]), int64(dc.pads[1]), int64(dc.pads[2]), int64(dc.pads[3])}},
	}}
	lo, hi := onnx.NewFloat32("lo", nil, []float32{0}), onnx.NewFloat32("hi", nil, []float32{6})
	clip := &onnx.Node{OpType: "Clip", Inputs: []string{"c", "lo", "hi"}, Outputs: []string{"y"}}
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", int64(ni), int64(dc.c), int64(dc.h), int64(dc.w))},
		Initializers: append(inits, lo, hi),
		Nodes:        []*onnx.Node{conv, clip}, Outputs: []onnx.ValueInfo{{Name: "y"}},
	}}
	in := onnx.NewFloat32("x", []int64{int64(ni), int64(dc.c), int64(dc.h), int64(dc.w)}, x)
	oh, ow := dc.out()
	want := make([]float64, 2*ni*dc.c*oh*ow) // values, then the terms' magnitudes
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
				o := (ic*oh+i)*ow + j
				want[o], want[len(want)/2+o] = min(max(s, 0), 6), mag
			}
		}
	}
	var wMax float64
	for _, v := range w {
		wMax = max(wMax, math.Abs(float64(v)))
	}
	return m, in, want, wMax
}

func runDepthwise(t *testing.T, dc dwCase) {
	m, in, want, _ := dwModel(dc)
	p, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	if got := dwRunnerOf(p); got != dc.want {
		t.Errorf("ran on %v, want %v", got, dc.want)
	}
	for _, i := range p.Insns {
		// The unit adds the bias and clamps to Clip's bounds itself.
		if dc.want == onUnit && i.Op == isa.OpALU {
			t.Fatalf("%s: the unit's bias and Clip left to the ALU", isa.DisassembleInsn(i))
		}
	}
	got := runProgram(t, local(t), p, in)
	if len(got) != len(want)/2 {
		t.Fatalf("%d outputs, want %d", len(got), len(want)/2)
	}
	var worst float64
	for o, v := range got {
		// fp32 summation's error bound, a few ulps of each term.
		worst = max(worst, math.Abs(float64(v)-want[o])/(1e-6*want[len(got)+o]+1e-30))
	}
	if worst > 1 {
		t.Errorf("worst error %.3g× 1e-6 of the terms' magnitudes", worst)
	}
}

// TestDepthwiseInt8 quantises depthwise layers (per-channel weights within
// −127..127, so the unit takes them) and checks that the unit ran them in
// int8 and that they are within the quantisation's error of the float64
// reference: half an input step and half a weight step in each of the
// window's terms, and an output step.
func TestDepthwiseInt8(t *testing.T) {
	for _, dc := range []dwCase{
		{name: "3x3 stride 2, 3 blocks", c: 40, h: 21, w: 19, k: 3, s: 2, d: 1, pads: [4]int{1, 1, 1, 1}},
		{name: "5x5 dilated, no bias", c: 20, h: 12, w: 13, k: 5, s: 1, d: 2, pads: [4]int{4, 3, 2, 4}, noBias: true},
	} {
		t.Run(dc.name, func(t *testing.T) {
			m, in, want, wMax := dwModel(dc)
			dev := local(t)
			p, err := alidnn.Quantize(context.Background(), dev, m, [][]*onnx.Tensor{{in}})
			if err != nil {
				t.Fatal(err)
			}
			int8Pool := false
			for _, i := range p.Insns {
				int8Pool = int8Pool || i.Op == isa.OpPool && i.Pool.Depthwise() && !i.FP32
			}
			if !int8Pool || dwRunnerOf(p) != onUnit {
				t.Fatalf("int8 depthwise POOL: %v, ran on %v; want the unit in int8", int8Pool, dwRunnerOf(p))
			}
			got := runProgram(t, dev, p, in)
			x, err := in.Float32s()
			if err != nil {
				t.Fatal(err)
			}
			var inMax, outMax float64
			for _, v := range x {
				inMax = max(inMax, math.Abs(float64(v)))
			}
			n := len(want) / 2
			for _, v := range want[:n] {
				outMax = max(outMax, v)
			}
			tol := float64(dc.k*dc.k)*inMax*wMax/127 + outMax/127
			var worst float64
			for o, v := range got {
				d := math.Abs(float64(v) - want[o])
				if d > tol {
					t.Fatalf("output %d = %v, want %v ± %.3g", o, v, want[o], tol)
				}
				worst = max(worst, d)
			}
			t.Logf("worst error %.3g (%.2g%% of the outputs' range; bound %.3g)", worst, 100*worst/outMax, tol)
		})
	}
}

// TestDepthwiseCycles checks the modeled time of a 3×3 depthwise layer on
// 64 channels of 28×28: on the depthwise unit under 5 cycles per output
// vector of 16 channels (4 for the window at the fp32 rate, with the bias
// and Clip fused, and the program's fixed costs and the LOADs the queues
// do not hide), where the ALU took 25 (two a tap) and the array's diagonal
// tiles 41 (four a tap).
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
	if per := float64(res.Stats.Cycles) / vectors; per > 5 {
		t.Errorf("%.1f cycles per output vector, want at most 5", per)
	} else {
		t.Logf("%.1f cycles per output vector", per)
	}
}
