package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestRowMaxOverBlocks takes ReduceMax over rows of 17 to 197 values (two
// to thirteen lane blocks, the last partly padding) whose maximum sits at
// each lane in turn, rows of negative values only (which the padding
// lanes' zeros would beat), and rows with infinities: exact against the
// maxima written out.
func TestRowMaxOverBlocks(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, C := range []int{17, 40, 64, 197} {
		var rows [][]float32
		for at := range C {
			row := make([]float32, C)
			for k := range row {
				row[k] = -float32((k*37+at*11)%101) - 0.5
			}
			row[at] = float32(at%3) - 1.25 // every other value is lower
			rows = append(rows, row)
		}
		neg := make([]float32, C)
		for k := range neg {
			neg[k] = -1e30
		}
		neg[C-1] = -3e29
		infs := make([]float32, C)
		for k := range infs {
			infs[k] = -inf
		}
		infs[C/2] = 7
		rows = append(rows, neg, infs)
		var xf []float32
		for _, r := range rows {
			xf = append(xf, r...)
		}
		R := int64(len(rows))
		x := onnx.NewFloat32("x", []int64{R, int64(C)}, xf)
		z := onnx.NewFloat32("z", []int64{R, int64(C)}, make([]float32, len(xf)))
		m := &onnx.Model{Opsets: []onnx.Opset{{Version: 18}}, Graph: extremeGraph("ReduceMax", []int64{R, int64(C)}, nil)}
		p, err := alidnn.Compile(m)
		if err != nil {
			t.Fatal(err)
		}
		folds := 0
		for _, in := range p.Insns {
			if in.Op == isa.OpALU && in.Alu == isa.AluMax && in.SrcOut > 0 && in.DstOut == 0 {
				folds++
			}
		}
		if folds == 0 {
			t.Errorf("C=%d: no ALU fold of the row's blocks", C)
		}
		got := runProgram(t, local(t), p, x, z)
		var want []float64
		for _, r := range rows {
			mx := math.Inf(-1)
			for _, v := range r {
				mx = math.Max(mx, float64(v))
			}
			for range C {
				want = append(want, mx)
			}
		}
		checkExact(t, got, want)
	}
}
