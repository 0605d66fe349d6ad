package alidnn_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

func uint64s(name string, v []uint64) *onnx.Tensor {
	t, err := onnx.NewUint64(name, []int64{int64(len(v))}, v)
	if err != nil {
		panic(err)
	}
	return t
}

// wideEdges are the values at which carries, borrows and the limbs of a
// 32-bit word's product turn: 0, 1, the ends of each word, powers of two
// around the limb boundaries 2¹¹ and 2²², and their neighbours.
func wideEdges() []uint64 {
	e := []uint64{0, 1, 2, 3, 1<<32 - 1, 1 << 32, 1<<32 + 1, 1<<63 - 1, 1 << 63, 1<<64 - 1, 0xFFFFFFFF00000000, 0x00000000FFFFFFFF,
		0x7FFFFFFF, 0x80000000, 0x80000001, 0xFFFFFFFE, 0xDEADBEEFCAFEBABE}
	for _, k := range []int{10, 11, 12, 21, 22, 23, 31, 33, 43, 53, 62} {
		e = append(e, 1<<k-1, 1<<k, 1<<k+1, 1<<k+1<<32-1)
	}
	return e
}

// TestWideArithmetic computes Add, Sub, Mul, Div and the five comparisons of two
// UINT64 inputs on the engine, every edge with every edge and 4 000 random
// pairs of random bit lengths, against Go's uint64 arithmetic (wrapping
// modulo 2⁶⁴; a zero divisor may give anything but must run), through the
// program file. Two results read results: (a+b)−b
// must be a again, and (a·b)·a a product of a product.
func TestWideArithmetic(t *testing.T) {
	edges := wideEdges()
	var a, b []uint64
	for _, x := range edges {
		for _, y := range edges {
			a, b = append(a, x), append(b, y)
		}
	}
	r := rand.New(rand.NewPCG(3, 64))
	for range 4000 {
		a = append(a, r.Uint64()>>r.IntN(64))
		b = append(b, r.Uint64()>>r.IntN(64))
	}
	n := int64(len(a))
	bin := func(op, x, y, out string) *onnx.Node {
		return &onnx.Node{OpType: op, Inputs: []string{x, y}, Outputs: []string{out}}
	}
	type check struct {
		name string
		want func(x, y uint64) uint64
	}
	b2u := func(c bool) uint64 {
		if c {
			return 1
		}
		return 0
	}
	checks := []check{
		{"add", func(x, y uint64) uint64 { return x + y }},
		{"sub", func(x, y uint64) uint64 { return x - y }},
		{"mul", func(x, y uint64) uint64 { return x * y }},
		{"div", func(x, y uint64) uint64 {
			if y == 0 {
				return 0 // anything: not checked
			}
			return x / y
		}},
		{"back", func(x, y uint64) uint64 { return x }},
		{"cube", func(x, y uint64) uint64 { return x * y * x }},
		{"eq", func(x, y uint64) uint64 { return b2u(x == y) }},
		{"lt", func(x, y uint64) uint64 { return b2u(x < y) }},
		{"le", func(x, y uint64) uint64 { return b2u(x <= y) }},
		{"gt", func(x, y uint64) uint64 { return b2u(x > y) }},
		{"ge", func(x, y uint64) uint64 { return b2u(x >= y) }},
	}
	g := &onnx.Graph{
		Nodes: []*onnx.Node{bin("Add", "a", "b", "add"), bin("Sub", "a", "b", "sub"), bin("Mul", "a", "b", "mul"), bin("Div", "a", "b", "div"),
			bin("Sub", "add", "b", "back"), bin("Mul", "mul", "a", "cube"),
			bin("Equal", "a", "b", "eq"), bin("Less", "a", "b", "lt"), bin("LessOrEqual", "a", "b", "le"),
			bin("Greater", "a", "b", "gt"), bin("GreaterOrEqual", "a", "b", "ge")},
		Inputs: []onnx.ValueInfo{typed(vinfo("a", n), onnx.Uint64), typed(vinfo("b", n), onnx.Uint64)},
	}
	for _, c := range checks {
		typ := onnx.Uint64
		if len(c.name) == 2 {
			typ = onnx.Bool
		}
		g.Outputs = append(g.Outputs, typed(vinfo(c.name, n), typ))
	}
	p := compileThroughFile(t, 13, g)
	res := runResult(t, p, uint64s("a", a), uint64s("b", b))
	for k, c := range checks {
		out := res.Outputs[k]
		var got []uint64
		if out.DataType == onnx.Uint64 {
			var err error
			if got, err = out.Uint64s(); err != nil {
				t.Fatal(err)
			}
		} else {
			iv, err := out.Int64s()
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range iv {
				got = append(got, uint64(v))
			}
		}
		bad := 0
		for i := range a {
			if c.name == "div" && b[i] == 0 {
				continue
			}
			if want := c.want(a[i], b[i]); got[i] != want {
				if bad++; bad <= 5 {
					t.Errorf("%s(%#x, %#x) = %#x, want %#x", c.name, a[i], b[i], got[i], want)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d wrong", c.name, bad, len(a))
		}
	}
}

// TestWideRefusals: a UINT64 input read by an operator the words do not
// compute, broadcast, or with a constant of another type or shape, is
// refused naming it.
func TestWideRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []*onnx.Node
		dimsB int64
		want  string
	}{
		{"relu", []*onnx.Node{{OpType: "Relu", Inputs: []string{"a"}, Outputs: []string{"y"}}}, 4, `read by Relu`},
		{"broadcast", []*onnx.Node{{OpType: "Add", Inputs: []string{"a", "b"}, Outputs: []string{"y"}}}, 1, "broadcast only constants"},
		{"constant of another type", []*onnx.Node{{OpType: "Add", Inputs: []string{"a", "k32"}, Outputs: []string{"y"}}}, 4, "constants of one type"},
		{"constant broadcast beyond", []*onnx.Node{{OpType: "Add", Inputs: []string{"a", "k24"}, Outputs: []string{"y"}}}, 4, "to the computed operand's shape"},
		{"after", []*onnx.Node{{OpType: "Add", Inputs: []string{"a", "b"}, Outputs: []string{"s"}},
			{OpType: "Neg", Inputs: []string{"s"}, Outputs: []string{"y"}}}, 4, "Neg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &onnx.Graph{Nodes: tc.nodes, Outputs: []onnx.ValueInfo{{Name: "y"}},
				Inputs: []onnx.ValueInfo{typed(vinfo("a", 4), onnx.Uint64), typed(vinfo("b", tc.dimsB), onnx.Uint64)},
				Initializers: []*onnx.Tensor{ints64("k32", onnx.Uint32, []int64{4}, 1, 2, 3, 4),
					ints64("k24", onnx.Uint64, []int64{2, 4}, 1, 2, 3, 4, 5, 6, 7, 8)}}
			_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
			if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrUnsupported naming %q", err, tc.want)
			}
		})
	}
}

