package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// runInts runs m on ins and returns its outputs as integers, each checked
// to be of its type.
func runInts(t *testing.T, m *onnx.Model, types []onnx.DataType, ins ...*onnx.Tensor) [][]int64 {
	t.Helper()
	p, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	res := runResult(t, p, ins...)
	var out [][]int64
	for k, typ := range types {
		if res.Outputs[k].DataType != typ {
			t.Fatalf("output %d is %v, want %v", k, res.Outputs[k].DataType, typ)
		}
		v, err := res.Outputs[k].Int64s()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// TestCastToInt8 casts a computed FLOAT (Neg(x)) to INT8 and UINT8:
// truncation toward zero (halves, values a float32 ulp from an integer,
// −0) inside the range, against Go's conversion of the float64.
func TestCastToInt8(t *testing.T) {
	var xf []float32
	for k := -20; k <= 20; k++ {
		v := float32(k) * 6.25
		xf = append(xf, v, v+0.5, math.Nextafter32(float32(k*6), 1000), math.Nextafter32(float32(k*6), -1000))
	}
	xf = append(xf, float32(math.Copysign(0, -1)), 0.999, -0.999, 127.9, -128.9, 255.9)
	for len(xf)%16 != 0 {
		xf = append(xf, 3.5)
	}
	n := int64(len(xf))
	for _, tc := range []struct {
		typ    onnx.DataType
		lo, hi float64
	}{{onnx.Int8, -128, 127}, {onnx.Uint8, 0, 255}} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
				Inputs: []onnx.ValueInfo{vinfo("x", 2, n/2)},
				Nodes: []*onnx.Node{
					{Name: "neg", OpType: "Neg", Inputs: []string{"x"}, Outputs: []string{"nx"}},
					{Name: "cast", OpType: "Cast", Inputs: []string{"nx"}, Outputs: []string{"y"}, Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(tc.typ)}}},
				},
				Outputs: []onnx.ValueInfo{{Name: "y"}},
			}}
			got := runInts(t, m, []onnx.DataType{tc.typ}, onnx.NewFloat32("x", []int64{2, n / 2}, xf))[0]
			for k, v := range got {
				x := -float64(xf[k])
				w := math.Trunc(x)
				if w < tc.lo || w > tc.hi {
					w = math.Max(tc.lo, math.Min(tc.hi, w)) // the engine saturates; ONNX leaves it open
				}
				if float64(v) != w {
					t.Errorf("cast(%v) = %d, want %v", x, v, w)
				}
			}
		})
	}
}

