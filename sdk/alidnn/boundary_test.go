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

func castTo(in, out string, to onnx.DataType, extra ...*onnx.Attribute) *onnx.Node {
	return &onnx.Node{OpType: "Cast", Inputs: []string{in}, Outputs: []string{out},
		Attrs: append([]*onnx.Attribute{attrInt("to", int64(to))}, extra...)}
}

func typed(v onnx.ValueInfo, t onnx.DataType) onnx.ValueInfo {
	v.ElemType = t
	return v
}

// TestReadBackCast computes x·3 on the engine and casts it at the end of
// the graph to FLOAT16, float8 (saturating and not) and INT4: the host's
// conversions give what ONNX's Cast gives for the fp32 product (round to
// nearest even; float8 beyond 448 saturated or NaN; truncation toward zero
// wrapped around INT4's range).
func TestReadBackCast(t *testing.T) {
	x := []float32{0.1, -1.7, 200, 1000, 5.5, -0.0001, 2.6, -3}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{onnx.NewFloat32("three", nil, []float32{3})},
		Nodes: []*onnx.Node{
			{OpType: "Mul", Inputs: []string{"x", "three"}, Outputs: []string{"y"}},
			castTo("y", "h", onnx.Float16), castTo("y", "f8", onnx.Float8E4M3FN),
			castTo("y", "f8n", onnx.Float8E4M3FN, attrInt("saturate", 0)), castTo("y", "i4", onnx.Int4),
			castTo("y", "e8", onnx.Float8E8M0, &onnx.Attribute{Name: "round_mode", Type: onnx.AttrString, S: []byte("down")}),
		},
		Inputs: []onnx.ValueInfo{vinfo("x", 8)},
		Outputs: []onnx.ValueInfo{typed(vinfo("h", 8), onnx.Float16), typed(vinfo("f8", 8), onnx.Float8E4M3FN),
			typed(vinfo("f8n", 8), onnx.Float8E4M3FN), typed(vinfo("i4", 8), onnx.Int4), typed(vinfo("e8", 8), onnx.Float8E8M0)},
	}
	res := runGraphResult(t, g, onnx.NewFloat32("x", []int64{8}, x))
	y := make([]float32, len(x))
	for k, v := range x {
		y[k] = v * 3
	}
	for k, dt := range []onnx.DataType{onnx.Float16, onnx.Float8E4M3FN, onnx.Float8E4M3FN} {
		want, err := onnx.NewFloat("", dt, []int64{8}, y, k != 2)
		if err != nil {
			t.Fatal(err)
		}
		got := res.Outputs[k]
		if got.DataType != dt || string(got.RawData()) != string(want.RawData()) {
			gf, _ := got.Float32s()
			wf, _ := want.Float32s()
			t.Errorf("output %d: %v %v, want %v %v", k, got.DataType, gf, dt, wf)
		}
	}
	f8n, _ := res.Outputs[2].Float32s()
	if !math.IsNaN(float64(f8n[3])) { // 3000 is beyond E4M3FN's 448
		t.Errorf("unsaturated 3000 is %v, want NaN", f8n[3])
	}
	// Rounded down to a power of two, the sign dropped: 0.3 → 0.25,
	// −5.1 → 4, 600 → 512, 3000 → 2048, 16.5 → 16, −0.0003 → 2⁻¹², 7.8 → 4, −9 → 8.
	e8, _ := res.Outputs[4].Float32s()
	for k, want := range []float32{0.25, 4, 512, 2048, 16, 0x1p-12, 4, 8} {
		if e8[k] != want {
			t.Errorf("FLOAT8E8M0 rounded down: %v", e8)
			break
		}
	}
	i4, err := res.Outputs[3].Int64s()
	if err != nil {
		t.Fatal(err)
	}
	// 0.3 → 0; −5.1 → −5; 600 wraps to 600−38·16 = −8; 3000 to 3000−188·16 = −8;
	// 16.5 → 16 → 0; −0.0003 → 0; 7.8 → 7; −9 → 7.
	want := []int64{0, -5, -8, -8, 0, 0, 7, 7}
	for k := range want {
		if i4[k] != want[k] {
			t.Errorf("INT4 %v", i4)
			break
		}
	}
}

