package onnxtest_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Dynamically quantised transformers, as onnxruntime's quantize_dynamic
// writes them with its defaults (weights QInt8, symmetric, per tensor,
// full range; activations uint8; MatMulConstBOnly): every MatMul by a
// constant weight becomes DynamicQuantizeLinear of its input (one per
// input, shared by the MatMuls that read it) → MatMulInteger by the int8
// weights → Cast to FLOAT → Mul by the product of the two scales; every
// Conv so with ConvInteger, its bias added after, reshaped to [1, −1, 1,
// 1]; and every Gather of a weight table a Gather of the int8 table →
// DequantizeLinear (GatherQuant); named as quantize_dynamic names them.
// MatMuls of two computed tensors (attention) and Gemm (not in its
// IntegerOps registry) stay fp32.

// quantizeDynamic rewrites g's MatMuls by 2-D constant weights, Convs and
// Gathers of constant tables so.
func quantizeDynamic(g graph) graph {
	inits := map[string]*onnx.Tensor{}
	for _, t := range g.inits {
		inits[t.Name] = t
	}
	weights, quantised := map[string]bool{}, map[string]bool{}
	var nodes []node
	var shapes []*onnx.Tensor
	for _, n := range g.nodes {
		if n.op == "Gather" && inits[n.inputs[0]] != nil && inits[n.inputs[0]].DataType == onnx.Float {
			t, q := n.inputs[0], n.outputs[0]+"_quantized"
			weights[t] = true
			nodes = append(nodes, node{op: "Gather", inputs: []string{t + "_quantized", n.inputs[1]}, outputs: []string{q}, attrs: n.attrs},
				node{op: "DequantizeLinear", inputs: []string{q, t + "_scale", t + "_zero_point"}, outputs: []string{n.outputs[0]}})
			continue
		}
		conv := n.op == "Conv" && inits[n.inputs[1]] != nil
		if !conv && (n.op != "MatMul" || inits[n.inputs[1]] == nil || len(inits[n.inputs[1]].Dims) != 2) {
			nodes = append(nodes, n)
			continue
		}
		x, w, y := n.inputs[0], n.inputs[1], n.outputs[0]
		op, scaled := "MatMulInteger", y
		if conv {
			op = "ConvInteger"
			if len(n.inputs) == 3 {
				scaled = y + "quant_scaled_output"
			}
		}
		if !quantised[x] {
			nodes = append(nodes, node{op: "DynamicQuantizeLinear", inputs: []string{x}, outputs: []string{x + "_quantized", x + "_scale", x + "_zero_point"}})
			quantised[x] = true
		}
		weights[w] = true
		mi, scales := y+"_output_quantized", x+"_scale_"+w+"_scale_mul:0"
		ints := node{op: op, inputs: []string{x + "_quantized", w + "_quantized", x + "_zero_point", w + "_zero_point"}, outputs: []string{mi}}
		if conv {
			ints.attrs = n.attrs
		}
		nodes = append(nodes, ints,
			node{op: "Cast", inputs: []string{mi}, outputs: []string{mi + "_cast_output"}, attrs: []attr{iAttr("to", int64(onnx.Float))}},
			node{op: "Mul", inputs: []string{x + "_scale", w + "_scale"}, outputs: []string{scales}},
			node{op: "Mul", inputs: []string{mi + "_cast_output", scales}, outputs: []string{scaled}})
		if scaled != y {
			// The bias, reshaped to [1, −1, 1, 1], added in float.
			nodes = append(nodes,
				node{op: "Reshape", inputs: []string{n.inputs[2], y + "_bias_reshape_shape"}, outputs: []string{y + "_bias_reshape_output"}},
				node{op: "Add", inputs: []string{scaled, y + "_bias_reshape_output"}, outputs: []string{y}})
			shape := make([]int64, len(inits[w].Dims))
			for k := range shape {
				shape[k] = 1
			}
			shape[1] = -1
			shapes = append(shapes, intTensor(y+"_bias_reshape_shape", onnx.Int64, []int64{int64(len(shape))}, shape))
		}
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
	g.nodes, g.inits = nodes, append(ts, shapes...)
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

// dynQuant is DynamicQuantizeLinear of x in float32 as ONNX's reference
// implementation computes it (uint8, the range with 0 included, rounding
// half to even): x's quantised values less the zero point, and the scale.
func dynQuant(x []float32) ([]int64, float32) {
	var lo, hi float32
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	d := hi - lo
	if d == 0 {
		d = 1
	}
	s := d / 255
	z := min(max(math.RoundToEven(float64(-lo/s)), 0), 255)
	q := make([]int64, len(x))
	for i, v := range x {
		q[i] = int64(min(max(math.RoundToEven(float64(v/s))+z, 0), 255) - z)
	}
	return q, s
}

// dynLinear is a linearFunc of the quantised graph: x as the graph's
// float32 tensor, dynQuant'd, the exact integer product by quantWeight's
// weights, the Cast product scaled by the scales' float32 product, plus b,
// in float64.
func dynLinear(x []float64, w, b []float32, k, n int) []float64 {
	xs := make([]float32, len(x))
	for i, v := range x {
		xs[i] = float32(v)
	}
	xq, s := dynQuant(xs)
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

// dynPatchConv is a patchFunc of the quantised graph: the image dynQuant'd,
// the exact integer sums of products by quantWeight's weights (as
// ConvInteger), scaled by the scales' float32 product, plus b.
func dynPatchConv(img []float32, N int, w, b []float32) []float64 {
	xq, s := dynQuant(img)
	wq, sw := quantWeight(w)
	sc := float64(s * sw)
	out := patchSums(N, func(i int) float64 { return float64(xq[i]) }, func(i int) float64 { return float64(wq[i]) })
	for k := range out {
		out[k] = out[k]*sc + float64(b[k%vitH])
	}
	return out
}

// TestDynamicInt8 holds the dynamically quantised cases, calibrated on
// each data set's inputs as faas model test does, to the rule for
// int8 models against the fp32 model's float64 reference (bert_encoder's,
// vit_tiny's and gpt2_decoder_block's outputs for the same inputs): every
// row
// of the embeddings (last_hidden_state, pooler_output) at a cosine
// similarity of at least 0.99, the logits' top-1 equal on every image; and
// to the cosine rule against the quantised graph's float64 reference. It
// logs the worst cosines and the largest difference from the quantised
// reference: calibrated on its inputs, the engine computes the quantised
// graph's numbers, up to an element that DynamicQuantizeLinear rounds the
// other way for the engine's fp32 arithmetic before it (the reference's
// is float64), which moves the outputs by a quantisation step's effect.
func TestDynamicInt8(t *testing.T) {
	for _, c := range []struct {
		name, fp32 string
		sets       int
	}{{"bert_encoder_dynamic_int8", "bert_encoder", 4}, {"vit_tiny_dynamic_int8", "vit_tiny", 3}, {"gpt2_decoder_block_dynamic_int8", "gpt2_decoder_block", 3}} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join("testdata", "generated")
			m, ins, qouts := readSets(t, filepath.Join(dir, c.name), c.sets)
			_, _, fouts := readSets(t, filepath.Join(dir, c.fp32), c.sets)
			for s := range c.sets {
				res := runCalibrated(t, m, ins[s])
				for o, want := range fouts[s] {
					checkDynamicOutput(t, fmt.Sprintf("set %d %s", s, m.Graph.Outputs[o].Name), res.Outputs[o], want, qouts[s][o])
				}
			}
		})
	}
}

