package alidnn_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

func strs(name string, dims []int64, v ...string) *onnx.Tensor {
	b := make([][]byte, len(v))
	for k, s := range v {
		b[k] = []byte(s)
	}
	t, err := onnx.NewString(name, dims, b)
	if err != nil {
		panic(err)
	}
	return t
}

// equalStringsGraph compares the STRING inputs x and z [lead,3] and y [3]
// (the constant y if given) with each other and with the constant k [3]:
// x = y broadcast, x = k, k = z (the constant first), z = x, and k = k2 of
// two constants, which folds.
func equalStringsGraph(lead int64, y *onnx.Tensor) *onnx.Graph {
	str := func(v onnx.ValueInfo) onnx.ValueInfo { return typed(v, onnx.String) }
	boolean := func(name string) onnx.ValueInfo { return typed(vinfo(name, lead, 3), onnx.Bool) }
	eq := func(a, b, out string) *onnx.Node {
		return &onnx.Node{OpType: "Equal", Name: out, Inputs: []string{a, b}, Outputs: []string{out}}
	}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{strs("k", []int64{3}, "", "a\x00", "\xff"), strs("k2", []int64{3}, "", "a", "\xff")},
		Nodes:        []*onnx.Node{eq("x", "y", "xy"), eq("x", "k", "xk"), eq("k", "z", "kz"), eq("z", "x", "zx"), eq("k", "k2", "kk")},
		Inputs:       []onnx.ValueInfo{str(vinfo("x", lead, 3)), str(vinfo("y", 3)), str(vinfo("z", lead, 3))},
		Outputs:      []onnx.ValueInfo{boolean("xy"), boolean("xk"), boolean("kz"), boolean("zx"), typed(vinfo("kk", 3), onnx.Bool)},
	}
	if y != nil {
		g.Inputs = slices.Delete(g.Inputs, 1, 2)
		g.Initializers = append(g.Initializers, y)
	}
	return g
}

// equalWant is the graph's outputs for x, y and z, ONNX's Equal of bytes
// (y and k broadcast along the rows).
func equalWant(x, y, z []string) [][]int64 {
	k, k2 := []string{"", "a\x00", "\xff"}, []string{"", "a", "\xff"}
	eq := func(a, b []string) []int64 {
		r := make([]int64, max(len(a), len(b)))
		for i := range r {
			if bytes.Equal([]byte(a[i%len(a)]), []byte(b[i%len(b)])) {
				r[i] = 1
			}
		}
		return r
	}
	return [][]int64{eq(x, y), eq(x, k), eq(k, z), eq(z, x), eq(k, k2)}
}

// stringRuns are inputs of equalStringsGraph: repeated and empty strings,
// strings differing only in a trailing NUL or byte, invalid UTF-8 (which
// must not become one replacement character), the constants' strings, and
// a second run seeing strings in another order (its own dictionary).
var stringRuns = [][3][]string{
	{{"a", "a\x00", "", "\xff", "a", "\xfe"}, {"a", "a", "\xff"}, {"a\x00\x00", "a\x00", "x", "", "a", "\xfe"}},
	{{"q", "q", "a", "", "\xff", "a\x00"}, {"", "q", "a\x00"}, {"q", "b", "a", "", "", "a\x00"}},
	{{"ab", "a", "ab", "b", "b", "\xff\xff"}, {"a", "a", "ab"}, {"ab", "ab", "ab", "", "", "\xff"}},
}

func stringInputs(run [3][]string, dims []int64) []*onnx.Tensor {
	return []*onnx.Tensor{strs("x", dims, run[0]...), strs("y", []int64{3}, run[1]...), strs("z", dims, run[2]...)}
}

func checkEqualOutputs(t *testing.T, what string, res *alidnn.Result, want [][]int64) {
	t.Helper()
	for k, o := range res.Outputs {
		got, err := o.Int64s()
		if err != nil || o.DataType != onnx.Bool || !slices.Equal(got, want[k]) {
			t.Errorf("%s: output %q is %v %v (%v), want %v", what, o.Name, o.DataType, got, err, want[k])
		}
	}
}