// TestBoundaryRefusals: a Cast to FLOAT16 read on by the engine would not
// be rounded; arithmetic on a FLOAT16 input would round once instead of
// after each operator; a DOUBLE input read by anything but a Cast to FLOAT
// or to a narrower float type (see TestHostCastOfDouble) is not staged,
// here a Cast to INT32 (truncating a value fp32 has rounded). Each is
// refused naming why.
func TestBoundaryRefusals(t *testing.T) {
	half := onnx.NewFloat32("half", nil, []float32{0.5})
	for _, tc := range []struct {
		name string
		g    *onnx.Graph
		want string
	}{
		{"cast in the middle", &onnx.Graph{
			Initializers: []*onnx.Tensor{half},
			Nodes:        []*onnx.Node{castTo("x", "h", onnx.Float16), castTo("h", "y", onnx.Float)},
			Inputs:       []onnx.ValueInfo{vinfo("x", 4)}, Outputs: []onnx.ValueInfo{vinfo("y", 4)},
		}, "Cast from FLOAT to FLOAT16 in the middle of the graph"},
		{"arithmetic on FLOAT16", &onnx.Graph{
			Initializers: []*onnx.Tensor{half},
			Nodes:        []*onnx.Node{{OpType: "Mul", Inputs: []string{"x", "half"}, Outputs: []string{"y"}}},
			Inputs:       []onnx.ValueInfo{typed(vinfo("x", 4), onnx.Float16)}, Outputs: []onnx.ValueInfo{typed(vinfo("y", 4), onnx.Float16)},
		}, `input 0 ("x") is FLOAT16, which the engine holds as fp32`},
		{"DOUBLE to INT32", &onnx.Graph{
			Nodes:  []*onnx.Node{castTo("x", "y", onnx.Int32)},
			Inputs: []onnx.ValueInfo{typed(vinfo("x", 4), onnx.Double)}, Outputs: []onnx.ValueInfo{typed(vinfo("y", 4), onnx.Int32)},
		}, `input "x": element type DOUBLE, read by Cast`},
		{"INT16 plus a constant", &onnx.Graph{
			Initializers: []*onnx.Tensor{ints64("one", onnx.Int16, nil, 1)},
			Nodes:        []*onnx.Node{{OpType: "Add", Inputs: []string{"x", "one"}, Outputs: []string{"y"}}},
			Inputs:       []onnx.ValueInfo{typed(vinfo("x", 4), onnx.Int16)}, Outputs: []onnx.ValueInfo{typed(vinfo("y", 4), onnx.Int16)},
		}, `integer arithmetic runs on two integer graph inputs of one type`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 21}}, Graph: tc.g})
			if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestStagedInputs: FLOAT16 and INT4 inputs staged as fp32, cast to FLOAT
// on the engine and multiplied there, and a DOUBLE input rounded to fp32 by
// the Cast reading it (1 + 2⁻²⁵ + 2⁻⁴⁰ to 1, −1e300 to −∞).
func TestStagedInputs(t *testing.T) {
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{onnx.NewFloat32("two", nil, []float32{2})},
		Nodes: []*onnx.Node{
			castTo("h", "hf", onnx.Float), castTo("i", "if", onnx.Float), castTo("d", "df", onnx.Float),
			{OpType: "Mul", Inputs: []string{"hf", "two"}, Outputs: []string{"h2"}},
			{OpType: "Mul", Inputs: []string{"if", "two"}, Outputs: []string{"i2"}},
		},
		Inputs:  []onnx.ValueInfo{typed(vinfo("h", 3), onnx.Float16), typed(vinfo("i", 3), onnx.Int4), typed(vinfo("d", 3), onnx.Double)},
		Outputs: []onnx.ValueInfo{vinfo("h2", 3), vinfo("i2", 3), vinfo("df", 3)},
	}
	h, _ := onnx.NewFloat("h", onnx.Float16, []int64{3}, []float32{0.1, -65504, 3.5}, false)
	i, _ := onnx.NewInt("i", onnx.Int4, []int64{3}, []int64{-8, 7, 1})
	d, _ := onnx.NewRaw("d", onnx.Double, []int64{3}, f64raw(0.1, 1+1.0/(1<<25)+1.0/(1<<40), -1e300))
	res := runGraphResult(t, g, h, i, d)
	hv, _ := h.Float32s()
	for k, want := range [][]float32{{hv[0] * 2, hv[1] * 2, 7}, {-16, 14, 2}, {0.1, 1, float32(math.Inf(-1))}} {
		got, err := res.Outputs[k].Float32s()
		if err != nil {
			t.Fatal(err)
		}
		for j := range want {
			if got[j] != want[j] {
				t.Errorf("output %d: %v, want %v", k, got, want)
				break
			}
		}
	}
}