// TestDynamicQuantizeExpanded runs DynamicQuantizeLinear's function body
// (opset 11's expansion: ReduceMin/Max, the scale (max − min)/255, the
// zero point Round(Clip(−min/scale)) cast to UINT8, QuantizeLinear by
// them) on a vector [16] and a matrix [3,16] whose quotients x/scale fall
// on halves, against float32 arithmetic rounded half to even in float64.
func TestDynamicQuantizeExpanded(t *testing.T) {
	for _, dims := range [][]int64{{16}, {3, 16}} {
		n := 1
		for _, d := range dims {
			n *= int(d)
		}
		xf := make([]float32, n)
		for k := range xf {
			xf[k] = float32(k%17)*0.75 - 3.2
		}
		xf[5] = -4.7
		k := func(name string, v float32) *onnx.Node {
			return &onnx.Node{OpType: "Constant", Outputs: []string{name}, Attrs: []*onnx.Attribute{{Name: "value", Type: onnx.AttrTensor, T: onnx.NewFloat32(name, nil, []float32{v})}}}
		}
		zero := &onnx.Node{OpType: "Constant", Outputs: []string{"qmin"}, Attrs: []*onnx.Attribute{{Name: "value", Type: onnx.AttrTensor, T: onnx.NewFloat32("qmin", nil, []float32{0})}}}
		m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
			Inputs: []onnx.ValueInfo{vinfo("x", dims...)},
			Nodes: []*onnx.Node{
				zero, k("qmax", 255),
				{OpType: "ReduceMin", Inputs: []string{"x"}, Outputs: []string{"mn"}, Attrs: []*onnx.Attribute{{Name: "keepdims", Type: onnx.AttrInt, I: 0}}},
				{OpType: "Min", Inputs: []string{"mn", "qmin"}, Outputs: []string{"mna"}},
				{OpType: "ReduceMax", Inputs: []string{"x"}, Outputs: []string{"mx"}, Attrs: []*onnx.Attribute{{Name: "keepdims", Type: onnx.AttrInt, I: 0}}},
				{OpType: "Max", Inputs: []string{"mx", "qmin"}, Outputs: []string{"mxa"}},
				{OpType: "Sub", Inputs: []string{"mxa", "mna"}, Outputs: []string{"rng"}},
				{OpType: "Div", Inputs: []string{"rng", "qmax"}, Outputs: []string{"scale"}},
				{OpType: "Div", Inputs: []string{"mna", "scale"}, Outputs: []string{"ms"}},
				{OpType: "Sub", Inputs: []string{"qmin", "ms"}, Outputs: []string{"zf"}},
				{OpType: "Clip", Inputs: []string{"zf", "qmin", "qmax"}, Outputs: []string{"zc"}},
				{OpType: "Round", Inputs: []string{"zc"}, Outputs: []string{"zr"}},
				{OpType: "Cast", Inputs: []string{"zr"}, Outputs: []string{"zp"}, Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Uint8)}}},
				{OpType: "QuantizeLinear", Inputs: []string{"x", "scale", "zp"}, Outputs: []string{"y"}},
			},
			Outputs: []onnx.ValueInfo{{Name: "y"}, {Name: "zp"}},
		}}
		got := runInts(t, m, []onnx.DataType{onnx.Uint8, onnx.Uint8}, onnx.NewFloat32("x", dims, xf))
		mn, mx := float32(0), float32(0)
		for _, v := range xf {
			mn, mx = min(mn, v), max(mx, v)
		}
		scale := (mx - mn) / 255
		zp := math.RoundToEven(math.Max(0, math.Min(255, float64(0-mn/scale))))
		if float64(got[1][0]) != zp {
			t.Fatalf("%v: zero point %d, want %v", dims, got[1][0], zp)
		}
		for k, v := range got[0] {
			w := math.Max(0, math.Min(255, math.RoundToEven(float64(xf[k]/scale))+zp))
			if float64(v) != w {
				t.Errorf("%v: element %d: quantize(%v) = %d, want %v", dims, k, xf[k], v, w)
			}
		}
	}
}

// TestReduceVector reduces a vector [C] (one and two blocks of lanes) to a
// scalar and to [1], against float64.
func TestReduceVector(t *testing.T) {
	for _, C := range []int64{6, 16, 23} {
		xf := make([]float32, C)
		for k := range xf {
			xf[k] = float32((k*7)%11) - 4.5
		}
		for _, op := range []string{"ReduceMin", "ReduceMax", "ReduceSum", "ReduceMean"} {
			for _, keep := range []int64{0, 1} {
				g := &onnx.Graph{
					Inputs: []onnx.ValueInfo{vinfo("x", C)},
					Nodes: []*onnx.Node{{Name: "r", OpType: op, Inputs: []string{"x"}, Outputs: []string{"y"},
						Attrs: []*onnx.Attribute{{Name: "keepdims", Type: onnx.AttrInt, I: keep}}}},
					Outputs: []onnx.ValueInfo{{Name: "y"}},
				}
				want := float64(xf[0])
				sum := 0.0
				for _, v := range xf {
					sum += float64(v)
					switch op {
					case "ReduceMin":
						want = math.Min(want, float64(v))
					case "ReduceMax":
						want = math.Max(want, float64(v))
					}
				}
				switch op {
				case "ReduceSum":
					want = sum
				case "ReduceMean":
					want = sum / float64(C)
				}
				checkCloseAbs(t, runGraph(t, g, onnx.NewFloat32("x", []int64{C}, xf)), []float64{want})
			}
		}
	}
}
