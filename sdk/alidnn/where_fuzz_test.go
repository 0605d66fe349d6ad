package alidnn_test

import (
	"math/rand"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// FuzzComputedOperands compiles Where, Split, Gather and comparisons with a computed
// operand of random shape, and constants, attributes and integer inputs
// in and out of range: the compiler maps them or refuses, never panics.
// Each seed drives 40 graphs.
func FuzzComputedOperands(f *testing.F) {
	for seed := range int64(6) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed int64) {
		rng := rand.New(rand.NewSource(seed))
		dims := func(n int) []int64 {
			d := make([]int64, n)
			for k := range d {
				d[k] = int64(1 + rng.Intn(20))
			}
			return d
		}
		for range 40 {
			xd := dims(1 + rng.Intn(3))
			x := vinfo("x", xd...)
			ins := []onnx.ValueInfo{x}
			cd := dims(rng.Intn(3))
			nv := 1
			for _, d := range cd {
				nv *= int(d)
			}
			bits := make([]int64, nv)
			for k := range bits {
				bits[k] = int64(rng.Intn(2))
			}
			cond, _ := onnx.NewInt("cond", onnx.Bool, cd, bits)
			sizes, _ := onnx.NewInt("sizes", onnx.Int64, []int64{2}, []int64{int64(rng.Intn(12)), int64(rng.Intn(12))})
			first, _ := onnx.NewInt("first", onnx.Int64, nil, []int64{int64(rng.Intn(9) - 4)})
			table := ramp("table", []int64{int64(1 + rng.Intn(5)), 3}, 0.5)
			ids := onnx.ValueInfo{Name: "ids", ElemType: []onnx.DataType{onnx.Int64, onnx.Int32, onnx.Bool, onnx.Float}[rng.Intn(4)], Dims: x.Dims}
			var n *onnx.Node
			switch rng.Intn(4) {
			case 3:
				ops := []string{"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}
				n = &onnx.Node{OpType: ops[rng.Intn(len(ops))], Inputs: []string{"ids", "k"}, Outputs: []string{"y"}}
				if rng.Intn(2) == 0 {
					n.Inputs[0], n.Inputs[1] = "k", "ids"
				}
				ins = append(ins, ids)
			case 0:
				n = &onnx.Node{OpType: "Where", Inputs: []string{"cond", "x", "k"}, Outputs: []string{"y"}}
				if rng.Intn(2) == 0 {
					n.Inputs[1], n.Inputs[2] = "k", "x"
				}
			case 1:
				n = &onnx.Node{OpType: "Split", Inputs: []string{"x", "sizes"}, Outputs: []string{"y", "y2"},
					Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: int64(rng.Intn(5) - 2)}}}
			default:
				n = &onnx.Node{OpType: "Gather", Inputs: []string{"table", "ids"}, Outputs: []string{"y"},
					Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: int64(rng.Intn(5) - 2)}}}
				ins = append(ins, ids)
				if rng.Intn(2) == 0 { // a computed tensor by constant indices
					n.Inputs = []string{"x", []string{"sizes", "first"}[rng.Intn(2)]}
					ins = ins[:1]
				}
			}
			g := &onnx.Graph{Nodes: []*onnx.Node{n}, Inputs: ins, Outputs: []onnx.ValueInfo{{Name: "y", ElemType: onnx.Float}},
				Initializers: []*onnx.Tensor{cond, sizes, table, first, onnx.NewFloat32("k", nil, []float32{[]float32{-3, 2.5, 1e30}[rng.Intn(3)]})}}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%s (seed %d): %v", n.OpType, seed, r)
					}
				}()
				alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
			}()
		}
	})
}
