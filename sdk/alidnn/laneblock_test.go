package alidnn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestLaneBlock runs normalisations of hidden states [2,5,72] (five
// blocks of lanes, the last half padding; a MatMul's) read by a MatMul, which
// multiplies the padding lanes by zeros: LayerNormalization and RMSNorm
// as exporters write it (ReduceMean of x², ε, Sqrt, Div), and Softmax,
// whose sum is such a mean. Each mean is one
// block of lanes that the element-wise operators after it read for every
// block (see laneblock.go): the array multiplies one block column a
// block of rows per mean, no copy of it to every lane by a second MatMul.
// Against float64.
func TestLaneBlock(t *testing.T) {
	const S, C, D = 10, 72, 16
	const eps = 0.01
	axes, _ := onnx.NewInt("axes", onnx.Int64, []int64{1}, []int64{-1})
	rms := []*onnx.Node{
		{Name: "sq", OpType: "Mul", Inputs: []string{"h", "h"}, Outputs: []string{"x2"}},
		{Name: "ms", OpType: "ReduceMean", Inputs: []string{"x2", "axes"}, Outputs: []string{"ms"}},
		{Name: "eps", OpType: "Add", Inputs: []string{"ms", "eps"}, Outputs: []string{"mse"}},
		{Name: "rms", OpType: "Sqrt", Inputs: []string{"mse"}, Outputs: []string{"rms"}},
		{Name: "div", OpType: "Div", Inputs: []string{"h", "rms"}, Outputs: []string{"xn"}},
		{Name: "g", OpType: "Mul", Inputs: []string{"xn", "g"}, Outputs: []string{"n"}},
	}
	ln := []*onnx.Node{{Name: "ln", OpType: "LayerNormalization", Inputs: []string{"h", "g", "b"}, Outputs: []string{"n"},
		Attrs: []*onnx.Attribute{{Name: "epsilon", Type: onnx.AttrFloat, F: eps}}}}
	x := ramp("x", []int64{2, 5, 8}, 0.3)
	xf, _ := x.Float32s()
	hf, _ := ramp("wh", []int64{8, C}, 0.07).Float32s()
	gf, _ := ramp("g", []int64{C}, 0.2).Float32s()
	bf, _ := ramp("b", []int64{C}, 0.05).Float32s()
	wf, _ := ramp("w", []int64{C, D}, 0.1).Float32s()
	for _, tc := range []struct {
		name  string
		nodes []*onnx.Node
		means int // lane means or sums; −1: not counted
		norm  func(row []float64) []float64
	}{
		{"LayerNormalization", ln, 2, func(row []float64) []float64 {
			m, v := 0.0, 0.0
			for _, e := range row {
				m += e / C
			}
			for _, e := range row {
				v += (e - m) * (e - m) / C
			}
			out := make([]float64, C)
			for k, e := range row {
				out[k] = (e-m)/math.Sqrt(v+float64(float32(eps)))*float64(gf[k]) + float64(bf[k])
			}
			return out
		}},
		{"RMSNorm", rms, 1, func(row []float64) []float64 {
			ms := 0.0
			for _, e := range row {
				ms += e * e / C
			}
			out := make([]float64, C)
			for k, e := range row {
				out[k] = e / math.Sqrt(ms+float64(float32(eps))) * float64(gf[k])
			}
			return out
		}},
		// Its sum is a block too; the maximum's MatMuls are its own.
		{"Softmax", []*onnx.Node{{Name: "sm", OpType: "Softmax", Inputs: []string{"h"}, Outputs: []string{"n"}}}, -1, func(row []float64) []float64 {
			m, s := math.Inf(-1), 0.0
			for _, e := range row {
				m = max(m, e)
			}
			out := make([]float64, C)
			for k, e := range row {
				out[k] = math.Exp(e - m)
				s += out[k]
			}
			for k := range out {
				out[k] /= s
			}
			return out
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &onnx.Graph{
				Inputs: []onnx.ValueInfo{vinfo("x", 2, 5, 8)},
				Initializers: []*onnx.Tensor{axes, onnx.NewFloat32("eps", nil, []float32{eps}), ramp("wh", []int64{8, C}, 0.07),
					ramp("g", []int64{C}, 0.2), ramp("b", []int64{C}, 0.05), ramp("w", []int64{C, D}, 0.1)},
				Nodes: append(append([]*onnx.Node{{Name: "mh", OpType: "MatMul", Inputs: []string{"x", "wh"}, Outputs: []string{"h"}}}, tc.nodes...),
					&onnx.Node{Name: "mm", OpType: "MatMul", Inputs: []string{"n", "w"}, Outputs: []string{"y"}}),
				Outputs: []onnx.ValueInfo{{Name: "n"}, {Name: "y"}},
			}
			p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 18}}, Graph: g})
			if err != nil {
				t.Fatal(err)
			}
			// Besides the MatMuls', five block products a row for h and
			// five for y, the means' products: one block of weights for
			// each of h's five blocks of lanes, a mean's rows; the copy to
			// every lane would double them.
			if got, want := fp32Products(p)-2*S*5, tc.means*S*5; tc.means >= 0 && got != want {
				t.Errorf("%d fp32 block products besides the MatMul's, want %d: the means are copied to every lane", got, want)
			}
			res := runResult(t, p, x)
			var n, y []float64
			for r := range S {
				row := make([]float64, C)
				for k := range row {
					for i := range 8 {
						row[k] += float64(xf[r*8+i]) * float64(hf[i*C+k])
					}
				}
				nr := tc.norm(row)
				n = append(n, nr...)
				for j := range D {
					s := 0.0
					for k, e := range nr {
						s += float64(float32(e)) * float64(wf[k*D+j])
					}
					y = append(y, s)
				}
			}
			for k, want := range [][]float64{n, y} {
				got, err := res.Outputs[k].Float32s()
				if err != nil {
					t.Fatal(err)
				}
				checkCloseAbs(t, got, want)
			}
		})
	}
}

