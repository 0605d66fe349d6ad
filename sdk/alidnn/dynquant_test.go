package alidnn_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// dynLinearGraph is nn.Linear as onnxruntime's quantize_dynamic writes it,
// twice on one DynamicQuantizeLinear of x [2,5,20] (as it shares one among
// the query, key and value projections): MatMulInteger by int8 weights
// [20,24] with zero point wz, Cast to FLOAT, Mul by the product of the
// scales, Add of the bias.
func dynLinearGraph(wq []int64, sw float32, wz int64, bias []float32) *onnx.Graph {
	cast := []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}}
	w, z := ints64("w_quantized", onnx.Int8, []int64{20, 24}, wq...), ints64("w_zero_point", onnx.Int8, nil, wz)
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", 2, 5, 20)},
		Initializers: []*onnx.Tensor{w, z, onnx.NewFloat32("w_scale", nil, []float32{sw}), onnx.NewFloat32("b", []int64{24}, bias)},
		Nodes: []*onnx.Node{
			{OpType: "DynamicQuantizeLinear", Inputs: []string{"x"}, Outputs: []string{"x_quantized", "x_scale", "x_zero_point"}},
		},
	}
	for _, p := range []string{"y", "y2"} {
		g.Nodes = append(g.Nodes,
			&onnx.Node{OpType: "MatMulInteger", Inputs: []string{"x_quantized", "w_quantized", "x_zero_point", "w_zero_point"}, Outputs: []string{p + "_int"}},
			&onnx.Node{OpType: "Cast", Inputs: []string{p + "_int"}, Outputs: []string{p + "_cast"}, Attrs: cast},
			&onnx.Node{OpType: "Mul", Inputs: []string{"x_scale", "w_scale"}, Outputs: []string{p + "_scales"}},
			&onnx.Node{OpType: "Mul", Inputs: []string{p + "_cast", p + "_scales"}, Outputs: []string{p + "_mm"}},
			&onnx.Node{OpType: "Add", Inputs: []string{p + "_mm", "b"}, Outputs: []string{p}})
		g.Outputs = append(g.Outputs, onnx.ValueInfo{Name: p})
	}
	return g
}

// dynLinear64 is the reference of the ONNX semantics of dynLinearGraph:
// DynamicQuantizeLinear's uint8 scale, zero point and quantisation in
// float32 as ONNX's reference implementation computes them (0 in the
// range, rounding half to even); the exact integer product; the scales'
// product in float32, as the graph's Mul computes it; the rest in float64.
func dynLinear64(x []float32, wq []int64, sw float32, wz int64, bias []float32, k, n int) []float64 {
	var lo, hi float32
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	s := (hi - lo) / 255
	z := math.Min(math.Max(math.RoundToEven(float64(-lo/s)), 0), 255)
	sc := float64(s * sw)
	y := make([]float64, len(x)/k*n)
	for r := range len(x) / k {
		for j := range n {
			var acc int64
			for i := range k {
				q := math.Min(math.Max(math.RoundToEven(float64(x[r*k+i]/s))+z, 0), 255)
				acc += (int64(q) - int64(z)) * (wq[i*n+j] - wz)
			}
			y[r*n+j] = float64(acc)*sc + float64(bias[j])
		}
	}
	return y
}

// TestDynamicQuantizeLinear runs dynLinearGraph calibrated on its own input
// (so the engine's scale is the one onnxruntime computes at run time)
// against dynLinear64, within 1e-5 of the largest output: far below the
// difference one step of x's quantisation makes, which the test checks the
// data shows (the unquantised product, x by the dequantised weights,
// misses by more).
func TestDynamicQuantizeLinear(t *testing.T) {
	const k, n = 20, 24
	xt := ramp("x", []int64{2, 5, k}, 0.37)
	x, _ := xt.Float32s()
	for i := range x {
		x[i] += float32(math.Sin(float64(i))) // no ties, a range not symmetric about 0
	}
	xt = onnx.NewFloat32("x", []int64{2, 5, k}, x)
	wq, bias := make([]int64, k*n), make([]float32, n)
	for i := range wq {
		wq[i] = int64(math.Round(120 * math.Sin(float64(i)*1.3)))
	}
	for j := range bias {
		bias[j] = float32(j%5) - 2
	}
	const sw = 0.01
	for _, wz := range []int64{0, 3} {
		g := dynLinearGraph(wq, sw, wz, bias)
		m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g}
		p, err := alidnn.Calibrate(context.Background(), local(t), m, [][]*onnx.Tensor{{xt}})
		if err != nil {
			t.Fatal(err)
		}
		res := runResult(t, p, xt)
		want := dynLinear64(x, wq, sw, wz, bias, k, n)
		var top, unq float64
		for j, v := range want {
			top = math.Max(top, math.Abs(v))
			var f float64
			for i := range k {
				f += float64(x[j/n*k+i]) * float64(wq[i*n+j%n]-wz) * sw
			}
			unq = math.Max(unq, math.Abs(f+float64(bias[j%n])-v))
		}
		tol := 1e-5 * top
		if unq <= 10*tol {
			t.Fatalf("wz %d: the unquantised product is within %g of the reference: the test cannot tell quantisation", wz, unq)
		}
		for o, out := range res.Outputs {
			got, _ := out.Float32s()
			for j, v := range want {
				if d := math.Abs(float64(got[j]) - v); d > tol {
					t.Fatalf("wz %d output %d value %d: %g, want %g (tolerance %g)", wz, o, j, got[j], v, tol)
				}
			}
		}
	}
}

