package onnxtest_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Dynamically quantised transformers, as onnxruntime's quantize_dynamic
// writes them with its defaults (weights QInt8, symmetric, per tensor,
// full range; activations uint8; MatMulConstBOnly): every MatMul by a
// constant weight becomes DynamicQuantizeLinear of its input (one per
// input, shared by the MatMuls that read it) → MatMulInteger by the int8
// weights → Cast to FLOAT → Mul by the product of the two scales, and
// every Gather of a weight table a Gather of the int8 table →
// DequantizeLinear (GatherQuant), named as quantize_dynamic names them.
// MatMuls of two computed tensors (attention) and Gemm (not in its
// IntegerOps registry) stay fp32.

// quantizeDynamic rewrites g's MatMuls by 2-D constant weights and Gathers
// of constant tables so.
func quantizeDynamic(g graph) graph {
	inits := map[string]*onnx.Tensor{}
	for _, t := range g.inits {
		inits[t.Name] = t
	}
	weights, quantised := map[string]bool{}, map[string]bool{}
	var nodes []node
	for _, n := range g.nodes {
		if n.op == "Gather" && inits[n.inputs[0]] != nil && inits[n.inputs[0]].DataType == onnx.Float {
			t, q := n.inputs[0], n.outputs[0]+"_quantized"
			weights[t] = true
			nodes = append(nodes, node{op: "Gather", inputs: []string{t + "_quantized", n.inputs[1]}, outputs: []string{q}, attrs: n.attrs},
				node{op: "DequantizeLinear", inputs: []string{q, t + "_scale", t + "_zero_point"}, outputs: []string{n.outputs[0]}})
			continue
		}
		if n.op != "MatMul" || inits[n.inputs[1]] == nil || len(inits[n.inputs[1]].Dims) != 2 {
			nodes = append(nodes, n)
			continue
		}
		x, w, y := n.inputs[0], n.inputs[1], n.outputs[0]
		if !quantised[x] {
			nodes = append(nodes, node{op: "DynamicQuantizeLinear", inputs: []string{x}, outputs: []string{x + "_quantized", x + "_scale", x + "_zero_point"}})
			quantised[x] = true
		}
		weights[w] = true
		mi, scales := y+"_output_quantized", x+"_scale_"+w+"_scale_mul:0"
		nodes = append(nodes,
			node{op: "MatMulInteger", inputs: []string{x + "_quantized", w + "_quantized", x + "_zero_point", w + "_zero_point"}, outputs: []string{mi}},
			node{op: "Cast", inputs: []string{mi}, outputs: []string{mi + "_cast_output"}, attrs: []attr{iAttr("to", int64(onnx.Float))}},
			node{op: "Mul", inputs: []string{x + "_scale", w + "_scale"}, outputs: []string{scales}},
			node{op: "Mul", inputs: []string{mi + "_cast_output", scales}, outputs: []string{y}})
	}
	var ts []*onnx.Tensor
	for _, t := range g.inits {
		if !weights[t.Name] {
			ts = append(ts, t)
			continue
		}
		f, _ := t.Float32s()
		q, s := quantWeight(f)
		ts = append(ts, intTensor(t.Name+"_quantized", onnx.Int8, t.Dims, q), scalar(t.Name+"_scale", s),
			intTensor(t.Name+"_zero_point", onnx.Int8, nil, []int64{0}))
	}
	g.nodes, g.inits = nodes, ts
	return g
}

// quantWeight quantises weights as quantize_dynamic does QInt8 symmetric
// ones, in float32: scale 2·max|w|/254, zero point 0, round(w/scale) half
// to even within [−127, 127].
func quantWeight(w []float32) ([]int64, float32) {
	var m float32
	for _, v := range w {
		m = max(m, float32(math.Abs(float64(v))))
	}
	if m == 0 {
		m = 1
	}
	s := (m - -m) / 254
	q := make([]int64, len(w))
	for k, v := range w {
		q[k] = int64(min(max(math.RoundToEven(float64(v/s)), -127), 127))
	}
	return q, s
}

// dequantised is w quantised by quantWeight and dequantised, in float32
// as DequantizeLinear computes it.
func dequantised(w []float32) []float32 {
	q, s := quantWeight(w)
	d := make([]float32, len(q))
	for k, v := range q {
		d[k] = float32(v) * s
	}
	return d
}

