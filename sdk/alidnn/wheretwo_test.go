package alidnn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestWhereTwoComputed picks between two computed tensors (Abs(x) and
// Neg(y), [4,16]) by a constant condition, infinities among the values,
// against the picks written out.
func TestWhereTwoComputed(t *testing.T) {
	n := 64
	xf, yf, cond := make([]float32, n), make([]float32, n), make([]int64, n)
	for k := range n {
		xf[k], yf[k] = float32(k)*0.25-3, float32(k%7)-2.5
		cond[k] = int64(k % 3 % 2)
	}
	xf[5], yf[9], xf[10], yf[10] = float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.Inf(1)), float32(math.Inf(-1))
	condT, err := onnx.NewInt("c", onnx.Bool, []int64{4, 16}, cond)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float64, n)
	for k := range n {
		want[k] = -float64(yf[k])
		if cond[k] != 0 {
			want[k] = math.Abs(float64(xf[k]))
		}
	}
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", 4, 16), vinfo("y", 4, 16)},
		Initializers: []*onnx.Tensor{condT},
		Nodes: []*onnx.Node{
			{Name: "abs", OpType: "Abs", Inputs: []string{"x"}, Outputs: []string{"a"}},
			{Name: "neg", OpType: "Neg", Inputs: []string{"y"}, Outputs: []string{"b"}},
			{Name: "where", OpType: "Where", Inputs: []string{"c", "a", "b"}, Outputs: []string{"w"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "w"}},
	}
	checkExact(t, runGraph(t, g, onnx.NewFloat32("x", []int64{4, 16}, xf), onnx.NewFloat32("y", []int64{4, 16}, yf)), want)
}

// TestWhereTwoByMask picks between attention scores s = a·w [2,4,16] and
// −s by a padding mask [2,1,16], a BOOL graph input that broadcasts over
// the rows, against float64.
func TestWhereTwoByMask(t *testing.T) {
	mask := make([]int64, 32)
	for k := range mask {
		mask[k] = int64(k % 5 % 2)
	}
	m, err := onnx.NewInt("m", onnx.Bool, []int64{2, 1, 16}, mask)
	if err != nil {
		t.Fatal(err)
	}
	mv := vinfo("m", 2, 1, 16)
	mv.ElemType = onnx.Bool
	w := ramp("w", []int64{8, 16}, 0.1)
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{mv, vinfo("a", 2, 4, 8)},
		Initializers: []*onnx.Tensor{w},
		Nodes: []*onnx.Node{
			{Name: "mm", OpType: "MatMul", Inputs: []string{"a", "w"}, Outputs: []string{"s"}},
			{Name: "neg", OpType: "Neg", Inputs: []string{"s"}, Outputs: []string{"ns"}},
			{Name: "where", OpType: "Where", Inputs: []string{"m", "s", "ns"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}
	a := ramp("a", []int64{2, 4, 8}, 0.3)
	got := runGraph(t, g, m, a)
	af, _ := a.Float32s()
	wf, _ := w.Float32s()
	var want []float64
	for row := range 8 {
		for o := range 16 {
			s := 0.0
			for k := range 8 {
				s += float64(af[row*8+k]) * float64(wf[k*16+o])
			}
			if mask[row/4*16+o] == 0 {
				s = -s
			}
			want = append(want, s)
		}
	}
	checkClose(t, got, want)
}

// checkExact fails unless got is want, value for value (infinities equal).
func checkExact(t *testing.T, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for k := range want {
		if float64(got[k]) != want[k] {
			t.Fatalf("value %d: %g, want %g", k, got[k], want[k])
		}
	}
}

// TestWhereMasksNonFinite picks between a computed tensor t = −x [4,16]
// holding infinities and NaN and a constant fill, by a constant condition
// and by a BOOL input [1,16] (a mask over the rows), the fill finite,
// −Inf, +Inf and (constant condition) NaN:
// where t is not picked the fill comes out whatever t is, where it is
// picked t does, infinities included; a picked NaN gives an infinity (the
// ALU's min and max drop it), or NaN with a NaN fill (t·1 + 0).
func TestWhereMasksNonFinite(t *testing.T) {
	const n = 64
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	xf, cond := make([]float32, n), make([]int64, n)
	for k := range n {
		xf[k] = float32(k)*0.5 - 9
		switch k % 4 {
		case 1:
			xf[k] = inf
		case 2:
			xf[k] = -inf
		case 3:
			xf[k] = nan
		}
		cond[k] = int64(k % 16 / 4 % 2) // each kind of value picked and not, the same in each row
	}
	condT, err := onnx.NewInt("c", onnx.Bool, []int64{4, 16}, cond)
	if err != nil {
		t.Fatal(err)
	}
	fills := []float32{2.5, -inf, inf, nan}
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", 4, 16), typed(vinfo("m", 1, 16), onnx.Bool)},
		Initializers: []*onnx.Tensor{condT},
		Nodes:        []*onnx.Node{{Name: "neg", OpType: "Neg", Inputs: []string{"x"}, Outputs: []string{"t"}}},
	}
	type pick struct {
		name    string
		flipped bool // Where(c, fill, t)
		fill    float32
	}
	var picks []pick
	for k, f := range fills {
		for _, c := range []string{"c", "m"} {
			if c == "m" && f != f {
				continue // refused: a computed condition with a NaN fill
			}
			name := fmt.Sprintf("%s%d", c, k)
			p := pick{name: name, flipped: k%2 == 1, fill: f}
			g.Initializers = append(g.Initializers, onnx.NewFloat32("f"+name, nil, []float32{f}))
			ins := []string{c, "t", "f" + name}
			if p.flipped {
				ins = []string{c, "f" + name, "t"}
			}
			g.Nodes = append(g.Nodes, &onnx.Node{Name: name, OpType: "Where", Inputs: ins, Outputs: []string{name}})
			g.Outputs = append(g.Outputs, vinfo(name, 4, 16))
			picks = append(picks, p)
		}
	}
	res := runGraphResult(t, g, onnx.NewFloat32("x", []int64{4, 16}, xf), ints64("m", onnx.Bool, []int64{1, 16}, cond[:16]...))
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b }
	for k, p := range picks {
		got, err := res.Outputs[k].Float32s()
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			want := p.fill
			if (cond[i] != 0) != p.flipped {
				want = -xf[i]
				if want != want && p.fill == p.fill && math.IsInf(float64(got[i]), 0) {
					continue
				}
			}
			if !same(got[i], want) {
				t.Errorf("%s (fill %v): element %d, t = %v, condition %d: %v, want %v", p.name, p.fill, i, -xf[i], cond[i], got[i], want)
			}
		}
	}
}