// TestDynamicQuantizeLinearNeedsCalibration: compiled without calibration
// inputs, DynamicQuantizeLinear is refused with its reason.
func TestDynamicQuantizeLinearNeedsCalibration(t *testing.T) {
	g := dynLinearGraph(make([]int64, 20*24), 1, 0, make([]float32, 24))
	_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
	if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), "DynamicQuantizeLinear") || !strings.Contains(err.Error(), "calibration") {
		t.Fatalf("compile: %v, want DynamicQuantizeLinear refused for want of calibration", err)
	}
}

// TestDynamicQuantizeLinearAfterQuantizedLayer: Quantize of a model whose
// DynamicQuantizeLinear reads a MatMul it quantises after training (whose
// int32 accumulator dequantises first) against dynLinear64 of the fp32
// MatMul's output: every output within 2% of the largest (it is off by
// 1.2%: the int8 MatMul's rounding, rounded again by the dynamic
// quantisation's steps; without the dequantisation it is refused).
func TestDynamicQuantizeLinearAfterQuantizedLayer(t *testing.T) {
	const k, n = 20, 24
	wq, bias := make([]int64, k*n), make([]float32, n)
	for i := range wq {
		wq[i] = int64(math.Round(120 * math.Sin(float64(i)*1.3)))
	}
	g := dynLinearGraph(wq, 0.01, 0, bias)
	w0 := ramp("w0", []int64{k, k}, 0.1)
	g.Initializers = append(g.Initializers, w0)
	g.Inputs[0].Name = "x0"
	g.Nodes = append([]*onnx.Node{{OpType: "MatMul", Inputs: []string{"x0", "w0"}, Outputs: []string{"x"}}}, g.Nodes...)
	x0 := ramp("x0", []int64{2, 5, k}, 0.3)
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g}
	p, err := alidnn.Quantize(context.Background(), local(t), m, [][]*onnx.Tensor{{x0}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := runResult(t, p, x0).Outputs[0].Float32s()
	xf, _ := x0.Float32s()
	wf, _ := w0.Float32s()
	x := make([]float32, len(xf))
	for r := range len(xf) / k {
		for j := range k {
			var s float64
			for i := range k {
				s += float64(xf[r*k+i]) * float64(wf[i*k+j])
			}
			x[r*k+j] = float32(s)
		}
	}
	want := dynLinear64(x, wq, 0.01, 0, bias, k, n)
	var top float64
	for _, v := range want {
		top = math.Max(top, math.Abs(v))
	}
	var worst float64
	for j, v := range want {
		d := math.Abs(float64(got[j]) - v)
		worst = math.Max(worst, d)
		if d > 0.02*top {
			t.Fatalf("value %d: %g, want %g (within %g)", j, got[j], v, 0.02*top)
		}
	}
	t.Logf("off by ≤ %.3g of the largest output", worst/top)
}

// TestGatherQuantizedTable: a Gather of rows of an int8 table by INT64 ids
// read only by DequantizeLinear, as quantize_dynamic writes an embedding,
// gives exactly the float32 (q − z)·s of the rows the ids name; read by
// anything else too (here a graph output), it is refused with its reason.
func TestGatherQuantizedTable(t *testing.T) {
	const rows, width = 7, 20
	q := make([]int64, rows*width)
	for k := range q {
		q[k] = int64(k*37%255) - 127
	}
	ids := vinfo("ids", 2, 3)
	ids.ElemType = onnx.Int64
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{ints64("table", onnx.Int8, []int64{rows, width}, q...),
			onnx.NewFloat32("s", nil, []float32{0.0173}), ints64("z", onnx.Int8, nil, 3)},
		Nodes: []*onnx.Node{
			{OpType: "Gather", Name: "g", Inputs: []string{"table", "ids"}, Outputs: []string{"e_quantized"}},
			{OpType: "DequantizeLinear", Inputs: []string{"e_quantized", "s", "z"}, Outputs: []string{"e"}},
		},
		Inputs:  []onnx.ValueInfo{ids},
		Outputs: []onnx.ValueInfo{{Name: "e"}},
	}
	iv := []int64{6, 0, 3, -1, 2, 2}
	res := runGraphResult(t, g, ints64("ids", onnx.Int64, []int64{2, 3}, iv...))
	got, _ := res.Outputs[0].Float32s()
	for i, id := range iv {
		r := int((id + rows) % rows)
		for j := range width {
			if want := float32(q[r*width+j]-3) * 0.0173; got[i*width+j] != want {
				t.Fatalf("id %d value %d: %g, want %g", id, j, got[i*width+j], want)
			}
		}
	}
	g.Outputs = append(g.Outputs, onnx.ValueInfo{Name: "e_quantized", ElemType: onnx.Int8})
	_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
	if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), "only a per-tensor DequantizeLinear reads") {
		t.Fatalf("compile with the int8 rows an output too: %v, want refused", err)
	}
}
