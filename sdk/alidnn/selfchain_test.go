package alidnn_test

import (
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestGatedActivationsFuse compiles the generated cases of a Conv followed
// by a gated activation as exporters decompose it (onnxtest checks their
// numbers): each must take as many layers as the Conv with the fused
// HardSwish operator, the gate a step of the convolution's epilogue; a
// gate with a per-channel constant is compiled operator by operator.
func TestGatedActivationsFuse(t *testing.T) {
	layers := func(name string) int {
		m, err := onnx.ReadModel(filepath.Join("onnxtest", "testdata", "generated", name, "model.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := alidnn.Compile(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return p.Layers
	}
	want := layers("conv_hardswish")
	for _, name := range []string{"conv_hardswish_torch13", "conv_hardswish_paddle", "conv_silu", "conv_swish_beta"} {
		if got := layers(name); got != want {
			t.Errorf("%s: %d layers, want %d (the gate fused into the Conv)", name, got, want)
		}
	}
	if got := layers("conv_gate_per_channel"); got <= want {
		t.Errorf("conv_gate_per_channel: %d layers, want more than %d", got, want)
	}
}