// TestEqualStrings compiles Equal of STRING graph inputs and constants
// through the program file and runs it three times: each run's strings are
// interned in one dictionary its inputs share, starting from the
// constants' ids, so every comparison is ONNX's of bytes.
func TestEqualStrings(t *testing.T) {
	p := compileThroughFile(t, 19, equalStringsGraph(2, nil))
	var names []string
	for _, b := range p.Inputs {
		names = append(names, b.Name+" "+b.Type.String())
	}
	if want := []string{"x STRING", "y STRING", "z STRING"}; !slices.Equal(names, want) || len(p.Derived) != 0 {
		t.Errorf("inputs %v and %d derived tensors, want %v and none: one input a graph input", names, len(p.Derived), want)
	}
	if len(p.Strings) != 3 {
		t.Errorf("%d strings recorded, want the 3 of the constant Equal reads", len(p.Strings))
	}
	for k, run := range stringRuns {
		res := runResult(t, p, stringInputs(run, []int64{2, 3})...)
		checkEqualOutputs(t, "run "+string(rune('1'+k)), res, equalWant(run[0], run[1], run[2]))
	}
}

// TestEqualStringsCoalesced runs equalStringsGraph's runs as one job of a
// session coalescing runs (WithBatch), each in its lane with its own
// dictionary, and a program compiled ForBatch, whose run interns its
// samples' strings together.
func TestEqualStringsCoalesced(t *testing.T) {
	one := compileThroughFile(t, 19, equalStringsGraph(2, nil))
	// ForBatch batches every input: y is a constant there, and a sample is
	// the first row of x and z.
	y := []string{"a", "", "\xff"}
	batched, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 19}}, Graph: equalStringsGraph(1, strs("y", []int64{3}, y...))}, alidnn.ForBatch(4))
	if err != nil {
		t.Fatal(err)
	}
	batched = throughFile(t, batched)
	for _, tc := range []struct {
		name string
		p    *alidnn.Program
		ins  func(run [3][]string) []*onnx.Tensor
		want func(run [3][]string) [][]int64
	}{
		{"WithBatch", one, func(run [3][]string) []*onnx.Tensor { return stringInputs(run, []int64{2, 3}) },
			func(run [3][]string) [][]int64 { return equalWant(run[0], run[1], run[2]) }},
		{"ForBatch", batched, func(run [3][]string) []*onnx.Tensor {
			return []*onnx.Tensor{strs("x", []int64{1, 3}, run[0][:3]...), strs("z", []int64{1, 3}, run[2][:3]...)}
		}, func(run [3][]string) [][]int64 { return equalWant(run[0][:3], y, run[2][:3]) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, g := gatedSession(t, tc.p)
			// The first run holds the engine while the others queue: they
			// go as one job.
			results := holdAndQueue(t, s, g, 3, func(k int) []*onnx.Tensor { return tc.ins(stringRuns[k%len(stringRuns)]) })
			shared := 0
			for range 4 {
				o := <-results
				if o.err != nil {
					t.Fatalf("run %d: %v", o.n, o.err)
				}
				if o.res.Batch == 3 {
					shared++
				}
				checkEqualOutputs(t, "run "+string(rune('0'+o.n)), o.res, tc.want(stringRuns[o.n%len(stringRuns)]))
			}
			if shared != 3 {
				t.Errorf("%d runs in a job of 3, want 3", shared)
			}
		})
	}
}

