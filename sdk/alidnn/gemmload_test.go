package alidnn_test

import (
	"math"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestGemmWholeBlockLoads checks that a fully connected layer loads its
// input's 20 one-pixel blocks with one LOAD, not one per input block (each
// LOAD pays the DDR latency), into each of its two load buffers once: its
// three output blocks read the same input, which the buffer holds. And
// that it still computes the product.
func TestGemmWholeBlockLoads(t *testing.T) {
	const k, n = 320, 40
	x := ramp("x", []int64{1, k}, 0.25)
	w := ramp("w", []int64{k, n}, 0.01)
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: &onnx.Graph{
		Inputs: []onnx.ValueInfo{vinfo("x", 1, k)}, Initializers: []*onnx.Tensor{w},
		Nodes:   []*onnx.Node{{OpType: "MatMul", Inputs: []string{"x", "w"}, Outputs: []string{"y"}}},
		Outputs: []onnx.ValueInfo{{Name: "y"}},
	}}
	p, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	loads := 0
	for _, in := range p.Insns {
		if in.Op == isa.OpLoad && in.Mem == isa.MemInp {
			loads++
		}
	}
	if want := 2; loads != want {
		t.Errorf("%d input LOADs, want %d", loads, want)
	}
	got := runProgram(t, local(t), p, x)
	xf, _ := x.Float32s()
	wf, _ := w.Float32s()
	for j := range n {
		var s float64
		for i := range k {
			s += float64(xf[i]) * float64(wf[i*n+j])
		}
		if math.Abs(float64(got[j])-s) > 1e-5*(1+math.Abs(s)) {
			t.Errorf("y[%d] = %g, want %g", j, got[j], s)
		}
	}
}
