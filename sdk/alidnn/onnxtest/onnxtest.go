// Package onnxtest runs ONNX backend-test folders on an AliDNN device: a
// folder holds model.onnx and test_data_set_N/{input_K.pb, output_K.pb}.
// Each data set is compiled and run, and the outputs compared within the
// platform's tolerances: fp32 |got − want| ≤ 1e-5 + 1e-3·|want|, integer
// (quantised) outputs off by at most 1. Models quantised to int8 — after
// training (Options.Quantize), or dynamically as onnxruntime's
// quantize_dynamic writes them, calibrated on the data set's inputs — are
// held to the int8 rule instead (see int8Error).
//
// Backend tests pass an operator's weights as graph inputs; the inputs an
// operator treats as parameters (weights, bias, scales, zero points, shapes)
// are bound as constants, as a deployed model freezes them. The other
// inputs' shapes are bound to the data set's (alidnn.WithShape), so models
// with symbolic dimensions compile for each set's tensors.
package onnxtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Result is the outcome of one folder.
type Result struct {
	Dir   string
	Pass  bool
	Worst float64 // the largest error relative to its tolerance (≤ 1 passes)
	Err   error   // compile or run failure
	Sets  int
}

// Options configures Run.
type Options struct {
	// Quantize compiles fp32 models post-training-quantised to int8,
	// calibrated on the folder's own inputs; outputs are then compared by
	// the int8 rule (see int8Error).
	Quantize bool
}

// Run runs every data set of the folder dir on dev.
func Run(ctx context.Context, dev alidnn.Device, dir string, opts Options) Result {
	r := Result{Dir: dir}
	r.Err = run(ctx, dev, dir, opts, &r)
	r.Pass = r.Err == nil && r.Worst <= 1 && r.Sets > 0
	return r
}

func run(ctx context.Context, dev alidnn.Device, dir string, opts Options, r *Result) error {
	m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		return err
	}
	sets, err := filepath.Glob(filepath.Join(dir, "test_data_set_*"))
	if err != nil {
		return err
	}
	sort.Strings(sets)
	if len(sets) == 0 {
		return fmt.Errorf("%s: no test_data_set_* folders", dir)
	}
	// A dynamically quantised model's scales are calibrated on each data
	// set's inputs (the engine fixes them at compile time).
	dynamic := slices.ContainsFunc(m.Graph.Nodes, func(n *onnx.Node) bool { return n.OpType == "DynamicQuantizeLinear" })
	for _, set := range sets {
		ins, err := readSet(set, "input")
		if err != nil {
			return err
		}
		wants, err := readSet(set, "output")
		if err != nil {
			return err
		}
		// Name the tensors after the graph's inputs and outputs, in order.
		graphIns := realInputs(m.Graph)
		if len(ins) != len(graphIns) {
			return fmt.Errorf("%s: %d inputs for a graph of %d", set, len(ins), len(graphIns))
		}
		for k, t := range ins {
			t.Name = graphIns[k]
		}
		bound, runtime := split(dir, m.Graph, ins)
		copts := append(shapesOf(runtime), alidnn.WithConstants(bound...))
		var prog *alidnn.Program
		switch {
		case opts.Quantize:
			prog, err = alidnn.Quantize(ctx, dev, m, [][]*onnx.Tensor{runtime}, copts...)
		case dynamic:
			prog, err = alidnn.Calibrate(ctx, dev, m, [][]*onnx.Tensor{runtime}, copts...)
		default:
			prog, err = alidnn.Compile(m, copts...)
		}
		if err != nil {
			return fmt.Errorf("compile: %w", err)
		}
		s, err := alidnn.Load(ctx, dev, prog)
		if err != nil {
			return err
		}
		res, err := s.Run(ctx, runtime...)
		if err != nil {
			return fmt.Errorf("%s: run: %w", filepath.Base(set), err)
		}
		if len(res.Outputs) != len(wants) {
			return fmt.Errorf("%s: %d outputs, want %d", set, len(res.Outputs), len(wants))
		}
		for k, want := range wants {
			worst, err := compare(res.Outputs[k], want, opts.Quantize || dynamic)
			if err != nil {
				return fmt.Errorf("%s: output %d: %w", filepath.Base(set), k, err)
			}
			r.Worst = max(r.Worst, worst)
		}
		r.Sets++
	}
	return nil
}

// shapesOf binds the inputs to the shapes of the data set's tensors, which
// fix the dimensions the model leaves free: each set compiles for its own.
func shapesOf(ts []*onnx.Tensor) []alidnn.Option {
	var opts []alidnn.Option
	for _, t := range ts {
		dims := make([]int, len(t.Dims))
		for k, d := range t.Dims {
			dims[k] = int(d)
		}
		opts = append(opts, alidnn.WithShape(t.Name, dims...))
	}
	return opts
}

