package alidnn_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// blockedDQGraph is DequantizeLinear(x, scale, zp) of an integer input x
// [2,6,3] with blocks of block along axis 1 (opset 21).
func blockedDQGraph(typ onnx.DataType, block int64, scale, zp *onnx.Tensor) *onnx.Model {
	return &onnx.Model{Opsets: []onnx.Opset{{Version: 21}}, Graph: &onnx.Graph{
		Inputs:       []onnx.ValueInfo{{Name: "x", ElemType: typ, Dims: []onnx.Dim{{Value: 2}, {Value: 6}, {Value: 3}}}},
		Initializers: []*onnx.Tensor{scale, zp},
		Nodes: []*onnx.Node{{Name: "dq", OpType: "DequantizeLinear", Inputs: []string{"x", "scale", "zp"}, Outputs: []string{"y"},
			Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 1}, {Name: "block_size", Type: onnx.AttrInt, I: block}}}},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}}
}

// TestBlockedDequantize dequantises int8 and uint8 inputs by blocked
// scales and zero points (blocks of 2 and of 4, the last one short)
// against float64.
func TestBlockedDequantize(t *testing.T) {
	for _, tc := range []struct {
		typ    onnx.DataType
		block  int
		lo, hi int64
	}{
		{onnx.Int8, 2, -128, 127},
		{onnx.Uint8, 4, 0, 255},
	} {
		t.Run(fmt.Sprint(tc.typ, tc.block), func(t *testing.T) {
			nb := (6 + tc.block - 1) / tc.block
			xs := make([]int64, 36)
			for k := range xs {
				xs[k] = tc.lo + int64(k*37)%(tc.hi-tc.lo+1)
			}
			zs, ss := make([]int64, 2*nb*3), make([]float32, 2*nb*3)
			for k := range zs {
				zs[k] = tc.lo + int64(k*11)%(tc.hi-tc.lo+1)
				ss[k] = 0.01 * float32(k+1)
			}
			x, _ := onnx.NewInt("x", tc.typ, []int64{2, 6, 3}, xs)
			zp, _ := onnx.NewInt("zp", tc.typ, []int64{2, int64(nb), 3}, zs)
			scale := onnx.NewFloat32("scale", []int64{2, int64(nb), 3}, ss)
			want := make([]float64, 36)
			for k := range want {
				n, ch, w := k/18, k/3%6, k%3
				b := (n*nb+ch/tc.block)*3 + w
				want[k] = float64(float32(xs[k]-zs[b]) * ss[b])
			}
			checkClose(t, runModel(t, blockedDQGraph(tc.typ, int64(tc.block), scale, zp), x), want)
		})
	}
}

// TestBlockedDequantizeRefused: scales whose shape does not match the
// blocks are refused naming the node and the shapes.
func TestBlockedDequantizeRefused(t *testing.T) {
	zp, _ := onnx.NewInt("zp", onnx.Int8, []int64{2, 2, 3}, make([]int64, 12))
	scale := onnx.NewFloat32("scale", []int64{2, 2, 3}, make([]float32, 12))
	_, err := alidnn.Compile(blockedDQGraph(onnx.Int8, 2, scale, zp))
	if !errors.Is(err, alidnn.ErrUnsupported) || !strings.Contains(err.Error(), `"dq"`) || !strings.Contains(err.Error(), "blocks of 2") {
		t.Fatalf("Compile: %v, want ErrUnsupported naming \"dq\" and the blocks", err)
	}
}

// TestBlockedQuantize quantises a FLOAT input [2,6,3] by blocked scales
// and zero points along axis 1 (blocks of 2, and of 4 with a short last
// one) to int8 and uint8, against float32 division (x / scale, as ONNX
// computes it) rounded half to even in float64, the zero point added and
// saturated: halfway quotients, saturation on both sides, ±Inf and −0
// among the inputs.
func TestBlockedQuantize(t *testing.T) {
	for _, tc := range []struct {
		typ    onnx.DataType
		block  int
		lo, hi int64
	}{{onnx.Int8, 2, -128, 127}, {onnx.Uint8, 4, 0, 255}} {
		t.Run(fmt.Sprint(tc.typ, tc.block), func(t *testing.T) {
			nb := (6 + tc.block - 1) / tc.block
			zs, ss := make([]int64, 2*nb*3), make([]float32, 2*nb*3)
			for k := range zs {
				zs[k] = tc.lo + int64(k*11)%(tc.hi-tc.lo+1)
				ss[k] = []float32{0.5, 0.1, 3, 0.25, 1e-3, 7}[k%6]
			}
			xs := make([]float32, 36)
			want := make([]float64, 36)
			for k := range xs {
				n, ch, w := k/18, k/3%6, k%3
				b := (n*nb+ch/tc.block)*3 + w
				// Halfway quotients (m + ½)·scale, and beyond the range.
				xs[k] = (float32(k%9) - 4 + 0.5) * ss[b]
				switch k % 7 {
				case 3:
					xs[k] = float32(k) * 40
				case 5:
					xs[k] = -float32(k) * 40
				}
				if k == 10 {
					xs[k] = float32(math.Inf(1))
				}
				if k == 11 {
					xs[k] = float32(math.Inf(-1))
				}
				if k == 12 {
					xs[k] = float32(math.Copysign(0, -1))
				}
				q := math.RoundToEven(float64(xs[k]/ss[b])) + float64(zs[b])
				want[k] = math.Max(float64(tc.lo), math.Min(float64(tc.hi), q))
			}
			zp, _ := onnx.NewInt("zp", tc.typ, []int64{2, int64(nb), 3}, zs)
			m := &onnx.Model{Opsets: []onnx.Opset{{Version: 21}}, Graph: &onnx.Graph{
				Inputs:       []onnx.ValueInfo{vinfo("x", 2, 6, 3)},
				Initializers: []*onnx.Tensor{onnx.NewFloat32("scale", []int64{2, int64(nb), 3}, ss), zp},
				Nodes: []*onnx.Node{{Name: "q", OpType: "QuantizeLinear", Inputs: []string{"x", "scale", "zp"}, Outputs: []string{"y"},
					Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 1}, {Name: "block_size", Type: onnx.AttrInt, I: int64(tc.block)}}}},
				Outputs: []onnx.ValueInfo{{Name: "y"}},
			}}
			p, err := alidnn.Compile(m)
			if err != nil {
				t.Fatal(err)
			}
			res := runResult(t, p, onnx.NewFloat32("x", []int64{2, 6, 3}, xs))
			if res.Outputs[0].DataType != tc.typ {
				t.Fatalf("output is %v, want %v", res.Outputs[0].DataType, tc.typ)
			}
			got, err := res.Outputs[0].Int64s()
			if err != nil {
				t.Fatal(err)
			}
			for k := range want {
				if float64(got[k]) != want[k] {
					t.Errorf("element %d: quantize(%v) = %d, want %v", k, xs[k], got[k], want[k])
				}
			}
		})
	}
}
