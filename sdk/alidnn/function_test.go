package alidnn_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// functionGraph is op(MatMul(x [1,5,8], w [8,40])): the operator reads
// hidden states with 40 channels on the lanes (three 16-lane blocks, the
// last partly padding), as in a transformer.
func functionGraph(op *onnx.Node, opset int64) *onnx.Model {
	op.Inputs[0], op.Outputs = "p", []string{"y"}
	return &onnx.Model{Opsets: []onnx.Opset{{Version: opset}}, Graph: &onnx.Graph{
		Nodes:        []*onnx.Node{{Name: "mm", OpType: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"p"}}, op},
		Initializers: []*onnx.Tensor{ramp("w", []int64{8, 40}, 0.07), ramp("g", []int64{40}, 0.2)},
		Inputs:       []onnx.ValueInfo{vinfo("x", 1, 5, 8)},
		Outputs:      []onnx.ValueInfo{{Name: "y"}},
	}}
}

// hidden is functionGraph's MatMul in float64, rows of 40.
func hidden(x *onnx.Tensor) [][]float64 {
	xf, _ := x.Float32s()
	wf, _ := ramp("w", []int64{8, 40}, 0.07).Float32s()
	rows := make([][]float64, 5)
	for s := range rows {
		rows[s] = make([]float64, 40)
		for o := range 40 {
			for k := range 8 {
				rows[s][o] += float64(xf[s*8+k]) * float64(wf[k*40+o])
			}
		}
	}
	return rows
}

// TestFunctionOperators runs Gelu (both forms), Swish, Mish and
// RMSNormalization, which compile as their ONNX function bodies, against
// their definitions in float64.
func TestFunctionOperators(t *testing.T) {
	gelu := func(v float64) float64 { return v * (1 + math.Erf(v/math.Sqrt2)) / 2 }
	geluTanh := func(v float64) float64 {
		return v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))) / 2
	}
	swish := func(v float64) float64 { return v / (1 + math.Exp(-1.5*v)) }
	mish := func(v float64) float64 { return v * math.Tanh(math.Log1p(math.Exp(v))) }
	attr := func(name string, a onnx.Attribute) []*onnx.Attribute { a.Name = name; return []*onnx.Attribute{&a} }
	for _, tc := range []struct {
		name  string
		node  *onnx.Node
		opset int64
		f     func(float64) float64 // element-wise, or nil for RMSNormalization
	}{
		{"Gelu", &onnx.Node{OpType: "Gelu", Inputs: []string{""}}, 20, gelu},
		{"Gelu tanh", &onnx.Node{OpType: "Gelu", Inputs: []string{""}, Attrs: attr("approximate", onnx.Attribute{Type: onnx.AttrString, S: []byte("tanh")})}, 20, geluTanh},
		{"Swish", &onnx.Node{OpType: "Swish", Inputs: []string{""}, Attrs: attr("alpha", onnx.Attribute{Type: onnx.AttrFloat, F: 1.5})}, 24, swish},
		{"Mish", &onnx.Node{OpType: "Mish", Inputs: []string{""}}, 18, mish},
		{"RMSNormalization", &onnx.Node{OpType: "RMSNormalization", Inputs: []string{"", "g"}, Attrs: attr("epsilon", onnx.Attribute{Type: onnx.AttrFloat, F: 0.01})}, 23, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.node.Name = "op"
			x := ramp("x", []int64{1, 5, 8}, 0.3)
			got := runModel(t, functionGraph(tc.node, tc.opset), x)
			gf, _ := ramp("g", []int64{40}, 0.2).Float32s()
			var want []float64
			for _, row := range hidden(x) {
				ms := 0.0
				for _, v := range row {
					ms += v * v / 40
				}
				for c, v := range row {
					if tc.f != nil {
						want = append(want, tc.f(v))
					} else {
						want = append(want, v/math.Sqrt(ms+float64(float32(0.01)))*float64(gf[c]))
					}
				}
			}
			for k := range want {
				if math.Abs(float64(got[k])-want[k]) > 1e-5+1e-3*math.Abs(want[k]) {
					t.Fatalf("value %d: %g, want %g", k, got[k], want[k])
				}
			}
		})
	}
}

// TestFunctionOperatorsRefused: a Gelu approximation ONNX does not define
// is refused naming the node and the reason (an RMSNormalization over the
// last two axes of hidden states now runs, see normaxes_test.go).
func TestFunctionOperatorsRefused(t *testing.T) {
	for _, tc := range []struct {
		node  *onnx.Node
		opset int64
		want  string
	}{
		{&onnx.Node{Name: "op", OpType: "Gelu", Inputs: []string{""}, Attrs: []*onnx.Attribute{{Name: "approximate", Type: onnx.AttrString, S: []byte("erf")}}}, 20, `approximate "erf"`},
	} {
		_, err := alidnn.Compile(functionGraph(tc.node, tc.opset))
		if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), `"op"`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrUnsupported naming \"op\" and %s", tc.node.OpType, err, tc.want)
		}
	}
}
