package alidnn

import (
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestQDQIsInt8 checks that the generated QDQ fragments (Convs, a Gemm and a
// MatMul of DequantizeLinear'd int8 activations and weights) compile to
// int8 GEMM layers, not to fp32 ones behind dequantisations; onnxtest
// checks their outputs.
func TestQDQIsInt8(t *testing.T) {
	for _, tc := range []struct {
		name          string
		gemms, layers int
	}{
		// The input's quantisation, then the GEMMs, each quantising its
		// output in its epilogue for the next.
		{"export_qdq_conv", 2, 3},
		{"export_qdq_classifier_gemm", 2, 3},
		{"export_qdq_classifier_matmul", 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := onnx.ReadModel(filepath.Join("onnxtest", "testdata", "generated", tc.name, "model.onnx"))
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
			if gemms != tc.gemms || len(c.layers) != tc.layers {
				t.Errorf("%d GEMM layers of %d, want %d of %d", gemms, len(c.layers), tc.gemms, tc.layers)
			}
		})
	}
}
