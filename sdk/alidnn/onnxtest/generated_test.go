package onnxtest_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn/onnxtest"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// update rewrites the generated case folders (testdata/generated) instead of
// checking them: go test ./sdk/alidnn/onnxtest -run TestGenerated -update
var update = flag.Bool("update", false, "rewrite testdata/generated from the generator")

// genCase is one generated ONNX-node-test-style folder: a model, its runtime
// inputs and the outputs a straightforward Go reference computes.
type genCase struct {
	name  string
	opset int64
	g     graph
	ins   []*onnx.Tensor
	outs  []*onnx.Tensor
	// more are further data sets: test_data_set_1, 2, …
	more []dataSet
	// err is the generator's failure, reported as the case runs.
	err error
	// int8 also runs the case post-training-quantised (held to the int8
	// rule, see onnxtest: so only cases without ties along the last axis
	// or with rows of cosine ≥ 0.99).
	int8 bool
}

type dataSet struct{ ins, outs []*onnx.Tensor }

// xDims is the shape of the cases' activations: 20 channels span two
// 16-lane blocks, the second one partial.
var xDims = []int64{1, 20, 3, 4}

func numel(dims []int64) int {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	return n
}

// data is a deterministic spread over about [-5, 5] with exact zeros and
// values on the cases' bounds.
func data(dims []int64, seed float64) []float32 {
	v := make([]float32, numel(dims))
	for k := range v {
		v[k] = float32(5 * math.Sin(float64(k)*0.77+seed))
		switch k % 17 {
		case 0:
			v[k] = 0
		case 5:
			v[k] = -1
		case 9:
			v[k] = 1.5
		}
	}
	return v
}

func fvi(name string, dims []int64) valueInfo {
	return valueInfo{name: name, typ: onnx.Float, dims: dims}
}

func mapF(x []float32, f func(float32) float32) []float32 {
	y := make([]float32, len(x))
	for k, v := range x {
		y[k] = f(v)
	}
	return y
}

