package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestMatMulVectors runs MatMuls with a rank-1 operand (a graph input or a
// constant B) against float64 sums: stacks of matrices by a vector, a
// vector by a matrix, and a dot product, whose output is a scalar.
func TestMatMulVectors(t *testing.T) {
	for _, tc := range []struct {
		name           string
		aDims, bDims   []int64
		outLen, inner  int
		aStep, bStride int // A's element k of output o is a[o/bCols*aStep+k]
	}{
		{"stack by vector", []int64{2, 3, 20}, []int64{20}, 6, 20, 20, 1},
		{"vector by matrix", []int64{20}, []int64{20, 7}, 7, 20, 0, 7},
		{"dot product", []int64{20}, []int64{20}, 1, 20, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := ramp("b", tc.bDims, 0.1)
			g := &onnx.Graph{
				Inputs:       []onnx.ValueInfo{vinfo("a", tc.aDims...)},
				Initializers: []*onnx.Tensor{b},
				Nodes:        []*onnx.Node{{Name: "mm", OpType: "MatMul", Inputs: []string{"a", "b"}, Outputs: []string{"y"}}},
				Outputs:      []onnx.ValueInfo{{Name: "y"}},
			}
			a := ramp("a", tc.aDims, 0.3)
			got := runGraph(t, g, a)
			af, _ := a.Float32s()
			bf, _ := b.Float32s()
			if len(got) != tc.outLen {
				t.Fatalf("%d values, want %d", len(got), tc.outLen)
			}
			cols := 1
			if len(tc.bDims) == 2 {
				cols = int(tc.bDims[1])
			}
			for o := range tc.outLen {
				want := 0.0
				for k := range tc.inner {
					want += float64(af[o/cols*tc.aStep+k]) * float64(bf[k*tc.bStride+o%cols])
				}
				if math.Abs(float64(got[o])-want) > 1e-5+1e-4*math.Abs(want) {
					t.Fatalf("value %d: %g, want %g", o, got[o], want)
				}
			}
		})
	}
}

// TestMatMulVectorByStacks multiplies a vector [20] by a constant stack
// [3,20,4] (onnx's test_matmul_1d_3d in size): out [3,4], against float64.
func TestMatMulVectorByStacks(t *testing.T) {
	b := ramp("b", []int64{3, 20, 4}, 0.1)
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("a", 20)},
		Initializers: []*onnx.Tensor{b},
		Nodes:        []*onnx.Node{{Name: "mm", OpType: "MatMul", Inputs: []string{"a", "b"}, Outputs: []string{"y"}}},
		Outputs:      []onnx.ValueInfo{{Name: "y"}},
	}
	a := ramp("a", []int64{20}, 0.3)
	res := runGraphResult(t, g, a)
	if d := res.Outputs[0].Dims; len(d) != 2 || d[0] != 3 || d[1] != 4 {
		t.Errorf("dims %v, want [3 4]", d)
	}
	got, err := res.Outputs[0].Float32s()
	if err != nil {
		t.Fatal(err)
	}
	af, _ := a.Float32s()
	bf, _ := b.Float32s()
	var want []float64
	for s := range 3 {
		for j := range 4 {
			v := 0.0
			for k := range 20 {
				v += float64(af[k]) * float64(bf[(s*20+k)*4+j])
			}
			want = append(want, v)
		}
	}
	checkClose(t, got, want)
}
