package alidnn_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

func local(t testing.TB) *model.Local {
	t.Helper()
	dev, err := model.NewLocal(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// runModel compiles m, runs it once on a fresh in-process engine and
// returns its first output.
func runModel(t *testing.T, m *onnx.Model, ins ...*onnx.Tensor) []float32 {
	t.Helper()
	p, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	return runProgram(t, local(t), p, ins...)
}

// runProgram loads p on dev, runs it once and returns its first output.
func runProgram(t *testing.T, dev alidnn.Device, p *alidnn.Program, ins ...*onnx.Tensor) []float32 {
	t.Helper()
	ctx := context.Background()
	s, err := alidnn.Load(ctx, dev, p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, ins...)
	if err != nil {
		t.Fatal(err)
	}
	f, err := res.Outputs[0].Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// readLight reads light model name of testdata/onnx/light and returns its
// folder.
func readLight(t testing.TB, name string) (*onnx.Model, string) {
	t.Helper()
	dir := testenv.TestData(t, "onnx", "light", "light_"+name)
	m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	return m, dir
}

func readSet(t testing.TB, dir string) (in, out *onnx.Tensor) {
	t.Helper()
	in, err := onnx.ReadTensor(filepath.Join(dir, "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	out, err = onnx.ReadTensor(filepath.Join(dir, "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	return in, out
}

func argmax(t testing.TB, x *onnx.Tensor) int {
	f, err := x.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	best := 0
	for k := range f {
		if f[k] > f[best] {
			best = k
		}
	}
	return best
}

func maxAbsDiff(t testing.TB, got, want *onnx.Tensor) float64 {
	g, err := got.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	w, err := want.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != len(w) {
		t.Fatalf("%d values, want %d", len(g), len(w))
	}
	worst := 0.0
	for k := range w {
		d := float64(g[k] - w[k])
		if d < 0 {
			d = -d
		}
		worst = max(worst, d)
	}
	return worst
}

func TestMNIST(t *testing.T) {
	dir := testenv.TestData(t, "onnx", "models", "mnist")
	m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dev := local(t)
	fp, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	var calib [][]*onnx.Tensor
	sets := []string{"test_data_set_0", "test_data_set_1"}
	for _, s := range sets {
		in, _ := readSet(t, filepath.Join(dir, s))
		in.Name = "Input3"
		calib = append(calib, []*onnx.Tensor{in})
	}
	q8, err := alidnn.Quantize(ctx, dev, m, calib)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		in, want := readSet(t, filepath.Join(dir, s))
		in.Name = "Input3"
		sess, err := alidnn.Load(ctx, dev, fp)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sess.Run(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if d := maxAbsDiff(t, res.Outputs[0], want); d > 5e-3 {
			t.Errorf("%s fp32: logits differ by %g, want ≤ 5e-3", s, d)
		}
		t.Logf("%s fp32: max |Δ| %.2g, argmax %d, %d ns modeled", s, maxAbsDiff(t, res.Outputs[0], want), argmax(t, res.Outputs[0]), res.Stats.DeviceNS())
		sess, err = alidnn.Load(ctx, dev, q8)
		if err != nil {
			t.Fatal(err)
		}
		res8, err := sess.Run(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := argmax(t, res8.Outputs[0]), argmax(t, want); got != want {
			t.Errorf("%s int8: argmax %d, want %d", s, got, want)
		}
		t.Logf("%s int8: max |Δ| %.2g, argmax %d, %d ns modeled", s, maxAbsDiff(t, res8.Outputs[0], want), argmax(t, res8.Outputs[0]), res8.Stats.DeviceNS())
	}
}

func TestMNISTQuantized(t *testing.T) {
	dir := testenv.TestData(t, "onnx", "models")
	m, err := onnx.ReadModel(filepath.Join(dir, "mnist_quantized", "model_quantized.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dev := local(t)
	sess, err := alidnn.Load(ctx, dev, prog)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"mnist_quantized/test_data_set_0", "mnist/test_data_set_0", "mnist/test_data_set_1"} {
		in, want := readSet(t, filepath.Join(dir, s))
		in.Name = m.Graph.Inputs[0].Name
		res, err := sess.Run(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := argmax(t, res.Outputs[0]), argmax(t, want); got != want {
			t.Errorf("%s: argmax %d, want %d", s, got, want)
		}
		t.Logf("%s: max |Δ| %.2g vs the float model", s, maxAbsDiff(t, res.Outputs[0], want))
	}
}

// lightModels are the ImageNet-scale architectures of testdata/onnx/light,
// one of each classic family.
var lightModels = []string{"bvlc_alexnet", "zfnet512", "inception_v1", "inception_v2", "vgg19", "squeezenet",
	"shufflenet", "resnet50", "densenet121"}

// TestNetLightModels compiles each light model and runs it at 224×224 on the
// in-process engine: the output must be the reference within the fp32
// tolerance. Their weights are constants, so this shows the networks
// compile and run end to end (randomnets_test.go checks numerics).
func TestNetLightModels(t *testing.T) {
	testenv.FullNetwork(t)
	for _, name := range lightModels {
		t.Run(name, func(t *testing.T) {
			m, dir := readLight(t, name)
			prog, err := alidnn.Compile(m)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			sess, err := alidnn.Load(ctx, local(t), prog)
			if err != nil {
				t.Fatal(err)
			}
			in, want := readSet(t, filepath.Join(dir, "test_data_set_0"))
			res, err := sess.Run(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			g, _ := res.Outputs[0].Float32s()
			w, _ := want.Float32s()
			if len(g) != len(w) {
				t.Fatalf("%d outputs, want %d", len(g), len(w))
			}
			worst := 0.0
			for k := range w {
				tol := 1e-5 + 1e-3*float64(abs32(w[k]))
				worst = max(worst, float64(abs32(g[k]-w[k]))/tol)
			}
			if worst > 1 {
				t.Errorf("worst error %.3g× the tolerance", worst)
			}
			bound, err := isa.TokenBound(prog.Insns)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d layers, %d instructions, %.3f G MACs; modeled %.2f ms, host %v; worst error %.3g× the tolerance; FIFOs hold at most %v tokens",
				prog.Layers, len(prog.Insns), float64(prog.MACs)/1e9, float64(res.Stats.DeviceNS())/1e6, res.HostTime, worst, bound)
		})
	}
}

// TestLightInputs checks that each light model's input file is what onnx's
// test runner feeds it (testdata/README.md): its image input, [1,3,224,224]
// filled with arange(n)/n computed in float64.
func TestLightInputs(t *testing.T) {
	for _, name := range lightModels {
		m, dir := readLight(t, name)
		prog, err := alidnn.Compile(m)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		in, _ := readSet(t, filepath.Join(dir, "test_data_set_0"))
		if len(prog.Inputs) != 1 || in.Name != prog.Inputs[0].Name || fmt.Sprint(in.Dims) != "[1 3 224 224]" {
			t.Errorf("%s: input file %q %v for the model's inputs %v", name, in.Name, in.Dims, prog.Inputs)
			continue
		}
		f, err := in.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range f {
			if want := float32(float64(k) / float64(len(f))); v != want {
				t.Errorf("%s: input value %d is %g, want %g", name, k, v, want)
				break
			}
		}
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
