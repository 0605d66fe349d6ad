package alidnn_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

func ints64(name string, typ onnx.DataType, dims []int64, v ...int64) *onnx.Tensor {
	t, err := onnx.NewInt(name, typ, dims, v)
	if err != nil {
		panic(err)
	}
	return t
}

// embeddingModel: ids INT64 [2,3] pick rows of a [10,20] table, then Relu
// and Where(cond [3,1], −Inf, ·) — the computed operand second; a BOOL mask
// [2,3] becomes (1 − float(mask))·−5.
func embeddingModel() (*onnx.Model, []float32) {
	table := make([]float32, 10*20)
	for k := range table {
		table[k] = float32(k%23) - 7.5
	}
	x := vinfo("ids", 2, 3)
	x.ElemType = onnx.Int64
	m := vinfo("mask", 2, 3)
	m.ElemType = onnx.Bool
	node := func(op string, ins []string, out string, attrs ...*onnx.Attribute) *onnx.Node {
		return &onnx.Node{OpType: op, Name: out, Inputs: ins, Outputs: []string{out}, Attrs: attrs}
	}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{onnx.NewFloat32("table", []int64{10, 20}, table),
			ints64("cond", onnx.Bool, []int64{3, 1}, 1, 0, 1), onnx.NewFloat32("ninf", nil, []float32{float32(math.Inf(-1))}),
			onnx.NewFloat32("one", nil, []float32{1}), onnx.NewFloat32("k", nil, []float32{-5})},
		Nodes: []*onnx.Node{
			node("Gather", []string{"table", "ids"}, "e"),
			node("Relu", []string{"e"}, "r"),
			node("Where", []string{"cond", "ninf", "r"}, "y"),
			node("Cast", []string{"mask"}, "mf", &onnx.Attribute{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}),
			node("Sub", []string{"one", "mf"}, "mi"),
			node("Mul", []string{"mi", "k"}, "mm"),
		},
		Inputs:  []onnx.ValueInfo{x, m},
		Outputs: []onnx.ValueInfo{vinfo("y", 2, 3, 20), vinfo("mm", 2, 3)},
	}
	return &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g}, table
}

var (
	embIDs  = []int64{3, 0, 9, -1, 7, 3}
	embMask = []int64{1, 1, 0, 1, 0, 0}
)

func embeddingInputs() []*onnx.Tensor {
	return []*onnx.Tensor{ints64("ids", onnx.Int64, []int64{2, 3}, embIDs...), ints64("mask", onnx.Bool, []int64{2, 3}, embMask...)}
}

// checkEmbedding compares a run's outputs with the host's, exactly: rows
// are copied, Where selects, and the mask arithmetic is on small integers.
func checkEmbedding(t *testing.T, res *alidnn.Result, table []float32) {
	t.Helper()
	y, err := res.Outputs[0].Float32s()
	if err != nil {
		t.Fatal(err)
	}
	for k, id := range embIDs {
		if id < 0 {
			id += 10
		}
		for j := range 20 {
			// cond [3,1] is true for the first and last token of a
			// sequence, which take −Inf; the middle one keeps r.
			want := float32(math.Inf(-1))
			if k%3 == 1 {
				want = max(table[int(id)*20+j], 0)
			}
			if got := y[k*20+j]; got != want {
				t.Fatalf("y[%d][%d] = %v, want %v", k, j, got, want)
			}
		}
	}
	mm, err := res.Outputs[1].Float32s()
	if err != nil {
		t.Fatal(err)
	}
	for k, m := range embMask {
		if want := float32(1-m) * -5; mm[k] != want {
			t.Fatalf("mask output %d = %v, want %v", k, mm[k], want)
		}
	}
}

