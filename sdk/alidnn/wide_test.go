package alidnn_test

import (
	"errors"
	"math/rand/v2"
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
// compute, or broadcast, is refused naming it.
func TestWideRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []*onnx.Node
		dimsB int64
		want  string
	}{
		{"relu", []*onnx.Node{{OpType: "Relu", Inputs: []string{"a"}, Outputs: []string{"y"}}}, 4, `read by Relu`},
		{"broadcast", []*onnx.Node{{OpType: "Add", Inputs: []string{"a", "b"}, Outputs: []string{"y"}}}, 1, "do not broadcast"},
		{"after", []*onnx.Node{{OpType: "Add", Inputs: []string{"a", "b"}, Outputs: []string{"s"}},
			{OpType: "Neg", Inputs: []string{"s"}, Outputs: []string{"y"}}}, 4, "Neg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &onnx.Graph{Nodes: tc.nodes, Outputs: []onnx.ValueInfo{{Name: "y"}},
				Inputs: []onnx.ValueInfo{typed(vinfo("a", 4), onnx.Uint64), typed(vinfo("b", tc.dimsB), onnx.Uint64)}}
			_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
			if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrUnsupported naming %q", err, tc.want)
			}
		})
	}
}