// dynLinear is a linearFunc of the quantised graph: x as the graph's
// float32 tensor, DynamicQuantizeLinear'd in float32 as ONNX's reference
// implementation does it (uint8, the range with 0 included, rounding half
// to even), the exact integer product by quantWeight's weights, the Cast
// product scaled by the scales' float32 product, plus b, in float64.
func dynLinear(x []float64, w, b []float32, k, n int) []float64 {
	xs := make([]float32, len(x))
	var lo, hi float32
	for i, v := range x {
		xs[i] = float32(v)
		lo, hi = min(lo, xs[i]), max(hi, xs[i])
	}
	d := hi - lo
	if d == 0 {
		d = 1
	}
	s := d / 255
	z := min(max(math.RoundToEven(float64(-lo/s)), 0), 255)
	xq := make([]int64, len(xs))
	for i, v := range xs {
		xq[i] = int64(min(max(math.RoundToEven(float64(v/s))+z, 0), 255) - z)
	}
	wq, sw := quantWeight(w)
	sc := float64(s * sw)
	rows := len(x) / k
	y := make([]float64, rows*n)
	for r := range rows {
		for j := range n {
			var acc int64
			for i := range k {
				acc += xq[r*k+i] * wq[i*n+j]
			}
			y[r*n+j] = float64(acc)*sc + float64(b[j])
		}
	}
	return y
}

// TestBertDynamicInt8 holds bert_encoder_dynamic_int8, calibrated on each
// data set's inputs as faas model test does, to the rule for int8
// embeddings against the fp32 model's float64 reference (bert_encoder's
// outputs for the same inputs): every token's last_hidden_state row and
// every pooler_output row at a cosine similarity of at least 0.99; and
// to the same rule against the quantised graph's float64 reference. It
// logs the worst cosines and the largest difference from the quantised
// reference: calibrated on its inputs, the engine computes the quantised
// graph's numbers, up to an element that DynamicQuantizeLinear rounds the
// other way for the engine's fp32 arithmetic before it (the reference's
// is float64), which moves the outputs by a quantisation step's effect.
func TestBertDynamicInt8(t *testing.T) {
	const sets = 4
	dir := filepath.Join("testdata", "generated")
	m, ins, qouts := readSets(t, filepath.Join(dir, "bert_encoder_dynamic_int8"), sets)
	_, _, fouts := readSets(t, filepath.Join(dir, "bert_encoder"), sets)
	dev := local(t)
	ctx := context.Background()
	for s := range sets {
		var opts []alidnn.Option
		for _, x := range ins[s] {
			opts = append(opts, alidnn.WithShape(x.Name, int(x.Dims[0]), int(x.Dims[1])))
		}
		p, err := alidnn.Calibrate(ctx, dev, m, [][]*onnx.Tensor{ins[s]}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		sess, err := alidnn.Load(ctx, dev, p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sess.Run(ctx, ins[s]...)
		if err != nil {
			t.Fatal(err)
		}
		for o, want := range fouts[s] {
			w, _ := want.Float32s()
			g, _ := res.Outputs[o].Float32s()
			q, _ := qouts[s][o].Float32s()
			n := int(want.Dims[len(want.Dims)-1])
			worst, worstQ, worstGQ := 1.0, 1.0, 1.0
			for r := 0; r < len(w); r += n {
				worst = min(worst, cosine(g[r:r+n], w[r:r+n]))
				worstQ = min(worstQ, cosine(q[r:r+n], w[r:r+n]))
				worstGQ = min(worstGQ, cosine(g[r:r+n], q[r:r+n]))
			}
			var d, top float64
			for k := range q {
				d, top = max(d, math.Abs(float64(g[k]-q[k]))), max(top, math.Abs(float64(q[k])))
			}
			t.Logf("set %d output %d %v: engine's cosine to fp32 ≥ %.5f (quantised reference's ≥ %.5f; engine's to it ≥ %.7f, off by ≤ %.3g of the largest)", s, o, want.Dims, worst, worstQ, worstGQ, d/top)
			if worst < int8Cosine {
				t.Errorf("set %d output %d: a row's cosine to the fp32 reference is %.5f < %g", s, o, worst, int8Cosine)
			}
			if worstGQ < int8Cosine {
				t.Errorf("set %d output %d: a row's cosine to the quantised graph's reference is %.7f < %g", s, o, worstGQ, int8Cosine)
			}
		}
	}
}