// realInputs lists the graph inputs that are not initializers.
func realInputs(g *onnx.Graph) []string {
	var out []string
	for _, in := range g.Inputs {
		if g.Initializer(in.Name) == nil {
			out = append(out, in.Name)
		}
	}
	return out
}

func readSet(dir, kind string) ([]*onnx.Tensor, error) {
	var out []*onnx.Tensor
	for k := 0; ; k++ {
		p := filepath.Join(dir, fmt.Sprintf("%s_%d.pb", kind, k))
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			return out, nil
		}
		t, err := onnx.ReadTensor(p)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
}

// compare returns the worst error of got relative to the tolerance; int8
// compares floating-point outputs by the int8 rule (see int8Error). The
// element types must match. FLOAT and DOUBLE outputs are held to the fp32
// tolerance; the narrow floating-point types (FLOAT16, BFLOAT16, float8),
// which the host rounds as it reads them back, must be the same values
// (NaN matching NaN); INT8 and UINT8 (quantised) outputs may be off by 1,
// other integer types not at all.
func compare(got, want *onnx.Tensor, int8 bool) (float64, error) {
	if fmt.Sprint(got.Dims) != fmt.Sprint(want.Dims) {
		return 0, fmt.Errorf("shape %v, want %v", got.Dims, want.Dims)
	}
	if got.DataType != want.DataType {
		return 0, fmt.Errorf("element type %v, want %v", got.DataType, want.DataType)
	}
	switch {
	case want.DataType == onnx.Float || want.DataType == onnx.Double:
		return compareFloat(got, want, int8)
	case want.DataType.IsFloat():
		return compareExact(got, want)
	case want.DataType == onnx.Uint64:
		return compareUint64(got, want)
	}
	g, err := got.Int64s()
	if err != nil {
		return 0, err
	}
	w, err := want.Int64s()
	if err != nil {
		return 0, err
	}
	worst := 0.0
	for k := range w {
		d := g[k] - w[k]
		if d < 0 {
			d = -d
		}
		if d != 0 && want.DataType != onnx.Int8 && want.DataType != onnx.Uint8 {
			return 0, fmt.Errorf("element %d: %d, want %d", k, g[k], w[k])
		}
		worst = max(worst, float64(d))
	}
	return worst, nil
}

// compareUint64 compares UINT64 outputs exactly, over the whole range
// (Int64s stops at 2⁶³ − 1).
func compareUint64(got, want *onnx.Tensor) (float64, error) {
	g, err := got.Uint64s()
	if err != nil {
		return 0, err
	}
	w, err := want.Uint64s()
	if err != nil {
		return 0, err
	}
	for k := range w {
		if g[k] != w[k] {
			return 0, fmt.Errorf("element %d: %d, want %d", k, g[k], w[k])
		}
	}
	return 0, nil
}

func compareFloat(got, want *onnx.Tensor, int8 bool) (float64, error) {
	g, err := got.Float64s()
	if err != nil {
		return 0, err
	}
	w, err := want.Float64s()
	if err != nil {
		return 0, err
	}
	if int8 {
		return int8Error(f32s(g), f32s(w), want.Dims), nil
	}
	worst := 0.0
	for k := range w {
		if g[k] == w[k] || math.IsNaN(g[k]) && math.IsNaN(w[k]) {
			continue // equal infinities, and NaN for NaN, as onnx's backend compares
		}
		tol := 1e-5 + 1e-3*math.Abs(w[k])
		e := math.Abs(g[k]-w[k]) / tol
		if math.IsNaN(e) {
			e = math.Inf(1)
		}
		worst = max(worst, e)
	}
	return worst, nil
}

func f32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for k, x := range v {
		out[k] = float32(x)
	}
	return out
}

// compareExact wants every value of a narrow floating-point output.
func compareExact(got, want *onnx.Tensor) (float64, error) {
	g, err := got.Float32s()
	if err != nil {
		return 0, err
	}
	w, err := want.Float32s()
	if err != nil {
		return 0, err
	}
	for k := range w {
		nan := math.IsNaN(float64(g[k])) && math.IsNaN(float64(w[k]))
		if math.Float32bits(g[k]) != math.Float32bits(w[k]) && !nan {
			return 0, fmt.Errorf("element %d: %v, want %v (%v)", k, g[k], w[k], want.DataType)
		}
	}
	return 0, nil
}

// Line formats a result as the CLI prints it.
func (r Result) Line() string {
	name := filepath.Base(strings.TrimRight(r.Dir, "/"))
	switch {
	case r.Err != nil:
		return fmt.Sprintf("FAIL %s: %v", name, r.Err)
	case !r.Pass:
		return fmt.Sprintf("FAIL %s: worst error %.3g× the tolerance", name, r.Worst)
	}
	return fmt.Sprintf("PASS %s (worst error %.3g× the tolerance)", name, r.Worst)
}
