package alidnn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestQuantizeLinearPerChannelZeroPoints: QuantizeLinear of a device
// tensor with a zero point per channel is refused with its reason (the
// engine's quantisation saturates with one zero point for all lanes);
// the same zero point on every channel compiles.
func TestQuantizeLinearPerChannelZeroPoints(t *testing.T) {
	s := make([]float32, 20)
	for k := range s {
		s[k] = 0.1
	}
	for _, c := range []struct {
		zp     int64
		refuse bool
	}{{1, true}, {0, false}} {
		z := make([]int64, 20)
		for k := range z {
			z[k] = 100 + c.zp*int64(k)
		}
		zt := ints64("z", onnx.Uint8, []int64{20}, z...)
		g := &onnx.Graph{
			Inputs:       []onnx.ValueInfo{vinfo("x", 1, 20, 3, 4)},
			Initializers: []*onnx.Tensor{onnx.NewFloat32("s", []int64{20}, s), zt},
			Nodes: []*onnx.Node{
				{OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"r"}},
				{OpType: "QuantizeLinear", Inputs: []string{"r", "s", "z"}, Outputs: []string{"y"}, Attrs: []*onnx.Attribute{{Name: "axis", Type: onnx.AttrInt, I: 1}}},
			},
			Outputs: []onnx.ValueInfo{{Name: "y"}},
		}
		_, err := alidnn.Compile(&onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g})
		refused := errors.Is(err, alidnn.ErrUnsupported) && strings.Contains(err.Error(), "zero point per channel")
		if refused != c.refuse || !c.refuse && err != nil {
			t.Errorf("zero points %v: compile: %v (want refused: %v)", z[:3], err, c.refuse)
		}
	}
}