// embeddingProgram compiles embeddingModel; FuzzReadProgram seeds with it.
func embeddingProgram(t testing.TB) *alidnn.Program {
	m, _ := embeddingModel()
	p, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEmbeddingGather runs INT64 ids and a BOOL mask through the compiled
// program, and through its file form, which keeps the table.
func TestEmbeddingGather(t *testing.T) {
	_, table := embeddingModel()
	p := embeddingProgram(t)
	if len(p.Inputs) != 2 || len(p.Derived) != 1 || p.Derived[0].Gather == nil {
		t.Fatalf("inputs %d, derived %d: want the two graph inputs and one gathered tensor", len(p.Inputs), len(p.Derived))
	}
	q := throughFile(t, p)
	ctx := context.Background()
	for _, prog := range []*alidnn.Program{p, q} {
		s, err := alidnn.Load(ctx, local(t), prog)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Run(ctx, embeddingInputs()...)
		if err != nil {
			t.Fatal(err)
		}
		checkEmbedding(t, res, table)
	}
	// INT32 ids, as TensorFlow exporters write them, gather the same rows.
	m32, _ := embeddingModel()
	m32.Graph.Inputs[0].ElemType = onnx.Int32
	p32, err := alidnn.Compile(m32)
	if err != nil {
		t.Fatal(err)
	}
	s32, err := alidnn.Load(ctx, local(t), p32)
	if err != nil {
		t.Fatal(err)
	}
	ins := embeddingInputs()
	ins[0] = ints64("ids", onnx.Int32, []int64{2, 3}, embIDs...)
	res, err := s32.Run(ctx, ins...)
	if err != nil {
		t.Fatal(err)
	}
	checkEmbedding(t, res, table)
	// A table beyond the constants is refused as the file is read.
	p.Derived[0].Gather.Rows = 1 << 40
	var buf bytes.Buffer
	if _, err := p.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := alidnn.ReadProgram(bytes.NewReader(buf.Bytes())); !errors.Is(err, alidnn.ErrProgram) {
		t.Fatalf("oversized table: %v, want ErrProgram", err)
	}
}

// The operators an integer input may not reach, and the Gathers and
// Wheres the engine cannot map, are refused naming why.
func TestIntegerInputRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(g *onnx.Graph)
		want string
	}{
		{"arithmetic on ids", func(g *onnx.Graph) {
			g.Nodes = append(g.Nodes, &onnx.Node{OpType: "Add", Name: "bad", Inputs: []string{"ids", "ids"}, Outputs: []string{"z"}})
			g.Outputs = append(g.Outputs, vinfo("z", 2, 3))
		}, "through a Cast to FLOAT"},
		{"gather of a computed table", func(g *onnx.Graph) {
			g.Nodes = append(g.Nodes, &onnx.Node{OpType: "Gather", Name: "g2", Inputs: []string{"mm", "ids"}, Outputs: []string{"g2"}})
			g.Outputs = append(g.Outputs, vinfo("g2", 2, 3, 3))
		}, "constant table"},
		{"where with a computed condition", func(g *onnx.Graph) {
			g.Nodes[2].Inputs = []string{"mf", "ninf", "r"}
			g.Nodes[2], g.Nodes[3] = g.Nodes[3], g.Nodes[2]
		}, "only a BOOL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, _ := embeddingModel()
			c.edit(m.Graph)
			_, err := alidnn.Compile(m)
			if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrUnsupported saying %q", err, c.want)
			}
		})
	}
}

// TestWhereComputedCondition applies a padding mask [N,1,1,S], a BOOL
// input, to scores [N,H,S,S] (a MatMul's, also an output) with Where,
// picking the scores (finite fill) and the fill (−Inf, by min), exactly;
// S = 20 spans two lane blocks.
func TestWhereComputedCondition(t *testing.T) {
	const N, H, S = 2, 2, 20
	m := vinfo("mask", N, S)
	m.ElemType = onnx.Bool
	node := func(op string, ins []string, out string) *onnx.Node {
		return &onnx.Node{OpType: op, Name: out, Inputs: ins, Outputs: []string{out}}
	}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{ints64("axes", onnx.Int64, []int64{2}, 1, 2), ramp("w", []int64{16, S}, 0.125),
			onnx.NewFloat32("fill", nil, []float32{-1e9}), onnx.NewFloat32("ninf", nil, []float32{float32(math.Inf(-1))})},
		Nodes: []*onnx.Node{
			node("MatMul", []string{"s", "w"}, "r"),
			node("Unsqueeze", []string{"mask", "axes"}, "m4"),
			node("Where", []string{"m4", "r", "fill"}, "y1"),
			node("Where", []string{"m4", "ninf", "r"}, "y2"),
		},
		Inputs:  []onnx.ValueInfo{vinfo("s", N, H, S, 16), m},
		Outputs: []onnx.ValueInfo{vinfo("y1", N, H, S, S), vinfo("y2", N, H, S, S), vinfo("r", N, H, S, S)},
	}
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	mask := make([]int64, N*S)
	for k := range mask {
		mask[k] = int64(k*7%5) % 2
	}
	x := ramp("s", []int64{N, H, S, 16}, 0.75)
	ctx := context.Background()
	s, err := alidnn.Load(ctx, local(t), p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, x, ints64("mask", onnx.Bool, []int64{N, S}, mask...))
	if err != nil {
		t.Fatal(err)
	}
	y1, _ := res.Outputs[0].Float32s()
	y2, _ := res.Outputs[1].Float32s()
	rs, _ := res.Outputs[2].Float32s()
	for k, r := range rs {
		on := mask[k/(H*S*S)*S+k%S] != 0
		w1, w2 := float32(-1e9), r
		if on {
			w1, w2 = r, float32(math.Inf(-1))
		}
		if y1[k] != w1 || y2[k] != w2 {
			t.Fatalf("element %d (mask %v): %v and %v, want %v and %v", k, on, y1[k], y2[k], w1, w2)
		}
	}
}

