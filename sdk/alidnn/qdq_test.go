package alidnn

import (
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestQDQConvIsInt8 checks that the generated QDQ fragment (two Convs of
// DequantizeLinear'd int8 activations and weights) compiles to int8 GEMM
// layers, not to fp32 ones behind dequantisations; onnxtest checks its
// outputs.
func TestQDQConvIsInt8(t *testing.T) {
	m, err := onnx.ReadModel(filepath.Join("onnxtest", "testdata", "generated", "export_qdq_conv", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	c := newCompiler(m, nil)
	if err := c.build(); err != nil {
		t.Fatal(err)
	}
	gemms := 0
	for _, l := range c.layers {
		if l.kind != lGemm {
			continue
		}
		gemms++
		if l.conv.fp {
			t.Errorf("layer %s is an fp32 GEMM", l.out)
		}
		if l.in.el() != i8 {
			t.Errorf("layer %s reads %v", l.out, l.in.el())
		}
	}
	if gemms != 2 {
		t.Errorf("%d GEMM layers, want 2", gemms)
	}
	if len(c.layers) != 3 {
		t.Errorf("%d layers, want 3: the input's quantisation and the two Convs", len(c.layers))
	}
}
