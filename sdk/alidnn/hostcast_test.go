package alidnn_test

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestHostCastOfDouble casts a DOUBLE input to FLOAT16 and BFLOAT16 as
// graph outputs, with and without a Cast to FLOAT beside them (which
// stages the input), through a program written to a file and read back.
// Its values lie just past a halfway point of each narrow type by 2⁻⁴⁰,
// which fp32 drops: rounded through fp32 they would land on the halfway
// point and round to even, the wrong way.
func TestHostCastOfDouble(t *testing.T) {
	x := []float64{1 + 0x1p-11 + 0x1p-40, -(1 + 0x1p-8 + 0x1p-40), 70000, 0.1}
	raw := make([]byte, 0, 8*len(x))
	for _, v := range x {
		raw = binary.LittleEndian.AppendUint64(raw, math.Float64bits(v))
	}
	in, err := onnx.NewRaw("x", onnx.Double, []int64{4}, raw)
	if err != nil {
		t.Fatal(err)
	}
	cast := func(out string, to onnx.DataType) *onnx.Node {
		return &onnx.Node{OpType: "Cast", Inputs: []string{"x"}, Outputs: []string{out}, Attrs: []*onnx.Attribute{attrInt("to", int64(to))}}
	}
	// FLOAT16: 1 + 2⁻¹⁰ (not 1), −(1 + 2⁻⁸) within it, 70000 beyond
	// 65504 → +Inf. BFLOAT16: −(1 + 2⁻⁷) (not −1).
	want16 := []float32{1 + 0x1p-10, -(1 + 0x1p-8), float32(math.Inf(1)), 0.0999755859375}
	wantB := []float32{1, -(1 + 0x1p-7), 70144, 0.10009765625}
	for _, staged := range []bool{false, true} {
		g := &onnx.Graph{
			Inputs:  []onnx.ValueInfo{typed(vinfo("x", 4), onnx.Double)},
			Nodes:   []*onnx.Node{cast("h", onnx.Float16), cast("b", onnx.Bfloat16)},
			Outputs: []onnx.ValueInfo{typed(vinfo("h", 4), onnx.Float16), typed(vinfo("b", 4), onnx.Bfloat16)},
		}
		if staged {
			g.Nodes = append(g.Nodes, cast("f", onnx.Float))
			g.Outputs = append(g.Outputs, vinfo("f", 4))
		}
		p := compileThroughFile(t, 21, g)
		res := runResult(t, p, in)
		for k, want := range [][]float32{want16, wantB} {
			got, err := res.Outputs[k].Float32s()
			if err != nil {
				t.Fatal(err)
			}
			for j := range want {
				if got[j] != want[j] {
					t.Errorf("staged %v, output %v: %v, want %v", staged, res.Outputs[k].DataType, got, want)
					break
				}
			}
		}
	}
}

// TestHostCastOfDoubleReadOn: the Cast read by another operator would be
// rounded on the engine from fp32: refused.
func TestHostCastOfDoubleReadOn(t *testing.T) {
	g := &onnx.Graph{
		Inputs: []onnx.ValueInfo{typed(vinfo("x", 4), onnx.Double)},
		Nodes: []*onnx.Node{
			{OpType: "Cast", Inputs: []string{"x"}, Outputs: []string{"h"}, Attrs: []*onnx.Attribute{attrInt("to", int64(onnx.Float16))}},
			{OpType: "Identity", Inputs: []string{"h"}, Outputs: []string{"y"}},
		},
		Outputs: []onnx.ValueInfo{typed(vinfo("y", 4), onnx.Float16)},
	}
	_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 21}}, Graph: g})
	if err == nil || !strings.Contains(err.Error(), "element type DOUBLE, read by Cast") {
		t.Fatalf("a Cast of DOUBLE to FLOAT16 read on: %v", err)
	}
}
