package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestQuantizeLinearPerChannelZeroPoints quantises a tensor [1,20,3,4]
// with a scale and a zero point per channel (axis 1), uint8 zero points
// spread over 0…255 and int8 ones over −128…127, of a graph input and of a
// computed tensor (Neg), against ONNX's arithmetic: x/s in float32,
// rounded half to even (the data holds exact ties: multiples of 1/8 by
// scales of 1/4 and 1/2), plus the zero point, saturated. Values far
// beyond either end of every channel's window saturate too.
func TestQuantizeLinearPerChannelZeroPoints(t *testing.T) {
	const C, inner = 20, 12
	x := make([]float32, C*inner)
	for k := range x {
		x[k] = float32(k%29-14) / 8 * float32(1+k%7*9) // ties, and values up to ±100
	}
	s := make([]float32, C)
	for c := range s {
		s[c] = 0.25 * float32(1+c%2)
	}
	for _, typ := range []onnx.DataType{onnx.Uint8, onnx.Int8} {
		lo, hi := int64(0), int64(255)
		if typ == onnx.Int8 {
			lo, hi = -128, 127
		}
		z := make([]int64, C)
		for c := range z {
			z[c] = lo + int64(c)*(hi-lo)/(C-1)
		}
		for _, neg := range []bool{false, true} {
			nodes := []*onnx.Node{{OpType: "QuantizeLinear", Inputs: []string{"x", "s", "z"}, Outputs: []string{"y"}, Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 1}}}}
			sign := float32(1)
			if neg {
				nodes[0].Inputs[0] = "nx"
				nodes = append([]*onnx.Node{{OpType: "Neg", Inputs: []string{"x"}, Outputs: []string{"nx"}}}, nodes...)
				sign = -1
			}
			g := &onnx.Graph{
				Inputs:       []onnx.ValueInfo{vinfo("x", 1, C, 3, 4)},
				Initializers: []*onnx.Tensor{onnx.NewFloat32("s", []int64{C}, s), ints64("z", typ, []int64{C}, z...)},
				Nodes:        nodes,
				Outputs:      []onnx.ValueInfo{{Name: "y", ElemType: typ}},
			}
			res := runGraphResult(t, g, onnx.NewFloat32("x", []int64{1, C, 3, 4}, x))
			got, err := res.Outputs[0].Int64s()
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range x {
				c := k / inner
				want := min(max(int64(math.RoundToEven(float64(sign*v/s[c])))+z[c], lo), hi)
				if got[k] != want {
					t.Fatalf("%v neg %v: value %d (channel %d, x %g): %d, want %d", typ, neg, k, c, sign*v, got[k], want)
				}
			}
		}
	}
}
