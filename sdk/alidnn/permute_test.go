package alidnn_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// headsGraph projects x [1,S,E] by a MatMul, reshapes the projection to
// split and transposes it by perm (node "t") into a Relu.
func headsGraph(t *testing.T, s, e int64, split []int64, perm ...int64) *onnx.Graph {
	t.Helper()
	shp, err := onnx.NewInt("split", onnx.Int64, []int64{int64(len(split))}, split)
	if err != nil {
		t.Fatal(err)
	}
	return &onnx.Graph{
		Nodes: []*onnx.Node{
			{Name: "mm", OpType: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"p"}},
			{Name: "heads", OpType: "Reshape", Inputs: []string{"p", "split"}, Outputs: []string{"h"}},
			{Name: "t", OpType: "Transpose", Inputs: []string{"h"}, Outputs: []string{"ht"}, Attrs: []*onnx.Attribute{{Name: "perm", Type: onnx.AttrInts, Ints: perm}}},
			{Name: "r", OpType: "Relu", Inputs: []string{"ht"}, Outputs: []string{"y"}},
		},
		Initializers: []*onnx.Tensor{ramp("w", []int64{e, e}, 0.1), shp},
		Inputs:       []onnx.ValueInfo{vinfo("x", 1, s, e)},
		Outputs:      []onnx.ValueInfo{{Name: "y"}},
	}
}

// TestPermuteRefused: Transposes of computed tensors that would move
// values between the lanes of a 16-lane block are refused naming the node,
// not compiled to wrong numbers: groups of 8 values split off the lanes
// and their values moved to the leading axis, which no layout puts on the
// lanes.
func TestPermuteRefused(t *testing.T) {
	g := headsGraph(t, 5, 16, []int64{1, 5, 2, 8}, 3, 0, 1, 2)
	_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
	if !errors.Is(err, alidnn.ErrUnsupported) {
		t.Fatalf("Compile: %v, want ErrUnsupported", err)
	}
	for _, w := range []string{`Transpose "t"`, "lanes"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %s", err, w)
		}
	}
}

// TestPermuteGroups: heads of 8 values (two to a block) split off the
// lanes keep their values once regrouped in blocks of their own (see
// reblock.go), as [N,H,S,D], as keys [N,H,D,S] and as [N,D,S,H] (D on
// the lanes of a channel layout), against the same
// projection, transpose and Relu on the host.
func TestPermuteGroups(t *testing.T) {
	const S, E, H, D = 5, 16, 2, 8
	for _, perm := range [][]int64{{0, 2, 1, 3}, {0, 2, 3, 1}, {0, 3, 1, 2}} {
		g := headsGraph(t, S, E, []int64{1, S, H, D}, perm...)
		x := ramp("x", []int64{1, S, E}, 0.25)
		xv, _ := x.Float32s()
		wv, _ := g.Initializers[0].Float32s()
		p := make([]float64, S*E)
		for s := range S {
			for j := range E {
				for i := range E {
					p[s*E+j] += float64(xv[s*E+i]) * float64(wv[i*E+j])
				}
			}
		}
		got := runGraph(t, g, x)
		dims := []int{1, S, H, D}
		out := make([]int, 4)
		for k, a := range perm {
			out[k] = dims[a]
		}
		for k := range got {
			// k's index in the output, then in [1,S,H,D].
			idx, r := make([]int, 4), k
			for a := 3; a >= 0; a-- {
				idx[a], r = r%out[a], r/out[a]
			}
			src := make([]int, 4)
			for a, pa := range perm {
				src[pa] = idx[a]
			}
			want := max(p[(src[1]*H+src[2])*D+src[3]], 0)
			if math.Abs(float64(got[k])-want) > 1e-5+1e-5*math.Abs(want) {
				t.Fatalf("perm %v: y%v = %v, want %v", perm, idx, got[k], want)
			}
		}
	}
}

// TestPermuteViewTwice: a Transpose of a computed tensor that is both a
// graph output (unpacked transposed on the host) and read by a Relu
// (permuted on the engine) gives both readers the transposed values; at
// [8,40,100] the permute takes two accumulator tiles (2400 elements).
func TestPermuteViewTwice(t *testing.T) {
	for _, dims := range [][]int64{{2, 20, 3}, {8, 40, 100}} {
		N, C, L := int(dims[0]), int(dims[1]), int(dims[2])
		// Every value distinct, so any misplaced one shows.
		f := make([]float32, N*C*L)
		for k := range f {
			f[k] = float32(k) - float32(len(f))/2
		}
		x := onnx.NewFloat32("x", dims, f)
		g := &onnx.Graph{
			Nodes: []*onnx.Node{
				{Name: "n", OpType: "Neg", Inputs: []string{"x"}, Outputs: []string{"a"}},
				{Name: "t", OpType: "Transpose", Inputs: []string{"a"}, Outputs: []string{"at"}, Attrs: []*onnx.Attribute{{Name: "perm", Type: onnx.AttrInts, Ints: []int64{2, 0, 1}}}},
				{Name: "r", OpType: "Relu", Inputs: []string{"at"}, Outputs: []string{"y"}},
			},
			Inputs:  []onnx.ValueInfo{vinfo("x", dims...)},
			Outputs: []onnx.ValueInfo{{Name: "y"}, {Name: "at"}},
		}
		p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
		if err != nil {
			t.Fatal(err)
		}
		outs := runAll(t, p, x)
		for i := range L {
			for n := range N {
				for c := range C {
					v := -f[(n*C+c)*L+i]
					k := (i*N+n)*C + c
					if outs[1][k] != v || outs[0][k] != max(v, 0) {
						t.Fatalf("%v: at[%d,%d,%d] = %v and its Relu %v, want %v", dims, i, n, c, outs[1][k], outs[0][k], v)
					}
				}
			}
		}
	}
}
