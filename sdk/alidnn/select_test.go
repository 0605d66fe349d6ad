package alidnn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestSplitGatherLeadingAxis unbinds a fused qkv projection as timm's
// attention does — MatMul, Reshape to [N, S, 3, heads, 16], Transpose
// (2, 0, 3, 1, 4), Split along axis 0 and Squeeze — and gathers along the
// same axis (a scalar index and a list), exactly, against the engine's
// own projection; the squeezed query is read on by a Mul.
func TestSplitGatherLeadingAxis(t *testing.T) {
	const N, S, K, heads, D = 2, 5, 20, 2, 16
	const H = heads * D
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{ramp("w", []int64{K, 3 * H}, 0.125), ints64("to", onnx.Int64, []int64{5}, N, S, 3, heads, D),
			ints64("thirds", onnx.Int64, []int64{3}, 1, 1, 1), ints64("axis0", onnx.Int64, []int64{1}, 0),
			ints64("one", onnx.Int64, nil, 1), ints64("two_zero", onnx.Int64, []int64{2}, 2, 0), onnx.NewFloat32("half", nil, []float32{0.5})},
		Nodes: []*onnx.Node{
			{OpType: "MatMul", Name: "qkv", Inputs: []string{"x", "w"}, Outputs: []string{"qkv"}},
			{OpType: "Reshape", Name: "qkv5", Inputs: []string{"qkv", "to"}, Outputs: []string{"qkv5"}},
			{OpType: "Transpose", Name: "qkv_p", Inputs: []string{"qkv5"}, Outputs: []string{"qkv_p"},
				Attrs: []*onnx.Attribute{{Name: "perm", Type: onnx.AttrInts, Ints: []int64{2, 0, 3, 1, 4}}}},
			{OpType: "Split", Name: "unbind", Inputs: []string{"qkv_p", "thirds"}, Outputs: []string{"q1", "k1", "v1"}, Attrs: []*onnx.Attribute{attrInt("axis", 0)}},
			{OpType: "Squeeze", Name: "q", Inputs: []string{"q1", "axis0"}, Outputs: []string{"q"}},
			{OpType: "Squeeze", Name: "v", Inputs: []string{"v1", "axis0"}, Outputs: []string{"v"}},
			{OpType: "Mul", Name: "qs", Inputs: []string{"q", "half"}, Outputs: []string{"qs"}},
			{OpType: "Gather", Name: "k", Inputs: []string{"qkv_p", "one"}, Outputs: []string{"k"}, Attrs: []*onnx.Attribute{attrInt("axis", 0)}},
			{OpType: "Gather", Name: "vq", Inputs: []string{"qkv_p", "two_zero"}, Outputs: []string{"vq"}, Attrs: []*onnx.Attribute{attrInt("axis", 0)}},
		},
		Inputs: []onnx.ValueInfo{vinfo("x", N, S, K)},
		Outputs: []onnx.ValueInfo{vinfo("qs", N, heads, S, D), vinfo("k", N, heads, S, D), vinfo("v", N, heads, S, D),
			vinfo("vq", 2, N, heads, S, D), vinfo("qkv", N, S, 3*H), vinfo("k1", 1, N, heads, S, D)},
	}
	res := runGraphResult(t, g, ramp("x", []int64{N, S, K}, 0.5))
	out := make([][]float32, len(res.Outputs))
	for k, o := range res.Outputs {
		out[k], _ = o.Float32s()
	}
	qs, kk, v, vq, qkv, k1 := out[0], out[1], out[2], out[3], out[4], out[5]
	// at is element [b, h, i, d] of part j of the projection.
	at := func(j, b, h, i, d int) float32 { return qkv[(b*S+i)*3*H+j*H+h*D+d] }
	const part = N * heads * S * D
	for b := range N {
		for h := range heads {
			for i := range S {
				for d := range D {
					e := ((b*heads+h)*S+i)*D + d
					for _, c := range []struct {
						name      string
						got, want float32
					}{
						{"qs", qs[e], at(0, b, h, i, d) * 0.5},
						{"k", kk[e], at(1, b, h, i, d)}, {"k1", k1[e], at(1, b, h, i, d)}, {"v", v[e], at(2, b, h, i, d)},
						{"vq[0]", vq[e], at(2, b, h, i, d)}, {"vq[1]", vq[part+e], at(0, b, h, i, d)},
					} {
						if c.got != c.want {
							t.Fatalf("%s[%d][%d][%d][%d] = %v, want %v", c.name, b, h, i, d, c.got, c.want)
						}
					}
				}
			}
		}
	}
}