// TestWideConstants computes 64-bit operators of a computed operand and a
// constant, either side, broadcast from a row of 4 and from a scalar:
// UINT64 inputs of every edge, and an INT64 power (computed on words) plus
// negative constants, against Go's arithmetic.
func TestWideConstants(t *testing.T) {
	edges := wideEdges()
	for len(edges)%4 != 0 {
		edges = append(edges, uint64(len(edges))<<40)
	}
	m := int64(len(edges) / 4)
	row := []uint64{3, 1<<32 + 5, 1<<63 - 1, 0x5EADBEEF12345678}
	const scalar = 0xFFFFFFFF
	bin := func(op, x, y, out string) *onnx.Node {
		return &onnx.Node{OpType: op, Inputs: []string{x, y}, Outputs: []string{out}}
	}
	rowT, err := onnx.NewUint64("row", []int64{4}, row)
	if err != nil {
		t.Fatal(err)
	}
	scalarT, err := onnx.NewUint64("s", nil, []uint64{scalar})
	if err != nil {
		t.Fatal(err)
	}
	b2u := func(c bool) uint64 {
		if c {
			return 1
		}
		return 0
	}
	checks := []struct {
		node *onnx.Node
		want func(a, k uint64) uint64 // k: the row's or the scalar's element
	}{
		{bin("Add", "a", "row", "add"), func(a, k uint64) uint64 { return a + k }},
		{bin("Sub", "row", "a", "sub"), func(a, k uint64) uint64 { return k - a }},
		{bin("Mul", "a", "row", "mul"), func(a, k uint64) uint64 { return a * k }},
		{bin("Div", "a", "row", "div"), func(a, k uint64) uint64 { return a / k }},
		{bin("Less", "row", "a", "lt"), func(a, k uint64) uint64 { return b2u(k < a) }},
		{bin("Add", "s", "a", "adds"), func(a, k uint64) uint64 { return k + a }},
		{bin("Mul", "a", "s", "muls"), func(a, k uint64) uint64 { return a * k }},
		{bin("Equal", "a", "s", "eqs"), func(a, k uint64) uint64 { return b2u(a == k) }},
		{bin("GreaterOrEqual", "a", "s", "ges"), func(a, k uint64) uint64 { return b2u(a >= k) }},
	}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{rowT, scalarT},
		Inputs:       []onnx.ValueInfo{typed(vinfo("a", m, 4), onnx.Uint64)},
	}
	for _, c := range checks {
		typ := onnx.Uint64
		if len(c.node.Outputs[0]) == 2 || c.node.OpType == "Equal" || c.node.OpType == "GreaterOrEqual" {
			typ = onnx.Bool
		}
		g.Nodes = append(g.Nodes, c.node)
		g.Outputs = append(g.Outputs, typed(vinfo(c.node.Outputs[0], m, 4), typ))
	}
	p := compileThroughFile(t, 13, g)
	a, err := onnx.NewUint64("a", []int64{m, 4}, edges)
	if err != nil {
		t.Fatal(err)
	}
	res := runResult(t, p, a)
	for k, c := range checks {
		out := res.Outputs[k]
		var got []uint64
		if out.DataType == onnx.Uint64 {
			got, err = out.Uint64s()
		} else {
			var iv []int64
			iv, err = out.Int64s()
			for _, v := range iv {
				got = append(got, uint64(v))
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i, x := range edges {
			kv := uint64(scalar)
			if slices.Contains(c.node.Inputs, "row") {
				kv = row[i%4]
			}
			if want := c.want(x, kv); got[i] != want {
				if bad++; bad <= 5 {
					t.Errorf("%s: element %d of a = %#x with %#x: %#x, want %#x", c.node.Outputs[0], i, x, kv, got[i], want)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d wrong", c.node.Outputs[0], bad, len(edges))
		}
	}

	// INT64: a power on words (x³, x within ±2²⁴ as INT64 inputs are)
	// plus a row of negative constants, and compared with a constant.
	xs := []int64{0, 1, -1, 2, -3, 1 << 12, -(1 << 20), 1<<24 - 1, -(1 << 24), 12345, -99999, 77}
	g = &onnx.Graph{
		Initializers: []*onnx.Tensor{ints64("three", onnx.Int64, nil, 3),
			ints64("krow", onnx.Int64, []int64{4}, -1, -(1 << 40), 1<<62, -(1 << 63)), ints64("k", onnx.Int64, nil, -(1 << 36))},
		Nodes:   []*onnx.Node{bin("Pow", "x", "three", "cube"), bin("Add", "krow", "cube", "sum"), bin("Equal", "cube", "k", "eq")},
		Inputs:  []onnx.ValueInfo{typed(vinfo("x", 3, 4), onnx.Int64)},
		Outputs: []onnx.ValueInfo{typed(vinfo("sum", 3, 4), onnx.Int64), typed(vinfo("eq", 3, 4), onnx.Bool)},
	}
	res = runResult(t, compileThroughFile(t, 13, g), ints64("x", onnx.Int64, []int64{3, 4}, xs...))
	sum, err := res.Outputs[0].Int64s()
	if err != nil {
		t.Fatal(err)
	}
	eq, err := res.Outputs[1].Int64s()
	if err != nil {
		t.Fatal(err)
	}
	krow := []int64{-1, -(1 << 40), 1 << 62, -(1 << 63)}
	for i, x := range xs {
		cube := x * x * x
		if want := krow[i%4] + cube; sum[i] != want {
			t.Errorf("%d³ + %d = %d, want %d", x, krow[i%4], sum[i], want)
		}
		if want := b2u(cube == -(1 << 36)); uint64(eq[i]) != want {
			t.Errorf("%d³ = −2³⁶: %d, want %d", x, eq[i], want)
		}
	}
}
