package alidnn_test

import (
	"errors"
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
// not compiled to wrong numbers: heads of 8 values (two to a block), split
// into [N,H,S,D] or keys [N,H,D,S].
func TestPermuteRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s, e  int64
		split []int64
		perm  []int64
	}{
		{"heads of 8", 5, 16, []int64{1, 5, 2, 8}, []int64{0, 2, 1, 3}},
		{"keys of 8 values", 5, 16, []int64{1, 5, 2, 8}, []int64{0, 2, 3, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := headsGraph(t, tc.s, tc.e, tc.split, tc.perm...)
			_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
			if !errors.Is(err, alidnn.ErrUnsupported) {
				t.Fatalf("Compile: %v, want ErrUnsupported", err)
			}
			for _, w := range []string{`Transpose "t"`, "lanes"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %s", err, w)
				}
			}
		})
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
