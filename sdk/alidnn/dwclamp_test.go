package alidnn_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// expandDW is an inverted residual's first half on x [1, c, h, w]: a 1×1
// convolution to e channels, act (Clip(0, 6), Relu, Clip(−1, 6), or
// Clip(0.5, 6), which would move the padding's 0), a 3×3 depthwise convolution
// with padding 1, Clip(0, 6). With exposed, the expansion's activation is
// a graph output too.
func expandDW(c, e, h, w int, act string, exposed bool) (*onnx.Model, *onnx.Tensor, func(x []float32) ([]float64, []float64)) {
	r := rand.New(rand.NewPCG(7, uint64(c*e)))
	w1 := make([]float32, e*c)
	for k := range w1 {
		w1[k] = float32(r.NormFloat64() / 2)
	}
	b1, wd, bd := make([]float32, e), make([]float32, e*9), make([]float32, e)
	for k := range b1 {
		b1[k], bd[k] = float32(r.Float64()-0.5), float32(r.Float64()-0.5)
	}
	for k := range wd {
		wd[k] = float32(r.NormFloat64() / 3)
	}
	lo, hi := float32(0), float32(6)
	actNode := &onnx.Node{OpType: "Clip", Inputs: []string{"c1", "lo", "hi"}, Outputs: []string{"a1"}}
	switch act {
	case "relu":
		actNode, hi = &onnx.Node{OpType: "Relu", Inputs: []string{"c1"}, Outputs: []string{"a1"}}, float32(math.Inf(1))
	case "clip-1":
		actNode.Inputs[1], lo = "m1", -1
	case "clip+":
		actNode.Inputs[1], lo = "p1", 0.5
	}
	outs := []onnx.ValueInfo{{Name: "y"}}
	if exposed {
		outs = append(outs, onnx.ValueInfo{Name: "a1"})
	}
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs: []onnx.ValueInfo{vinfo("x", 1, int64(c), int64(h), int64(w))},
		Initializers: []*onnx.Tensor{
			onnx.NewFloat32("w1", []int64{int64(e), int64(c), 1, 1}, w1), onnx.NewFloat32("b1", []int64{int64(e)}, b1),
			onnx.NewFloat32("wd", []int64{int64(e), 1, 3, 3}, wd), onnx.NewFloat32("bd", []int64{int64(e)}, bd),
			onnx.NewFloat32("lo", nil, []float32{0}), onnx.NewFloat32("hi", nil, []float32{6}), onnx.NewFloat32("m1", nil, []float32{-1}),
			onnx.NewFloat32("p1", nil, []float32{0.5})},
		Nodes: []*onnx.Node{
			{OpType: "Conv", Inputs: []string{"x", "w1", "b1"}, Outputs: []string{"c1"}},
			actNode,
			{OpType: "Conv", Inputs: []string{"a1", "wd", "bd"}, Outputs: []string{"c2"}, Attrs: []*onnx.Attribute{
				{Name: "group", Type: onnx.AttrInt, I: int64(e)}, {Name: "pads", Type: onnx.AttrInts, Ints: []int64{1, 1, 1, 1}}}},
			{OpType: "Clip", Inputs: []string{"c2", "lo", "hi"}, Outputs: []string{"y"}},
		},
		Outputs: outs,
	}}
	x := make([]float32, c*h*w)
	for k := range x {
		x[k] = float32(r.NormFloat64() * 2)
	}
	ref := func(x []float32) (y, mag []float64) {
		a := make([]float64, e*h*w)
		for o := range e {
			for p := range h * w {
				s := float64(b1[o])
				for i := range c {
					s += float64(x[i*h*w+p]) * float64(w1[o*c+i])
				}
				a[o*h*w+p] = math.Min(math.Max(s, float64(lo)), float64(hi))
			}
		}
		y, mag = make([]float64, e*h*w), make([]float64, e*h*w)
		for o := range e {
			for i := range h {
				for j := range w {
					s, m := float64(bd[o]), math.Abs(float64(bd[o]))
					for ki := range 3 {
						for kj := range 3 {
							if yy, xx := i+ki-1, j+kj-1; yy >= 0 && yy < h && xx >= 0 && xx < w {
								v := a[(o*h+yy)*w+xx] * float64(wd[o*9+ki*3+kj])
								s, m = s+v, m+math.Abs(v)
							}
						}
					}
					y[(o*h+i)*w+j], mag[(o*h+i)*w+j] = math.Min(math.Max(s, 0), 6), m+1
				}
			}
		}
		return y, mag
	}
	return m, onnx.NewFloat32("x", []int64{1, int64(c), int64(h), int64(w)}, x), ref
}

// TestDepthwiseInputClamp: the expansion's ReLU6 or ReLU moves into the
// depthwise unit's input clamp — no ALU max or min is left, the POOL has
// in_clamp — and the result is the graph's; a Clip whose low bound is
// above 0, which would change the padding, or an activation another output
// reads, stays on the ALU.
func TestDepthwiseInputClamp(t *testing.T) {
	for _, c := range []struct {
		name    string
		act     string
		exposed bool
		moved   bool
	}{
		{"relu6 moves", "clip", false, true},
		{"relu moves", "relu", false, true},
		{"clip(-1, 6) moves", "clip-1", false, true},
		{"clip(0.5, 6) stays", "clip+", false, false},
		{"a graph output stays", "clip", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, in, ref := expandDW(5, 40, 9, 11, c.act, c.exposed)
			p, err := alidnn.Compile(m)
			if err != nil {
				t.Fatal(err)
			}
			inClamp, minmax := false, false
			for _, i := range p.Insns {
				inClamp = inClamp || i.Op == isa.OpPool && i.DwInClamp
				minmax = minmax || i.Op == isa.OpALU && (i.Alu == isa.AluMin || i.Alu == isa.AluMax || i.Alu == isa.AluRelu)
			}
			if inClamp != c.moved || minmax == c.moved {
				t.Errorf("in_clamp %v, ALU max/min/relu %v; want the clamp moved: %v", inClamp, minmax, c.moved)
			}
			got := runProgram(t, local(t), p, in)
			x, err := in.Float32s()
			if err != nil {
				t.Fatal(err)
			}
			want, mag := ref(x)
			if len(got) != len(want) {
				t.Fatalf("%d outputs, want %d", len(got), len(want))
			}
			for k, v := range got {
				if d := math.Abs(float64(v) - want[k]); d > 1e-5*mag[k] {
					t.Fatalf("output %d = %v, want %v", k, v, want[k])
				}
			}
		})
	}
}
