package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestRoundFloorCeil runs Round, Floor and Ceil of a computed tensor
// (Neg(x)) on halfway values, their float32 neighbours, ±0, ±Inf, NaN,
// subnormals and integers past 2²³, against float64's math.RoundToEven,
// Floor and Ceil bit for bit (the sign of a zero included; a NaN only has
// to be a NaN).
func TestRoundFloorCeil(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	nz := float32(math.Copysign(0, -1))
	var xf []float32
	for k := -8; k <= 8; k++ {
		h := float32(k) + 0.5
		xf = append(xf, h, math.Nextafter32(h, -100), math.Nextafter32(h, 100), float32(k), float32(k)+0.3, float32(k)-0.3)
	}
	xf = append(xf, 0, nz, inf, -inf, nan, 1e-45, -1e-45, 8388607.5, -8388607.5, 8388609, 16777217, 3.4028235e38, -3.4028235e38, 0.49999997, -0.49999997)
	for len(xf)%16 != 0 {
		xf = append(xf, 2.5)
	}
	ref := map[string]func(float64) float64{"Round": math.RoundToEven, "Floor": math.Floor, "Ceil": math.Ceil}
	for op, f := range ref {
		t.Run(op, func(t *testing.T) {
			n := int64(len(xf))
			g := &onnx.Graph{
				Inputs: []onnx.ValueInfo{vinfo("x", 2, n/2)},
				Nodes: []*onnx.Node{
					{Name: "neg", OpType: "Neg", Inputs: []string{"x"}, Outputs: []string{"nx"}},
					{Name: op, OpType: op, Inputs: []string{"nx"}, Outputs: []string{"y"}},
				},
				Outputs: []onnx.ValueInfo{{Name: "y"}},
			}
			got := runGraph(t, g, onnx.NewFloat32("x", []int64{2, n / 2}, xf))
			for k, v := range got {
				x := -xf[k]
				w := float32(f(float64(x)))
				if w != w && v == v || w == w && math.Float32bits(v) != math.Float32bits(w) {
					t.Errorf("%s(%v) = %v, want %v", op, x, v, w)
				}
			}
		})
	}
}