func f64raw(v ...float64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		u := math.Float64bits(x)
		for range 8 {
			b = append(b, byte(u))
			u >>= 8
		}
	}
	return b
}

// TestReduceStagedInt: ReduceMax of a BOOL mask over its last axis (the
// lanes) and ReduceMin of an INT16 input over its first run on the staged
// fp32 values and come back in the inputs' types.
func TestReduceStagedInt(t *testing.T) {
	g := &onnx.Graph{
		Nodes: []*onnx.Node{
			{OpType: "ReduceMax", Inputs: []string{"m"}, Outputs: []string{"any"}, Attrs: []*onnx.Attribute{{Name: "axes", Type: onnx.AttrInts, Ints: []int64{1}}}},
			{OpType: "ReduceMin", Inputs: []string{"i"}, Outputs: []string{"lo"}, Attrs: []*onnx.Attribute{{Name: "axes", Type: onnx.AttrInts, Ints: []int64{0}}, attrInt("keepdims", 0)}},
		},
		Inputs:  []onnx.ValueInfo{typed(vinfo("m", 3, 20), onnx.Bool), typed(vinfo("i", 2, 5), onnx.Int16)},
		Outputs: []onnx.ValueInfo{typed(vinfo("any", 3, 1), onnx.Bool), typed(vinfo("lo", 5), onnx.Int16)},
	}
	m := make([]int64, 60)
	m[5], m[59] = 1, 1 // rows 0 and 2 have a true
	res := runGraphResult(t, g, ints64("m", onnx.Bool, []int64{3, 20}, m...),
		ints64("i", onnx.Int16, []int64{2, 5}, -32768, 7, 0, 100, -1, 32767, -7, 0, 99, -2))
	for k, want := range [][]int64{{1, 0, 1}, {-32768, -7, 0, 99, -2}} {
		got, err := res.Outputs[k].Int64s()
		if err != nil {
			t.Fatal(err)
		}
		for j := range want {
			if got[j] != want[j] {
				t.Errorf("output %d (%v): %v, want %v", k, res.Outputs[k].DataType, got, want)
				break
			}
		}
	}
}

// TestWhereInts picks between two INT64 inputs by a BOOL input, values up
// to ±2²⁴, and returns INT64.
func TestWhereInts(t *testing.T) {
	g := &onnx.Graph{
		Nodes:   []*onnx.Node{{OpType: "Where", Inputs: []string{"c", "x", "y"}, Outputs: []string{"w"}}},
		Inputs:  []onnx.ValueInfo{typed(vinfo("c", 2, 3), onnx.Bool), typed(vinfo("x", 2, 3), onnx.Int64), typed(vinfo("y", 2, 3), onnx.Int64)},
		Outputs: []onnx.ValueInfo{typed(vinfo("w", 2, 3), onnx.Int64)},
	}
	res := runGraphResult(t, g, ints64("c", onnx.Bool, []int64{2, 3}, 1, 0, 1, 0, 0, 1),
		ints64("x", onnx.Int64, []int64{2, 3}, 1<<24, 2, -3, 4, 5, -(1<<24)),
		ints64("y", onnx.Int64, []int64{2, 3}, -1, 1<<23+1, 30, -40, 0, 60))
	got, err := res.Outputs[0].Int64s()
	if err != nil || res.Outputs[0].DataType != onnx.Int64 {
		t.Fatalf("%v %v", res.Outputs[0].DataType, err)
	}
	for k, want := range []int64{1 << 24, 1<<23 + 1, -3, -40, 0, -(1 << 24)} {
		if got[k] != want {
			t.Fatalf("%v, want element %d = %d", got, k, want)
		}
	}
}