// unary is a case of one element-wise node on x (input 0), with constant
// further inputs inits.
func unary(name string, opset int64, op string, attrs []attr, extra []string, inits []*onnx.Tensor, f func(float32) float32) genCase {
	x := data(xDims, float64(len(name)))
	return genCase{name: name, opset: opset,
		g: graph{
			nodes:   []node{{op: op, inputs: append([]string{"x"}, extra...), outputs: []string{"y"}, attrs: attrs}},
			inits:   inits,
			inputs:  []valueInfo{fvi("x", xDims)},
			outputs: []valueInfo{fvi("y", xDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", xDims, mapF(x, f))},
	}
}

func scalar(name string, v float32) *onnx.Tensor { return onnx.NewFloat32(name, nil, []float32{v}) }

func clamp(lo, hi float32) func(float32) float32 {
	return func(x float32) float32 { return min(max(x, lo), hi) }
}

func leaky(alpha float32) func(float32) float32 {
	return func(x float32) float32 {
		if x < 0 {
			return alpha * x
		}
		return x
	}
}

func hardSigmoid(alpha, beta float32) func(float32) float32 {
	return func(x float32) float32 { return max(0, min(1, alpha*x+beta)) }
}

// binaryCase is Max or Min of x and a second operand b of dims bDims, a
// runtime input or (konst) an initializer broadcast against x.
func binaryCase(name, op string, bDims []int64, konst bool) genCase {
	x := data(xDims, 1)
	b := data(bDims, 2)
	bi := func(k int) int { // b's element broadcast to x's element k
		idx, stride, bstride := 0, 1, 1
		off := len(xDims) - len(bDims)
		for a := len(xDims) - 1; a >= 0; a-- {
			c := (k / stride) % int(xDims[a])
			if a >= off && bDims[a-off] != 1 {
				idx += c * bstride
			}
			if a >= off {
				bstride *= int(bDims[a-off])
			}
			stride *= int(xDims[a])
		}
		return idx
	}
	y := make([]float32, len(x))
	for k := range y {
		if op == "Max" {
			y[k] = max(x[k], b[bi(k)])
		} else {
			y[k] = min(x[k], b[bi(k)])
		}
	}
	c := genCase{name: name, opset: 13,
		g: graph{
			nodes:   []node{{op: op, inputs: []string{"x", "b"}, outputs: []string{"y"}}},
			inputs:  []valueInfo{fvi("x", xDims)},
			outputs: []valueInfo{fvi("y", xDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", xDims, y)},
	}
	if konst {
		c.g.inits = []*onnx.Tensor{onnx.NewFloat32("b", bDims, b)}
	} else {
		c.g.inputs = append(c.g.inputs, fvi("b", bDims))
		c.ins = append(c.ins, onnx.NewFloat32("b", bDims, b))
	}
	return c
}

// caseFamilies are the generators of further operator families, each in
// its own file, appended to by init functions.
var caseFamilies []func() []genCase

// generatedCases returns every generated case: the element-wise families
// below, then caseFamilies in file order.
func generatedCases(t *testing.T) []genCase {
	cs := elementwiseCases(t)
	for _, f := range caseFamilies {
		cs = append(cs, f()...)
	}
	seen := map[string]bool{}
	for _, c := range cs {
		if seen[c.name] {
			t.Fatalf("two generated cases are named %q", c.name)
		}
		seen[c.name] = true
	}
	return cs
}

func elementwiseCases(t *testing.T) []genCase {
	hs := func(x float32) float32 { return x * hardSigmoid(1.0/6, 0.5)(x) }
	cs := []genCase{
		unary("clip_opset6_attributes", 6, "Clip", []attr{fAttr("min", -1), fAttr("max", 1.5)}, nil, nil, clamp(-1, 1.5)),
		unary("clip_opset6_default_max", 6, "Clip", []attr{fAttr("min", -0.25)}, nil, nil, clamp(-0.25, float32(math.Inf(1)))),
		unary("clip_opset13_inputs", 13, "Clip", nil, []string{"lo", "hi"}, []*onnx.Tensor{scalar("lo", -2.5), scalar("hi", 0.3)}, clamp(-2.5, 0.3)),
		unary("clip_opset13_min_only", 13, "Clip", nil, []string{"lo"}, []*onnx.Tensor{scalar("lo", 0.1)}, clamp(0.1, float32(math.Inf(1)))),
		unary("clip_opset11_max_only", 11, "Clip", nil, []string{"", "hi"}, []*onnx.Tensor{scalar("hi", -0.7)}, clamp(float32(math.Inf(-1)), -0.7)),
		// min above max: every value becomes max.
		unary("clip_min_above_max", 13, "Clip", nil, []string{"lo", "hi"}, []*onnx.Tensor{scalar("lo", 1), scalar("hi", -0.5)}, clamp(1, -0.5)),
		unary("leakyrelu_default", 16, "LeakyRelu", nil, nil, nil, leaky(0.01)),
		// 0.1234567 is far from any bfloat16: an immediate would miss the
		// tolerance.
		unary("leakyrelu_alpha", 6, "LeakyRelu", []attr{fAttr("alpha", 0.1234567)}, nil, nil, leaky(0.1234567)),
		unary("leakyrelu_alpha_above_one", 16, "LeakyRelu", []attr{fAttr("alpha", 2.5)}, nil, nil, leaky(2.5)),
		unary("hardsigmoid_default", 6, "HardSigmoid", nil, nil, nil, hardSigmoid(0.2, 0.5)),
		unary("hardsigmoid_alpha_beta", 6, "HardSigmoid", []attr{fAttr("alpha", 0.3), fAttr("beta", 0.45)}, nil, nil, hardSigmoid(0.3, 0.45)),
		unary("hardswish", 14, "HardSwish", nil, nil, nil, hs),
		unary("erf", 13, "Erf", nil, nil, nil, func(x float32) float32 { return float32(math.Erf(float64(x))) }),
		unary("identity", 16, "Identity", nil, nil, nil, func(x float32) float32 { return x }),
		unary("dropout_opset7", 7, "Dropout", []attr{fAttr("ratio", 0.3)}, nil, nil, func(x float32) float32 { return x }),
		binaryCase("max_tensors", "Max", xDims, false),
		binaryCase("min_tensors", "Min", xDims, false),
		binaryCase("max_const_scalar", "Max", []int64{1}, true),
		binaryCase("min_const_per_channel", "Min", []int64{1, 20, 1, 1}, true),
		binaryCase("max_const_full", "Max", xDims, true),
	}
	// Dropout's mask output is all true in inference.
	d := unary("dropout_mask", 13, "Dropout", nil, nil, nil, func(x float32) float32 { return x })
	d.g.nodes[0].outputs = append(d.g.nodes[0].outputs, "mask")
	d.g.outputs = append(d.g.outputs, valueInfo{name: "mask", typ: onnx.Bool, dims: xDims})
	ones := make([]int64, numel(xDims))
	for k := range ones {
		ones[k] = 1
	}
	mask, err := onnx.NewInt("mask", onnx.Bool, xDims, ones)
	if err != nil {
		t.Fatal(err)
	}
	d.outs = append(d.outs, mask)
	cs = append(cs, d)
	cs = append(cs, fusedCases()...)
	cs = append(cs, transposeCases()...)
	cs = append(cs, padCases(t)...)
	cs = append(cs, variadicCases()...)
	// Clip of a constant is folded: y = x + Clip(c).
	c := data(xDims, 3)
	x := data(xDims, 4)
	y := make([]float32, len(x))
	for k := range y {
		y[k] = x[k] + clamp(-1, 1)(c[k])
	}
	cs = append(cs, genCase{name: "clip_constant_folded", opset: 13,
		g: graph{
			nodes: []node{
				{op: "Clip", inputs: []string{"c", "lo", "hi"}, outputs: []string{"cc"}},
				{op: "Add", inputs: []string{"x", "cc"}, outputs: []string{"y"}},
			},
			inits:   []*onnx.Tensor{onnx.NewFloat32("c", xDims, c), scalar("lo", -1), scalar("hi", 1)},
			inputs:  []valueInfo{fvi("x", xDims)},
			outputs: []valueInfo{fvi("y", xDims)},
		},
		ins:  []*onnx.Tensor{onnx.NewFloat32("x", xDims, x)},
		outs: []*onnx.Tensor{onnx.NewFloat32("y", xDims, y)},
	})
	return cs
}

// files returns the folder's files by relative path.
func (c genCase) files() (map[string][]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	m, err := encodeModel(c.name, c.opset, c.g)
	if err != nil {
		return nil, err
	}
	fs := map[string][]byte{"model.onnx": m}
	for n, set := range append([]dataSet{{c.ins, c.outs}}, c.more...) {
		for kind, ts := range map[string][]*onnx.Tensor{"input": set.ins, "output": set.outs} {
			for k, t := range ts {
				b, err := onnx.EncodeTensor(t)
				if err != nil {
					return nil, err
				}
				fs[filepath.Join(fmt.Sprintf("test_data_set_%d", n), fmt.Sprintf("%s_%d.pb", kind, k))] = b
			}
		}
	}
	return fs, nil
}

// TestGenerated checks that the committed generated folders are the
// generator's, and runs each through onnxtest as `faas model test` does.
func TestGenerated(t *testing.T) {
	root := filepath.Join("testdata", "generated")
	dev := local(t)
	for _, c := range generatedCases(t) {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(root, c.name)
			fs, err := c.files()
			if err != nil {
				t.Fatal(err)
			}
			for rel, want := range fs {
				path := filepath.Join(dir, rel)
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, want, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				got, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (rewrite the folders with -update)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from the generator's (rewrite with -update)", path)
				}
			}
			r := onnxtest.Run(context.Background(), dev, dir, onnxtest.Options{})
			if !r.Pass {
				t.Error(r.Line())
			}
			if c.int8 {
				r := onnxtest.Run(context.Background(), dev, dir, onnxtest.Options{Quantize: true})
				if !r.Pass {
					t.Error("int8:", r.Line())
				}
			}
		})
	}
}