// fp32Products counts the fp32 GEMM instructions' products of a row by a
// block of weights.
func fp32Products(p *alidnn.Program) int {
	n := 0
	for _, in := range p.Insns {
		if in.Op == isa.OpGEMM && in.FP32 && !in.Reset {
			n += int(in.IterOut * in.IterIn * (in.UopEnd - in.UopBegin))
		}
	}
	return n
}

// TestLaneSpreadOps runs each element-wise operator of hidden states p
// [1,6,40] and a computed m [1,6,1] broadcast along p's lanes, which reads
// one block of m's spread for each of p's three (see spreadLanes), on
// either side where the operator commutes, against the same fp32
// arithmetic on p and m read back: exact.
func TestLaneSpreadOps(t *testing.T) {
	ops := map[string]func(a, b float32) float32{
		"Add": func(a, b float32) float32 { return a + b }, "Sub": func(a, b float32) float32 { return a - b },
		"Mul": func(a, b float32) float32 { return a * b }, "Div": func(a, b float32) float32 { return a / b },
		"Max":     func(a, b float32) float32 { return max(a, b) },
		"Min":     func(a, b float32) float32 { return min(a, b) },
		"Greater": func(a, b float32) float32 { return b2f(a > b) }, "Less": func(a, b float32) float32 { return b2f(a < b) },
		"Equal": func(a, b float32) float32 { return b2f(a == b) },
	}
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", 1, 6, 8)},
		Initializers: []*onnx.Tensor{ramp("w", []int64{8, 40}, 0.07), ramp("wm", []int64{8, 1}, 0.11)},
		Nodes: []*onnx.Node{
			{Name: "mm", OpType: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"p"}},
			{Name: "mmm", OpType: "MatMul", Inputs: []string{"x", "wm"}, Outputs: []string{"m"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "p"}, {Name: "m"}},
	}
	type out struct {
		op      string
		swapped bool
	}
	var outs []out
	for op := range ops {
		for _, swapped := range []bool{false, true} {
			if swapped && op != "Add" && op != "Mul" && op != "Max" && op != "Min" {
				continue
			}
			in := []string{"p", "m"}
			if swapped {
				in = []string{"m", "p"}
			}
			name := fmt.Sprintf("%s%v", op, swapped)
			g.Nodes = append(g.Nodes, &onnx.Node{Name: name, OpType: op, Inputs: in, Outputs: []string{name}})
			if op == "Greater" || op == "Less" || op == "Equal" {
				// A comparison's BOOL becomes FLOAT for the output.
				g.Nodes = append(g.Nodes, &onnx.Node{Name: name + "/f", OpType: "Cast", Inputs: []string{name}, Outputs: []string{name + "/f"},
					Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}}})
				name += "/f"
			}
			g.Outputs = append(g.Outputs, onnx.ValueInfo{Name: name})
			outs = append(outs, out{op, swapped})
		}
	}
	// And a Div in the epilogue of a MatMul (p's again) that only it reads.
	g.Nodes = append(g.Nodes, &onnx.Node{Name: "mmq", OpType: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"q"}},
		&onnx.Node{Name: "divq", OpType: "Div", Inputs: []string{"q", "m"}, Outputs: []string{"dq"}})
	g.Outputs = append(g.Outputs, onnx.ValueInfo{Name: "dq"})
	outs = append(outs, out{"Div", false})
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 18}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	res := runResult(t, p, ramp("x", []int64{1, 6, 8}, 0.3))
	pf, _ := res.Outputs[0].Float32s()
	mf, _ := res.Outputs[1].Float32s()
	for k, o := range outs {
		got, err := res.Outputs[2+k].Float32s()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			a, b := pf[i], mf[i/40]
			if o.swapped {
				a, b = b, a
			}
			if want := ops[o.op](a, b); math.Float32bits(v) != math.Float32bits(want) {
				t.Errorf("%s (swapped %v) value %d: %g, want %g", o.op, o.swapped, i, v, want)
				break
			}
		}
	}
}