// TestEqualStringsRefused checks that STRING values are read only by
// Equal of two of them, never a graph output, and that a run given a
// tensor of the wrong type, or more distinct strings than fp32 ids hold,
// fails with ErrInput.
func TestEqualStringsRefused(t *testing.T) {
	str := func(name string) onnx.ValueInfo { return typed(vinfo(name, 3), onnx.String) }
	for _, tc := range []struct {
		name  string
		nodes []*onnx.Node
		ins   []onnx.ValueInfo
		outs  []string
		want  string
	}{
		{"Identity", []*onnx.Node{{OpType: "Identity", Inputs: []string{"x"}, Outputs: []string{"y"}}, {OpType: "Equal", Inputs: []string{"y", "x"}, Outputs: []string{"e"}}},
			[]onnx.ValueInfo{str("x")}, []string{"e"}, `STRING "x" [3] read by Identity`},
		{"Less", []*onnx.Node{{OpType: "Less", Inputs: []string{"x", "w"}, Outputs: []string{"e"}}},
			[]onnx.ValueInfo{str("x"), str("w")}, []string{"e"}, `STRING "x" [3] read by Less`},
		{"output", []*onnx.Node{{OpType: "Equal", Inputs: []string{"x", "w"}, Outputs: []string{"e"}}},
			[]onnx.ValueInfo{str("x"), str("w")}, []string{"e", "x"}, `graph output "x" is STRING`},
		{"FLOAT operand", []*onnx.Node{{OpType: "Equal", Inputs: []string{"f", "x"}, Outputs: []string{"e"}}},
			[]onnx.ValueInfo{str("x"), vinfo("f", 3)}, []string{"e"}, "Equal of FLOAT and STRING"},
		{"constant", []*onnx.Node{{OpType: "Concat", Inputs: []string{"k", "k"}, Outputs: []string{"c"}, Attrs: []*onnx.Attribute{attrInt("axis", 0)}},
			{OpType: "Equal", Inputs: []string{"c", "x"}, Outputs: []string{"e"}}},
			[]onnx.ValueInfo{typed(vinfo("x", 6), onnx.String)}, []string{"e"}, `STRING "k" [3] read by Concat`},
	} {
		g := &onnx.Graph{Initializers: []*onnx.Tensor{strs("k", []int64{3}, "a", "b", "c")}, Nodes: tc.nodes, Inputs: tc.ins}
		for _, o := range tc.outs {
			g.Outputs = append(g.Outputs, typed(vinfo(o, 3), onnx.Bool))
		}
		_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 19}}, Graph: g})
		if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrUnsupported saying %q", tc.name, err, tc.want)
		}
	}

	p := compileThroughFile(t, 19, equalStringsGraph(2, nil))
	for _, bad := range []func(q *alidnn.Program){
		func(q *alidnn.Program) { q.Strings = append(q.Strings, q.Strings[0]) },
		func(q *alidnn.Program) { q.Inputs[0].Elem = "int8" },
		func(q *alidnn.Program) { q.Outputs[0].Type = onnx.String },
	} {
		q := *p
		q.Strings, q.Inputs, q.Outputs = slices.Clone(p.Strings), slices.Clone(p.Inputs), slices.Clone(p.Outputs)
		bad(&q)
		var buf bytes.Buffer
		if _, err := q.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		if _, err := alidnn.ReadProgram(&buf); !errors.Is(err, alidnn.ErrProgram) {
			t.Errorf("a program file with a duplicate string, a STRING input staged as int8 or a STRING output: %v, want ErrProgram", err)
		}
	}
	s, err := alidnn.Load(context.Background(), local(t), p)
	if err != nil {
		t.Fatal(err)
	}
	ins := stringInputs(stringRuns[0], []int64{2, 3})
	ins[0] = ramp("x", []int64{2, 3}, 1)
	if _, err := s.Run(context.Background(), ins...); !errors.Is(err, alidnn.ErrInput) || !strings.Contains(err.Error(), `"x" is FLOAT, want STRING`) {
		t.Errorf("a FLOAT tensor for a STRING input: %v, want ErrInput", err)
	}
	f := &onnx.Graph{Nodes: []*onnx.Node{{OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"}}},
		Inputs: []onnx.ValueInfo{vinfo("x", 3)}, Outputs: []onnx.ValueInfo{vinfo("y", 3)}}
	fs, err := alidnn.Load(context.Background(), local(t), compileThroughFile(t, 13, f))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Run(context.Background(), strs("x", []int64{3}, "a", "b", "c")); !errors.Is(err, alidnn.ErrInput) || !strings.Contains(err.Error(), `"x" is STRING, want FLOAT`) {
		t.Errorf("a STRING tensor for a FLOAT input: %v, want ErrInput", err)
	}

	// A dictionary of 3: seeded with one constant, it gives a run two more
	// strings and fails at the third.
	seed := [][]byte{[]byte("k")}
	if got, err := alidnn.StageStrings(3, seed, strs("x", []int64{5}, "b", "k", "c", "b", "c")); err != nil || !slices.Equal(got, []float32{1, 0, 2, 1, 2}) {
		t.Errorf("ids of b k c b c seeded with k: %v (%v), want [1 0 2 1 2]", got, err)
	}
	if _, err := alidnn.StageStrings(3, seed, strs("x", []int64{3}, "b", "c", "d")); !errors.Is(err, alidnn.ErrInput) || !strings.Contains(err.Error(), "more than 3 distinct strings") {
		t.Errorf("a fourth distinct string in a dictionary of 3: %v, want ErrInput", err)
	}
}