// runCalibrated compiles m calibrated on the inputs ins, for their shapes,
// and runs it on them.
func runCalibrated(t *testing.T, m *onnx.Model, ins []*onnx.Tensor) *alidnn.Result {
	t.Helper()
	var opts []alidnn.Option
	for _, x := range ins {
		dims := make([]int, len(x.Dims))
		for k, d := range x.Dims {
			dims[k] = int(d)
		}
		opts = append(opts, alidnn.WithShape(x.Name, dims...))
	}
	ctx := context.Background()
	dev := local(t)
	p, err := alidnn.Calibrate(ctx, dev, m, [][]*onnx.Tensor{ins}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := alidnn.Load(ctx, dev, p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sess.Run(ctx, ins...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkDynamicOutput holds the engine's output got to the int8 rule
// against the fp32 reference want — logits by top-1, others by cosine —
// and by cosine against the quantised graph's reference quant.
func checkDynamicOutput(t *testing.T, what string, got, want, quant *onnx.Tensor) {
	t.Helper()
	var w, g, q []float32
	for _, p := range []struct {
		to *[]float32
		t  *onnx.Tensor
	}{{&w, want}, {&g, got}, {&q, quant}} {
		v, err := p.t.Float32s()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		*p.to = v
	}
	if len(g) != len(w) || len(q) != len(w) {
		t.Fatalf("%s: %d values and the references' %d and %d", what, len(g), len(w), len(q))
	}
	n := int(want.Dims[len(want.Dims)-1])
	logits := strings.HasSuffix(what, "logits")
	worst, worstQ, worstGQ := 1.0, 1.0, 1.0
	for r := 0; r < len(w); r += n {
		worst = min(worst, cosine(g[r:r+n], w[r:r+n]))
		worstQ = min(worstQ, cosine(q[r:r+n], w[r:r+n]))
		worstGQ = min(worstGQ, cosine(g[r:r+n], q[r:r+n]))
		if logits && argmaxOf32(g[r:r+n]) != argmaxOf32(w[r:r+n]) {
			t.Errorf("%s row %d: top-1 %d, the fp32 reference's %d", what, r/n, argmaxOf32(g[r:r+n]), argmaxOf32(w[r:r+n]))
		}
	}
	var d, top float64
	for k := range q {
		d, top = max(d, math.Abs(float64(g[k]-q[k]))), max(top, math.Abs(float64(q[k])))
	}
	t.Logf("%s %v: engine's cosine to fp32 ≥ %.5f (quantised reference's ≥ %.5f; engine's to it ≥ %.7f, off by ≤ %.3g of the largest)", what, want.Dims, worst, worstQ, worstGQ, d/top)
	if !logits && worst < int8Cosine {
		t.Errorf("%s: a row's cosine to the fp32 reference is %.5f < %g", what, worst, int8Cosine)
	}
	if worstGQ < int8Cosine {
		t.Errorf("%s: a row's cosine to the quantised graph's reference is %.7f < %g", what, worstGQ, int8Cosine)
	}
}
