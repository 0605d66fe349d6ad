package alidnn_test

import (
	"context"
	"math"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// attentionGraph is one multi-head self-attention block as BERT's exporter
// writes it, over S tokens of width 32 in 2 heads of 16: the projections,
// the heads split by Reshape and Transpose, Q·Kᵀ of Kᵀ = Transpose(K),
// scaled, Softmax, P·V and the heads merged.
func attentionGraph(S int64) *onnx.Graph {
	const dm, heads, d = 32, 2, 16
	proj := func(x, w, out string) []*onnx.Node {
		return []*onnx.Node{
			{OpType: "MatMul", Name: out, Inputs: []string{x, w}, Outputs: []string{out}},
			{OpType: "Reshape", Name: out + "4", Inputs: []string{out, "split"}, Outputs: []string{out + "4"}},
			{OpType: "Transpose", Name: out + "h", Inputs: []string{out + "4"}, Outputs: []string{out + "h"},
				Attrs: []*onnx.Attribute{{Name: "perm", Type: onnx.AttrInts, Ints: []int64{0, 2, 1, 3}}}},
		}
	}
	var nodes []*onnx.Node
	for _, p := range []string{"q", "k", "v"} {
		nodes = append(nodes, proj("x", "w"+p, p)...)
	}
	nodes = append(nodes,
		&onnx.Node{OpType: "Transpose", Name: "kt", Inputs: []string{"kh"}, Outputs: []string{"kt"},
			Attrs: []*onnx.Attribute{{Name: "perm", Type: onnx.AttrInts, Ints: []int64{0, 1, 3, 2}}}},
		&onnx.Node{OpType: "MatMul", Name: "scores", Inputs: []string{"qh", "kt"}, Outputs: []string{"scores"}},
		&onnx.Node{OpType: "Div", Name: "scaled", Inputs: []string{"scores", "sqrt_d"}, Outputs: []string{"scaled"}},
		&onnx.Node{OpType: "Softmax", Name: "probs", Inputs: []string{"scaled"}, Outputs: []string{"probs"}, Attrs: []*onnx.Attribute{attrInt("axis", -1)}},
		&onnx.Node{OpType: "MatMul", Name: "ctx", Inputs: []string{"probs", "vh"}, Outputs: []string{"ctx"}},
		&onnx.Node{OpType: "Transpose", Name: "ctx_t", Inputs: []string{"ctx"}, Outputs: []string{"ctx_t"},
			Attrs: []*onnx.Attribute{{Name: "perm", Type: onnx.AttrInts, Ints: []int64{0, 2, 1, 3}}}},
		&onnx.Node{OpType: "Reshape", Name: "y", Inputs: []string{"ctx_t", "merge"}, Outputs: []string{"y"}})
	return &onnx.Graph{
		Initializers: []*onnx.Tensor{
			wave("wq", []int64{dm, dm}, 0.3, 0.2), wave("wk", []int64{dm, dm}, 0.3, 1.7), wave("wv", []int64{dm, dm}, 0.3, 2.9),
			onnx.NewFloat32("sqrt_d", nil, []float32{4}),
			ints64("split", onnx.Int64, []int64{4}, 1, S, heads, d),
			ints64("merge", onnx.Int64, []int64{3}, 1, S, dm),
		},
		Nodes:   nodes,
		Inputs:  []onnx.ValueInfo{vinfo("x", 1, S, dm)},
		Outputs: []onnx.ValueInfo{vinfo("y", 1, S, dm)},
	}
}

// refAttention is attentionGraph's output for x in float64.
func refAttention(g *onnx.Graph, x []float32, S int) []float64 {
	const dm, heads, d = 32, 2, 16
	w := map[string][]float32{}
	for _, t := range g.Initializers {
		if f, err := t.Float32s(); err == nil {
			w[t.Name] = f
		}
	}
	// proj[p][h][s][j] is projection p's head h, token s, lane j.
	proj := func(wn string) [][][]float64 {
		out := make([][][]float64, heads)
		for h := range heads {
			out[h] = make([][]float64, S)
			for s := range S {
				out[h][s] = make([]float64, d)
				for j := range d {
					for k := range dm {
						out[h][s][j] += float64(x[s*dm+k]) * float64(w[wn][k*dm+h*d+j])
					}
				}
			}
		}
		return out
	}
	q, k, v := proj("wq"), proj("wk"), proj("wv")
	y := make([]float64, S*dm)
	for h := range heads {
		for s := range S {
			p := make([]float64, S)
			m := math.Inf(-1)
			for t := range S {
				for j := range d {
					p[t] += q[h][s][j] * k[h][t][j]
				}
				p[t] /= 4
				m = max(m, p[t])
			}
			var sum float64
			for t := range p {
				p[t] = math.Exp(p[t] - m)
				sum += p[t]
			}
			for j := range d {
				for t := range S {
					y[s*dm+h*d+j] += p[t] / sum * v[h][t][j]
				}
			}
		}
	}
	return y
}

// gemmBlocks counts the 16×16 block products of p's GEMMs (resets
// excluded) in fp32 and in int8.
func gemmBlocks(p *alidnn.Program) (fp32, int8 int) {
	for _, in := range p.Insns {
		if in.Op != isa.OpGEMM || in.Reset {
			continue
		}
		n := int(in.IterOut) * int(in.IterIn) * int(in.UopEnd-in.UopBegin)
		if in.FP32 {
			fp32 += n
		} else {
			int8 += n
		}
	}
	return fp32, int8
}

// TestAttentionInt8 quantises an attention block after training and checks
// that its two MatMuls of computed tensors, Q·Kᵀ and P·V, run on the int8
// array: the int8 block products are the projections', both of theirs
// and V's transposition (each 16×16 tile times the identity, 16 block
// products), none left to fp32 (fp32 has four times the cost). Tokens
// fill whole 16-lane blocks (K's transpose dropped for Kᵀ, V transposed
// on the array) or not (ViT's 197: Kᵀ gathered with its rows on the
// lanes, V padded).
func TestAttentionInt8(t *testing.T) {
	for _, S := range []int{32, 20} {
		g := attentionGraph(int64(S))
		m := &onnx.Model{Opsets: []onnx.Opset{{Version: 17}}, Graph: g}
		x := wave("x", []int64{1, int64(S), 32}, 1, 0.4)
		p8, err := alidnn.Quantize(context.Background(), local(t), m, [][]*onnx.Tensor{{x}})
		if err != nil {
			t.Fatalf("S=%d: %v", S, err)
		}
		tb := (S + 15) / 16
		proj := 3 * S * 2 * 2        // rows × output blocks × input blocks
		attn := 2 * (2 * S * tb * 1) // heads × rows × (Q·Kᵀ: tb×1, P·V: 1×tb)
		vt := 2 * tb * 16            // heads × V's tiles × 16
		f32, i8 := gemmBlocks(p8)
		if i8 != proj+attn+vt {
			t.Errorf("S=%d: %d int8 block products (%d fp32), want the projections' %d, attention's %d and V's transposition's %d", S, i8, f32, proj, attn, vt)
		}
	}
}

// TestAttentionInt8Numbers runs the quantised attention block against the
// float64 reference: per-tensor int8 operands of Q·Kᵀ and P·V (P at its
// calibrated maximum / 127) keep the output within 2% of its largest
// magnitude and its cosine similarity at 0.999.
func TestAttentionInt8Numbers(t *testing.T) {
	for _, S := range []int{32, 20} {
		g := attentionGraph(int64(S))
		m := &onnx.Model{Opsets: []onnx.Opset{{Version: 17}}, Graph: g}
		x := wave("x", []int64{1, int64(S), 32}, 1, 0.4)
		xf, err := x.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		dev := local(t)
		p8, err := alidnn.Quantize(context.Background(), dev, m, [][]*onnx.Tensor{{x}})
		if err != nil {
			t.Fatal(err)
		}
		got := runProgram(t, dev, p8, x)
		want := refAttention(g, xf, S)
		var dot, gg, ww, big, worst float64
		for k, w := range want {
			v := float64(got[k])
			dot, gg, ww = dot+v*w, gg+v*v, ww+w*w
			big, worst = max(big, math.Abs(w)), max(worst, math.Abs(v-w))
		}
		cos := dot / math.Sqrt(gg*ww)
		t.Logf("S=%d: cosine %.5f, worst |int8 − ref| %.3g of the largest %.3g", S, cos, worst, big)
		if cos < 0.999 || worst > 0.02*big {
			t.Errorf("S=%d: cosine %.5f (want ≥ 0.999), worst |int8 − ref| %.3g beyond 2%% of the largest %.3g", S, cos, worst, big)
		}
	}
}

// TestComputedMatMulInt8Broadcast quantises MatMuls of two tensors the
// engine holds (graph inputs, or GEMM outputs that requantise or
// dequantise for it) against float64, their stacks broadcast numpy's way:
// A's matrices repeated (gathered in fp32, then quantised), B's repeated
// (Bᵀ quantised after its fp32 gathers), and sizes that fill no 16-lane
// block. The values are positive, so that no sum cancels to below the
// quantisation's error.
func TestComputedMatMulInt8Broadcast(t *testing.T) {
	pos := func(name string, dims []int64, seed float64) (*onnx.Tensor, []float32) {
		f, _ := wave(name, dims, 0.5, seed).Float32s()
		for k := range f {
			f[k] += 0.5
		}
		return onnx.NewFloat32(name, dims, f), f
	}
	for _, tc := range []struct {
		as, bs []int64
		proj   bool // A and B are x·W of the inputs
		// fp32 are the fp32 block products: the transposes of a B whose
		// stacks repeat (16 a tile), none of the product's.
		fp32 int
	}{
		{as: []int64{2, 1, 16, 16}, bs: []int64{1, 2, 16, 16}, fp32: 2 * 16},
		{as: []int64{3, 5, 7}, bs: []int64{2, 1, 7, 16}, fp32: 2 * 16},
		{as: []int64{2, 20, 24}, bs: []int64{2, 24, 48}, proj: true},
	} {
		a, af := pos("a", tc.as, 0.5)
		b, bf := pos("b", tc.bs, 2.5)
		g := &onnx.Graph{
			Nodes:   []*onnx.Node{{Name: "mm", OpType: "MatMul", Inputs: []string{"a", "b"}, Outputs: []string{"y"}}},
			Inputs:  []onnx.ValueInfo{vinfo("a", tc.as...), vinfo("b", tc.bs...)},
			Outputs: []onnx.ValueInfo{{Name: "y"}},
		}
		if tc.proj {
			K, N := tc.bs[len(tc.bs)-2], tc.bs[len(tc.bs)-1]
			wa, waf := pos("wa", []int64{K, K}, 1.1)
			wb, wbf := pos("wb", []int64{N, N}, 3.3)
			g.Initializers = []*onnx.Tensor{wa, wb}
			g.Nodes = []*onnx.Node{
				{Name: "pa", OpType: "MatMul", Inputs: []string{"a", "wa"}, Outputs: []string{"pa"}},
				{Name: "pb", OpType: "MatMul", Inputs: []string{"b", "wb"}, Outputs: []string{"pb"}},
				{Name: "mm", OpType: "MatMul", Inputs: []string{"pa", "pb"}, Outputs: []string{"y"}},
			}
			f, _ := refMatMul(af, tc.as, waf, []int64{K, K})
			af = mapF32(f)
			f, _ = refMatMul(bf, tc.bs, wbf, []int64{N, N})
			bf = mapF32(f)
		}
		m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g}
		dev := local(t)
		p8, err := alidnn.Quantize(context.Background(), dev, m, [][]*onnx.Tensor{{a, b}})
		if err != nil {
			t.Fatalf("%v × %v: %v", tc.as, tc.bs, err)
		}
		if f32, _ := gemmBlocks(p8); f32 != tc.fp32 {
			t.Errorf("%v × %v: %d fp32 block products, want %d", tc.as, tc.bs, f32, tc.fp32)
		}
		got := runProgram(t, dev, p8, a, b)
		want, _ := refMatMul(af, tc.as, bf, tc.bs)
		var big, worst float64
		for k, w := range want {
			big, worst = max(big, math.Abs(w)), max(worst, math.Abs(float64(got[k])-w))
		}
		t.Logf("%v × %v: worst |int8 − ref| %.3g of the largest %.3g", tc.as, tc.bs, worst, big)
		if worst > 0.02*big {
			t.Errorf("%v × %v: worst |int8 − ref| %.3g beyond 2%% of the largest %.3g", tc.as, tc.bs, worst, big)
		}
	}
}

// mapF32 rounds float64 values to float32.
func mapF32(f []float64) []float32 {
	out := make([]float32, len(f))
	for k, v := range f {
		out[k] = float32(v)
	}
	return out
}
