package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// cmpValues are x and y [2,3,16] with equal pairs, both zeros, infinities,
// NaN on either side and neighbours a float32 ulp apart, and y's last row
// ([16], for the broadcast cases).
func cmpValues() (x, y []float32) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	nz := float32(math.Copysign(0, -1))
	special := [][2]float32{{1, 1}, {nz, 0}, {0, nz}, {inf, inf}, {-inf, inf}, {inf, -inf}, {nan, 1}, {1, nan},
		{nan, nan}, {-inf, -inf}, {1, math.Nextafter32(1, 2)}, {math.Nextafter32(1, 2), 1}, {-3.4e38, 3.4e38}, {1e-45, 0}, {-2, -2}, {5, -5}}
	n := 96
	x, y = make([]float32, n), make([]float32, n)
	for k := range n {
		x[k], y[k] = float32(k%11)*0.5-2.5, float32(k%7)*0.5-1.5
	}
	for k, p := range special {
		x[k], y[k] = p[0], p[1]
		x[n-16+k], y[n-16+k] = p[0], p[1]
	}
	return x, y
}

// runBool runs g on ins and returns its first output, BOOL, as 0 and 1.
func runBool(t *testing.T, g *onnx.Graph, ins ...*onnx.Tensor) []int64 {
	t.Helper()
	res := runGraphResult(t, g, ins...)
	if res.Outputs[0].DataType != onnx.Bool {
		t.Fatalf("output is %v, want BOOL", res.Outputs[0].DataType)
	}
	v, err := res.Outputs[0].Int64s()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCompareFloat runs each comparison of two FLOAT graph inputs, of a
// computed tensor with a graph input, with y broadcast along the lanes, and
// with a constant, against Go's float64 comparisons (IEEE: NaN false).
func TestCompareFloat(t *testing.T) {
	xf, yf := cmpValues()
	ops := map[string]func(a, b float64) bool{
		"Equal": func(a, b float64) bool { return a == b }, "Less": func(a, b float64) bool { return a < b },
		"Greater": func(a, b float64) bool { return a > b }, "LessOrEqual": func(a, b float64) bool { return a <= b },
		"GreaterOrEqual": func(a, b float64) bool { return a >= b },
	}
	row := yf[80:]
	for op, ref := range ops {
		for _, c := range []struct {
			name  string
			bcast bool // y is [16]
			neg   bool // x is Neg(x), computed
			konst bool // y is a constant
			swap  bool // y op x
		}{{name: "inputs"}, {name: "computed", neg: true}, {name: "broadcast", bcast: true}, {name: "broadcast first", bcast: true, swap: true},
			{name: "constant", konst: true, neg: true}, {name: "constant first", konst: true, neg: true, swap: true}} {
			t.Run(op+"/"+c.name, func(t *testing.T) {
				ydims, yv := []int64{2, 3, 16}, yf
				if c.bcast || c.konst {
					ydims, yv = []int64{16}, row
				}
				yt := onnx.NewFloat32("y", ydims, yv)
				g := &onnx.Graph{Inputs: []onnx.ValueInfo{vinfo("x", 2, 3, 16)}, Outputs: []onnx.ValueInfo{{Name: "c"}}}
				ins := []*onnx.Tensor{onnx.NewFloat32("x", []int64{2, 3, 16}, xf)}
				if c.konst {
					g.Initializers = append(g.Initializers, yt)
				} else {
					g.Inputs = append(g.Inputs, vinfo("y", ydims...))
					ins = append(ins, yt)
				}
				a := "x"
				if c.neg {
					g.Nodes = append(g.Nodes, &onnx.Node{Name: "neg", OpType: "Neg", Inputs: []string{"x"}, Outputs: []string{"nx"}})
					a = "nx"
				}
				in := []string{a, "y"}
				if c.swap {
					in = []string{"y", a}
				}
				g.Nodes = append(g.Nodes, &onnx.Node{Name: "cmp", OpType: op, Inputs: in, Outputs: []string{"c"}})
				got := runBool(t, g, ins...)
				for k, v := range got {
					xv, yv := float64(xf[k]), float64(yv[k%len(yv)])
					if c.neg {
						xv = -xv
					}
					if c.swap {
						xv, yv = yv, xv
					}
					if want := ref(xv, yv); v != 0 != want || v != 0 && v != 1 {
						t.Fatalf("element %d: %s(%v, %v) = %d, want %v", k, op, xv, yv, v, want)
					}
				}
			})
		}
	}
}

// TestLogicOfComparisons combines comparisons of FLOAT inputs with And, Or,
// Xor and Not, and selects by one with Where, against float64.
// Where's computed condition picks by arithmetic (see whereComputed), exact
// for finite picked-from values only, which the Where case checks.
func TestLogicOfComparisons(t *testing.T) {
	xf, yf := cmpValues()
	ins := []*onnx.Tensor{onnx.NewFloat32("x", []int64{2, 3, 16}, xf), onnx.NewFloat32("y", []int64{2, 3, 16}, yf)}
	for _, c := range []struct {
		op  string
		ref func(lt, eq bool) bool
	}{
		{"And", func(lt, eq bool) bool { return lt && eq }}, {"Or", func(lt, eq bool) bool { return lt || eq }},
		{"Xor", func(lt, eq bool) bool { return lt != eq }},
	} {
		t.Run(c.op, func(t *testing.T) {
			g := &onnx.Graph{
				Inputs: []onnx.ValueInfo{vinfo("x", 2, 3, 16), vinfo("y", 2, 3, 16)},
				Nodes: []*onnx.Node{
					{Name: "lt", OpType: "Less", Inputs: []string{"x", "y"}, Outputs: []string{"lt"}},
					{Name: "ge", OpType: "GreaterOrEqual", Inputs: []string{"x", "y"}, Outputs: []string{"ge"}},
					{Name: "nge", OpType: "Not", Inputs: []string{"ge"}, Outputs: []string{"nge"}},
					{Name: "eq", OpType: "Equal", Inputs: []string{"x", "y"}, Outputs: []string{"eq"}},
					{Name: "logic", OpType: c.op, Inputs: []string{"nge", "eq"}, Outputs: []string{"c"}},
				},
				Outputs: []onnx.ValueInfo{{Name: "c"}},
			}
			for k, v := range runBool(t, g, ins...) {
				x, y := float64(xf[k]), float64(yf[k])
				if want := c.ref(!(x >= y), x == y); v != 0 != want {
					t.Fatalf("element %d (%v, %v): %d, want %v", k, x, y, v, want)
				}
			}
		})
	}
	t.Run("Where", func(t *testing.T) {
		g := &onnx.Graph{
			Inputs: []onnx.ValueInfo{vinfo("x", 2, 3, 16), vinfo("y", 2, 3, 16)},
			Nodes: []*onnx.Node{
				{Name: "gt", OpType: "Greater", Inputs: []string{"x", "y"}, Outputs: []string{"gt"}},
				{Name: "neg", OpType: "Neg", Inputs: []string{"x"}, Outputs: []string{"nx"}},
				{Name: "where", OpType: "Where", Inputs: []string{"gt", "nx", "zero"}, Outputs: []string{"w"}},
			},
			Initializers: []*onnx.Tensor{onnx.NewFloat32("zero", nil, []float32{-7})},
			Outputs:      []onnx.ValueInfo{{Name: "w"}},
		}
		got := runGraph(t, g, ins...)
		for k, v := range got {
			x, y := float64(xf[k]), float64(yf[k])
			want := -7.0
			if x > y {
				want = -x
			}
			// whereComputed is exact for finite x only (t·p + k·(1 − p)).
			if float64(v) != want && !math.IsInf(x, 0) && !math.IsNaN(x) {
				t.Fatalf("element %d (%v, %v): %v, want %v", k, x, y, v, want)
			}
		}
	})
}
