package alidnn_test

import (
	"context"
	"math"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestLateNormalisation runs attention over 40 tokens (see
// attentionGraph), where the Softmax's division by the row sums follows
// the MatMul by V, on the context's lanes: against float64 in fp32 (1e-4
// of the largest value) and within 3% in int8; the fp32 program divides
// once per context element, never per probability.
func TestLateNormalisation(t *testing.T) {
	const S = 40
	g := attentionGraph(S)
	m := &onnx.Model{Opsets: []onnx.Opset{{Version: 13}}, Graph: g}
	x := wave("x", []int64{1, S, 32}, 2, 0.4)
	xf, _ := x.Float32s()
	want := refAttention(g, xf, S)
	dev := local(t)
	p32, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	divs := 0
	for _, in := range p32.Insns {
		if in.Op == isa.OpALU && in.Alu == isa.AluDiv {
			divs += int(in.IterOut * in.IterIn * (in.UopEnd - in.UopBegin))
		}
	}
	if ctx := S * 32 / 16; divs > ctx {
		t.Errorf("the fp32 program divides %d vectors, want at most the context's %d", divs, ctx)
	}
	check := func(what string, got []float32, tol float64) {
		var big, worst float64
		for k := range want {
			big = max(big, math.Abs(want[k]))
			worst = max(worst, math.Abs(float64(got[k])-want[k]))
		}
		t.Logf("%s: worst error %.3g of the largest %.3g", what, worst, big)
		if worst > tol*big || math.IsNaN(worst) {
			t.Errorf("%s: worst error %.3g beyond %g of the largest %.3g", what, worst, tol, big)
		}
	}
	check("fp32", runProgram(t, dev, p32, x), 1e-4)
	p8, err := alidnn.Quantize(context.Background(), dev, m, [][]*onnx.Tensor{{x}})
	if err != nil {
		t.Fatal(err)
	}
	check("int8", runProgram(t, dev, p8, x), 0.03)
}