func b2f(b bool) float32 {
	if b {
		return 1
	}
	return 0
}

// TestLaneSpreadPadding reads by a MatMul, which multiplies the padding
// lanes of its input by zeros, quotients and differences of hidden states
// h [3,7,72] (the last block of lanes half padding) and a row mean m
// [3,7,1] read other than element-wise (Reciprocal), so reduced to one
// lane and spread again: the padding lanes must stay finite. Spread to
// all 72 lanes, 1/m was 0 on the padding lanes, h's 0 over it NaN, and so
// every product; the one block of lanes it is spread to has no padding.
// Against float64 of the MatMul's input read back.
func TestLaneSpreadPadding(t *testing.T) {
	axes, _ := onnx.NewInt("axes", onnx.Int64, []int64{1}, []int64{-1})
	for _, tc := range []struct {
		name  string
		nodes []*onnx.Node
	}{
		{"h/(1/m)", []*onnx.Node{{Name: "div", OpType: "Div", Inputs: []string{"h", "r"}, Outputs: []string{"n"}}}},
		{"h−m", []*onnx.Node{{Name: "sub", OpType: "Sub", Inputs: []string{"h", "m"}, Outputs: []string{"n"}}}},
		{"h/(1/m)−m", []*onnx.Node{{Name: "div", OpType: "Div", Inputs: []string{"h", "r"}, Outputs: []string{"q"}},
			{Name: "sub", OpType: "Sub", Inputs: []string{"q", "m"}, Outputs: []string{"n"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &onnx.Graph{
				Inputs:       []onnx.ValueInfo{vinfo("x", 3, 7, 8)},
				Initializers: []*onnx.Tensor{axes, ramp("wh", []int64{8, 72}, 0.07), ramp("w", []int64{72, 16}, 0.1)},
				Nodes: append([]*onnx.Node{
					{Name: "mh", OpType: "MatMul", Inputs: []string{"x", "wh"}, Outputs: []string{"h"}},
					{Name: "mean", OpType: "ReduceMean", Inputs: []string{"h", "axes"}, Outputs: []string{"m"}},
					{Name: "rec", OpType: "Reciprocal", Inputs: []string{"m"}, Outputs: []string{"r"}},
				}, append(tc.nodes, &onnx.Node{Name: "my", OpType: "MatMul", Inputs: []string{"n", "w"}, Outputs: []string{"y"}})...),
				Outputs: []onnx.ValueInfo{{Name: "n"}, {Name: "y"}},
			}
			p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 18}}, Graph: g})
			if err != nil {
				t.Fatal(err)
			}
			res := runResult(t, p, ramp("x", []int64{3, 7, 8}, 0.3))
			nf, _ := res.Outputs[0].Float32s()
			wf, _ := ramp("w", []int64{72, 16}, 0.1).Float32s()
			var want []float64
			for r := range 21 {
				for j := range 16 {
					s := 0.0
					for k := range 72 {
						s += float64(nf[r*72+k]) * float64(wf[k*16+j])
					}
					want = append(want, s)
				}
			}
			got, err := res.Outputs[1].Float32s()
			if err != nil {
				t.Fatal(err)
			}
			checkCloseAbs(t, got, want)
		})
	}
}