// A Split along the channels of an NCHW tensor, which its layout holds
// on the lanes, runs where the parts keep their lanes (16 + 4 of 20
// channels) and is refused naming the node where they would move
// (8 + 12).
func TestSplitLanesRefused(t *testing.T) {
	split := func(a, b int64) *onnx.Graph {
		return &onnx.Graph{
			Initializers: []*onnx.Tensor{ints64("sizes", onnx.Int64, []int64{2}, a, b)},
			Nodes: []*onnx.Node{
				{OpType: "Relu", Name: "r", Inputs: []string{"x"}, Outputs: []string{"r"}},
				{OpType: "Split", Name: "channels", Inputs: []string{"r", "sizes"}, Outputs: []string{"a", "b"}, Attrs: []*onnx.Attribute{attrInt("axis", 1)}},
			},
			Inputs:  []onnx.ValueInfo{vinfo("x", 1, 20, 3, 4)},
			Outputs: []onnx.ValueInfo{vinfo("a", 1, a, 3, 4), vinfo("b", 1, b, 3, 4)},
		}
	}
	x := ramp("x", []int64{1, 20, 3, 4}, 0.5)
	got := runGraph(t, split(16, 4), x)
	xv, _ := x.Float32s()
	for k, v := range got {
		if want := max(0, xv[k]); v != want {
			t.Fatalf("a[%d] = %v, want %v", k, v, want)
		}
	}
	_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: split(8, 12)})
	if !errors.Is(err, alidnn.ErrUnsupported) {
		t.Fatalf("8 + 12 channels: %v, want ErrUnsupported", err)
	}
	t.Log(err)
}

// TestSplitTransposed splits along its first axis a Transpose of hidden
// states ([N,S,H] → [S,N,H], a view the compiler runs when the Split
// reads it), exactly.
func TestSplitTransposed(t *testing.T) {
	const N, S, K, H = 2, 5, 20, 32
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{ramp("w", []int64{K, H}, 0.125), ints64("sizes", onnx.Int64, []int64{2}, 2, 3)},
		Nodes: []*onnx.Node{
			{OpType: "MatMul", Name: "h", Inputs: []string{"x", "w"}, Outputs: []string{"h"}},
			{OpType: "Transpose", Name: "ht", Inputs: []string{"h"}, Outputs: []string{"ht"},
				Attrs: []*onnx.Attribute{{Name: "perm", Type: onnx.AttrInts, Ints: []int64{1, 0, 2}}}},
			{OpType: "Split", Name: "parts", Inputs: []string{"ht", "sizes"}, Outputs: []string{"a", "b"}, Attrs: []*onnx.Attribute{attrInt("axis", 0)}},
		},
		Inputs:  []onnx.ValueInfo{vinfo("x", N, S, K)},
		Outputs: []onnx.ValueInfo{vinfo("b", 3, N, H), vinfo("h", N, S, H)},
	}
	res := runGraphResult(t, g, ramp("x", []int64{N, S, K}, 0.5))
	b, _ := res.Outputs[0].Float32s()
	h, _ := res.Outputs[1].Float32s()
	for i := range 3 {
		for n := range N {
			for j := range H {
				if got, want := b[(i*N+n)*H+j], h[(n*S+2+i)*H+j]; got != want {
					t.Fatalf("b[%d][%d][%d] = %v, want %v", i, n, j, got, want)
				}
			}
		}
	}
}

// TestSliceRowsOfImage: Slice of a computed [1,20,6,2] with a step along
// its rows (opset 13 inputs) picks them exactly; one along the lanes (its
// 20 channels) is refused naming the node.
func TestSliceRowsOfImage(t *testing.T) {
	slice := func(starts, ends, axes, steps []int64) *onnx.Graph {
		n := []int64{int64(len(starts))}
		return &onnx.Graph{
			Initializers: []*onnx.Tensor{ints64("starts", onnx.Int64, n, starts...), ints64("ends", onnx.Int64, n, ends...),
				ints64("axes", onnx.Int64, n, axes...), ints64("steps", onnx.Int64, n, steps...)},
			Nodes: []*onnx.Node{
				{OpType: "Neg", Name: "neg", Inputs: []string{"x"}, Outputs: []string{"a"}},
				{OpType: "Slice", Name: "cut", Inputs: []string{"a", "starts", "ends", "axes", "steps"}, Outputs: []string{"y"}},
			},
			Inputs:  []onnx.ValueInfo{vinfo("x", 1, 20, 6, 2)},
			Outputs: []onnx.ValueInfo{{Name: "y"}},
		}
	}
	x := ramp("x", []int64{1, 20, 6, 2}, 0.5)
	xv, _ := x.Float32s()
	got := runGraph(t, slice([]int64{1}, []int64{6}, []int64{2}, []int64{2}), x)
	if len(got) != 20*3*2 {
		t.Fatalf("%d values, want rows 1, 3, 5 of 20 channels", len(got))
	}
	for k, v := range got {
		c, h, w := k/6, k/2%3, k%2
		if want := -xv[(c*6+1+2*h)*2+w]; v != want {
			t.Fatalf("y[0,%d,%d,%d] = %v, want %v", c, h, w, v, want)
		}
	}
	// Along the channels, which the lanes hold, a slice would move values.
	_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: slice([]int64{0}, []int64{10}, []int64{1}, []int64{1})})
	if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), `Slice "cut"`) {
		t.Errorf("Compile: %v, want ErrUnsupported naming Slice \"cut\"", err)
	}
}