// TestStagedForBatch: a program compiled for 2 samples with a FLOAT16 input
// and a FLOAT16 output serves one-sample Runs, each converted and split
// back in its type.
func TestStagedForBatch(t *testing.T) {
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{onnx.NewFloat32("three", nil, []float32{3})},
		Nodes: []*onnx.Node{castTo("h", "f", onnx.Float), {OpType: "Mul", Inputs: []string{"f", "three"}, Outputs: []string{"y"}},
			castTo("y", "o", onnx.Float16)},
		Inputs:  []onnx.ValueInfo{typed(onnx.ValueInfo{Name: "h", Dims: []onnx.Dim{{Param: "N"}, {Value: 3}}}, onnx.Float16)},
		Outputs: []onnx.ValueInfo{typed(onnx.ValueInfo{Name: "o", Dims: []onnx.Dim{{Param: "N"}, {Value: 3}}}, onnx.Float16)},
	}
	p, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g}, alidnn.ForBatch(2))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := alidnn.Open(ctx, alidnn.NewLocal(local(t)), p, alidnn.WithBatch(2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	x := []float32{0.1, -2.5, 1000}
	h, _ := onnx.NewFloat("h", onnx.Float16, []int64{1, 3}, x, false)
	res, err := s.Run(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	hv, _ := h.Float32s()
	y := []float32{hv[0] * 3, hv[1] * 3, hv[2] * 3}
	want, _ := onnx.NewFloat("o", onnx.Float16, []int64{1, 3}, y, false)
	if o := res.Outputs[0]; o.DataType != onnx.Float16 || string(o.RawData()) != string(want.RawData()) {
		t.Errorf("output %v %v % x, want % x", o.DataType, o.Dims, o.RawData(), want.RawData())
	}
}

// TestReadBackCastInt8: in a model quantised to int8, Casts to FLOAT16
// and to INT8 ending the graph give the fp32 model's values (within a
// quantisation step).
func TestReadBackCastInt8(t *testing.T) {
	w := ramp("w", []int64{16, 16, 1, 1}, 0.2)
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{w},
		Nodes: []*onnx.Node{{OpType: "Conv", Inputs: []string{"x", "w"}, Outputs: []string{"c"}},
			{OpType: "Relu", Inputs: []string{"c"}, Outputs: []string{"r"}},
			castTo("r", "h", onnx.Float16), castTo("r", "i", onnx.Int8)},
		Inputs:  []onnx.ValueInfo{vinfo("x", 1, 16, 4, 4)},
		Outputs: []onnx.ValueInfo{typed(vinfo("h", 1, 16, 4, 4), onnx.Float16), typed(vinfo("i", 1, 16, 4, 4), onnx.Int8)},
	}
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g}
	x := ramp("x", []int64{1, 16, 4, 4}, 0.5)
	p, err := alidnn.Quantize(context.Background(), local(t), m, [][]*onnx.Tensor{{x}})
	if err != nil {
		t.Fatal(err)
	}
	res := runResult(t, p, x)
	ref := runGraph(t, &onnx.Graph{Initializers: g.Initializers, Nodes: g.Nodes[:2], Inputs: g.Inputs, Outputs: []onnx.ValueInfo{vinfo("r", 1, 16, 4, 4)}}, x)
	h, _ := res.Outputs[0].Float32s()
	i, _ := res.Outputs[1].Int64s()
	top := float32(0)
	for _, v := range ref {
		top = max(top, v)
	}
	for k, v := range ref {
		if d := h[k] - v; d > top/100 || d < -top/100 {
			t.Fatalf("FLOAT16 element %d: %v, want about %v (max %v)", k, h[k], v, top)
		}
		if d := float32(i[k]) - float32(int64(v)); d > top/100+1 || d < -top/100-1 {
			t.Fatalf("INT8 element %d: %d, want about %v", k, i[k], v)
		}
	}
}

// TestWhereInt16 picks between two INT16 inputs, returning INT16.
func TestWhereInt16(t *testing.T) {
	g := &onnx.Graph{
		Nodes:   []*onnx.Node{{OpType: "Where", Inputs: []string{"c", "x", "y"}, Outputs: []string{"w"}}},
		Inputs:  []onnx.ValueInfo{typed(vinfo("c", 4), onnx.Bool), typed(vinfo("x", 4), onnx.Int16), typed(vinfo("y", 4), onnx.Int16)},
		Outputs: []onnx.ValueInfo{typed(vinfo("w", 4), onnx.Int16)},
	}
	res := runGraphResult(t, g, ints64("c", onnx.Bool, []int64{4}, 0, 1, 1, 0),
		ints64("x", onnx.Int16, []int64{4}, 1, -32768, 32767, 4), ints64("y", onnx.Int16, []int64{4}, -5, 6, 7, 32767))
	got, err := res.Outputs[0].Int64s()
	if err != nil || res.Outputs[0].DataType != onnx.Int16 {
		t.Fatalf("%v %v", res.Outputs[0].DataType, err)
	}
	for k, want := range []int64{-5, -32768, 32767, 32767} {
		if got[k] != want {
			t.Fatalf("%v, want element %d = %d", got, k, want)
		}
	}
}