// TestMaskOfFullShape applies a BOOL input mask of the scores' own shape
// [4,20] (laid out for broadcasting, outer rows, where the computed scores
// are one tile of rows): the mask is gathered into the scores' layout for
// Add and Where, both exact.
func TestMaskOfFullShape(t *testing.T) {
	const R, S = 4, 20
	xf, mask := make([]float32, R*S), make([]int64, R*S)
	for k := range xf {
		xf[k] = float32(k)*0.25 - 7
		mask[k] = int64(k * 7 % 5 % 2)
	}
	toF := &onnx.Attribute{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}
	g := &onnx.Graph{
		Inputs:       []onnx.ValueInfo{vinfo("x", R, S), typed(vinfo("m", R, S), onnx.Bool)},
		Initializers: []*onnx.Tensor{onnx.NewFloat32("fill", nil, []float32{-1e9})},
		Nodes: []*onnx.Node{
			{Name: "neg", OpType: "Neg", Inputs: []string{"x"}, Outputs: []string{"t"}},
			{Name: "cast", OpType: "Cast", Inputs: []string{"m"}, Outputs: []string{"mf"}, Attrs: []*onnx.Attribute{toF}},
			{Name: "add", OpType: "Add", Inputs: []string{"t", "mf"}, Outputs: []string{"sum"}},
			{Name: "where", OpType: "Where", Inputs: []string{"m", "t", "fill"}, Outputs: []string{"w"}},
		},
		Outputs: []onnx.ValueInfo{vinfo("sum", R, S), vinfo("w", R, S)},
	}
	res := runGraphResult(t, g, onnx.NewFloat32("x", []int64{R, S}, xf), ints64("m", onnx.Bool, []int64{R, S}, mask...))
	sum, err := res.Outputs[0].Float32s()
	if err != nil {
		t.Fatal(err)
	}
	w, err := res.Outputs[1].Float32s()
	if err != nil {
		t.Fatal(err)
	}
	for k := range xf {
		wantW := float32(-1e9)
		if mask[k] != 0 {
			wantW = -xf[k]
		}
		if sum[k] != -xf[k]+float32(mask[k]) || w[k] != wantW {
			t.Errorf("element %d (x %v, mask %d): sum %v, where %v; want %v and %v", k, xf[k], mask[k], sum[k], w[k], -xf[k]+float32(mask[k]), wantW)
		}
	}
}