// TestCompareIntegerInput compares INT64 ids with constants — Equal,
// Less, GreaterOrEqual with the constant first and a fraction, Not — and
// masks scores [N,1,S,S] by input_ids != 0 with Where, all exactly.
func TestCompareIntegerInput(t *testing.T) {
	const N, S = 2, 20
	ids := vinfo("ids", N, S)
	ids.ElemType = onnx.Int64
	node := func(op string, ins []string, out string, attrs ...*onnx.Attribute) *onnx.Node {
		return &onnx.Node{OpType: op, Name: out, Inputs: ins, Outputs: []string{out}, Attrs: attrs}
	}
	toF := &onnx.Attribute{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{ints64("axes", onnx.Int64, []int64{2}, 1, 2), ramp("w", []int64{16, S}, 0.125),
			ints64("zero", onnx.Int64, nil, 0), ints64("five", onnx.Int64, nil, 5), onnx.NewFloat32("frac", nil, []float32{2.5}),
			onnx.NewFloat32("fill", nil, []float32{-1e9})},
		Nodes: []*onnx.Node{
			node("Equal", []string{"ids", "zero"}, "eq"), node("Cast", []string{"eq"}, "eqf", toF),
			node("Less", []string{"ids", "five"}, "lt"), node("Cast", []string{"lt"}, "ltf", toF),
			node("GreaterOrEqual", []string{"frac", "ids"}, "ge"), node("Cast", []string{"ge"}, "gef", toF),
			node("Not", []string{"eq"}, "keep"), node("Unsqueeze", []string{"keep", "axes"}, "keep4"),
			node("MatMul", []string{"s", "w"}, "r"), node("Where", []string{"keep4", "r", "fill"}, "y"),
			node("Identity", []string{"ids"}, "ids_out"),
		},
		Inputs: []onnx.ValueInfo{vinfo("s", N, 1, S, 16), ids},
		Outputs: []onnx.ValueInfo{vinfo("eqf", N, S), vinfo("ltf", N, S), vinfo("gef", N, S), vinfo("y", N, 1, S, S), vinfo("r", N, 1, S, S),
			{Name: "eq", ElemType: onnx.Bool}, {Name: "ids_out", ElemType: onnx.Int64}},
	}
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	iv := make([]int64, N*S)
	for k := range iv {
		iv[k] = int64(k*13%9) - 2 // −2 … 6, zeros among them
	}
	ctx := context.Background()
	s, err := alidnn.Load(ctx, local(t), p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, ramp("s", []int64{N, 1, S, 16}, 0.75), ints64("ids", onnx.Int64, []int64{N, S}, iv...))
	if err != nil {
		t.Fatal(err)
	}
	b := func(v bool) float32 {
		if v {
			return 1
		}
		return 0
	}
	var outs [5][]float32
	for k := range outs {
		outs[k], _ = res.Outputs[k].Float32s()
	}
	for k, x := range iv {
		if w := [3]float32{b(x == 0), b(x < 5), b(2.5 >= float64(x))}; outs[0][k] != w[0] || outs[1][k] != w[1] || outs[2][k] != w[2] {
			t.Fatalf("id %d: =0 <5 ≤2.5 give %v %v %v, want %v", x, outs[0][k], outs[1][k], outs[2][k], w)
		}
	}
	// A BOOL result and an INT64 input read back as graph outputs keep
	// their types.
	eq, err := res.Outputs[5].Int64s()
	if err != nil || res.Outputs[5].DataType != onnx.Bool {
		t.Fatalf("eq output %v: %v", res.Outputs[5].DataType, err)
	}
	back, err := res.Outputs[6].Int64s()
	if err != nil || res.Outputs[6].DataType != onnx.Int64 {
		t.Fatalf("ids output %v: %v", res.Outputs[6].DataType, err)
	}
	for k, x := range iv {
		if eq[k] != int64(b(x == 0)) || back[k] != x {
			t.Fatalf("id %d: eq %d, read back %d", x, eq[k], back[k])
		}
	}
	for k, r := range outs[4] {
		want := r
		if iv[k/(S*S)*S+k%S] == 0 {
			want = -1e9
		}
		if outs[3][k] != want {
			t.Fatalf("y[%d] = %v, want %v", k, outs[3][k], want)
		}
	}
}

// TestGatherComputed takes the first token of computed hidden states
// [N,S,H] (BERT's pooler input, Gather(h, 0, axis=1)) and two lanes of
// them by a list (axis 2), exactly, against the engine's own h.
func TestGatherComputed(t *testing.T) {
	const N, S, K, H = 2, 5, 20, 32
	node := func(op string, ins []string, out string, axis int64) *onnx.Node {
		return &onnx.Node{OpType: op, Name: out, Inputs: ins, Outputs: []string{out},
			Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: axis}}}
	}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{ramp("w", []int64{K, H}, 0.125), ints64("first", onnx.Int64, nil, 0), ints64("lanes", onnx.Int64, []int64{2}, 3, -1)},
		Nodes: []*onnx.Node{
			{OpType: "MatMul", Name: "h", Inputs: []string{"x", "w"}, Outputs: []string{"h"}},
			node("Gather", []string{"h", "first"}, "cls", 1),
			node("Gather", []string{"h", "lanes"}, "two", -1),
		},
		Inputs:  []onnx.ValueInfo{vinfo("x", N, S, K)},
		Outputs: []onnx.ValueInfo{vinfo("cls", N, H), vinfo("two", N, S, 2), vinfo("h", N, S, H)},
	}
	res := runGraphResult(t, g, ramp("x", []int64{N, S, K}, 0.5))
	cls, _ := res.Outputs[0].Float32s()
	two, _ := res.Outputs[1].Float32s()
	h, _ := res.Outputs[2].Float32s()
	for b := range N {
		for j := range H {
			if got, want := cls[b*H+j], h[b*S*H+j]; got != want {
				t.Fatalf("cls[%d][%d] = %v, want %v", b, j, got, want)
			}
		}
		for i := range S {
			for k, lane := range []int{3, H - 1} {
				if got, want := two[(b*S+i)*2+k], h[(b*S+i)*H+lane]; got != want {
					t.Fatalf("two[%d][%d][%d] = %v, want %v", b, i, k, got, want)
				}
			}
		}
	}
}

// TestEmbeddingConcurrent runs the gathering program from many goroutines
// through a session that coalesces runs into jobs of several lanes: each
// run gets the rows of its own ids.
func TestEmbeddingConcurrent(t *testing.T) {
	_, table := embeddingModel()
	ctx := context.Background()
	s, err := alidnn.Open(ctx, alidnn.NewLocal(local(t)), embeddingProgram(t), alidnn.WithBatch(4))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	errs := make(chan error, 12)
	for g := range 12 {
		go func() {
			ids := []int64{int64(g % 10), int64((g + 3) % 10), 9, int64(-1 - g%10), 0, int64(g % 7)}
			ins := embeddingInputs()
			ins[0] = ints64("ids", onnx.Int64, []int64{2, 3}, ids...)
			res, err := s.Run(ctx, ins...)
			if err == nil {
				var y []float32
				if y, err = res.Outputs[0].Float32s(); err == nil {
					for k, id := range ids {
						if k%3 != 1 {
							continue // Where's −Inf
						}
						if id < 0 {
							id += 10
						}
						for j := range 20 {
							if want := max(table[int(id)*20+j], 0); y[k*20+j] != want {
								err = fmt.Errorf("run %d: y[%d][%d] = %v, want %v", g, k, j, y[k*20+j], want)
								break
							}
						}
					}
				}
			}
			errs <- err
		}()
	}
	for range 12 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
