package ppocr_test

import (
	"context"
	"fmt"
	"image"
	"math"
	"slices"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/internal/onnxref"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/ppocr"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// models reads the vendored models.
func models(t testing.TB) *ppocr.Models {
	t.Helper()
	m, err := ppocr.ReadModels(testenv.TestData(t, "ocr", "ppocrv4"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// setup reads the vendored models and returns a Runner on an in-process
// engine.
func setup(t *testing.T, opts ...alidnn.Option) (*ppocr.Models, *ppocr.Runner) {
	t.Helper()
	m := models(t)
	sim, err := model.NewLocal(0)
	if err != nil {
		t.Fatal(err)
	}
	r := ppocr.NewRunner(alidnn.NewLocal(sim), opts...)
	t.Cleanup(func() {
		r.Close(context.Background())
		sim.Close()
	})
	return m, r
}

// page renders lines of text of size px, 16 px apart, on a 384-wide
// image, upside down when upside, with noise of ±12 levels.
func page(t testing.TB, px float64, upside bool, texts ...string) *image.RGBA {
	t.Helper()
	var lines []ppocr.Line
	y := 10
	for k, s := range texts {
		lines = append(lines, ppocr.Line{Text: s, Size: px, X: 12 + 10*k, Y: y})
		y += int(px) + 16
	}
	img, err := ppocr.Render(384, 160, lines, upside, 12, uint64(px))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// readPages are the pages TestNetRead and TestNetReadInt8 read: two lines
// each, at four sizes, upright and upside down.
var readPages = []struct {
	px     float64
	upside bool
	lines  []string
}{
	{16, false, []string{"Hello World 123", "invoice 2026-11-27"}},
	{24, true, []string{"invoice 2026-11-27", "Total: 42.50 EUR"}},
	{32, false, []string{"Total: 42.50 EUR", "jumps over 7 lazy dogs"}},
	{20, true, []string{"jumps over 7 lazy dogs", "Hello World 123"}},
	{28, true, []string{"Total: 42.50 EUR", "invoice 2026-11-27"}},
}

// TestNetRead reads rendered pages end to end on the engine — detection,
// direction, recognition — at several sizes, upright and upside down with
// light noise: every line is found, in reading order (the page's, so
// reversed upside down), turned when upside down, and read as rendered.
func TestNetRead(t *testing.T) {
	testenv.FullNetwork(t)
	m, r := setup(t)
	readAll(t, r, m)
}

// TestNetReadInt8 reads the same pages with the three models quantised to
// int8 after training, calibrated on other text (see Calibration).
func TestNetReadInt8(t *testing.T) {
	testenv.FullNetwork(t)
	m := models(t)
	sim, err := model.NewLocal(0)
	if err != nil {
		t.Fatal(err)
	}
	calib, err := model.NewLocal(0)
	if err != nil {
		t.Fatal(err)
	}
	r := ppocr.NewInt8Runner(alidnn.NewLocal(sim), alidnn.NewLocal(calib), ppocr.Calibration(m))
	t.Cleanup(func() {
		r.Close(context.Background())
		sim.Close()
		calib.Close()
	})
	readAll(t, r, m)
}

// readAll reads readPages with r.
func readAll(t *testing.T, r *ppocr.Runner, m *ppocr.Models) {
	t.Helper()
	for _, pg := range readPages {
		img := page(t, pg.px, pg.upside, pg.lines...)
		got, err := ppocr.Read(context.Background(), r, m, img)
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(pg.lines)
		if pg.upside {
			slices.Reverse(want)
		}
		if len(got) != len(want) {
			t.Errorf("%g px, upside %v: %d lines %+v, want %q", pg.px, pg.upside, len(got), got, want)
			continue
		}
		for i, g := range got {
			if g.Text != want[i] || g.Upside != pg.upside {
				t.Errorf("%g px, upside %v: line %d at %v read %q (upside %v), want %q", pg.px, pg.upside, i, g.Box.Rectangle, g.Text, g.Upside, want[i])
			}
		}
	}
	t.Logf("%+v", r.Stats)
}

// reference runs model on in in float64 (internal/onnxref).
func reference(t testing.TB, m *onnx.Model, in ppocr.Input) onnxref.Tensor {
	t.Helper()
	dims := make([]int, len(in.Dims))
	for k, d := range in.Dims {
		dims[k] = int(d)
	}
	x := make([]float64, len(in.V))
	for k, v := range in.V {
		x[k] = float64(v)
	}
	out, err := onnxref.Run(m.Graph, m.Opset(""), map[string]onnxref.Tensor{m.Graph.Inputs[0].Name: {Dims: dims, V: x}})
	if err != nil {
		t.Fatal(err)
	}
	return out[m.Graph.Outputs[0].Name]
}

// engine runs model on in on the engine and checks its output against
// the float64 reference: the same shape, every value within tol.
func engine(t *testing.T, r *ppocr.Runner, m *onnx.Model, in ppocr.Input, tol float64) (got []float32, want onnxref.Tensor) {
	t.Helper()
	out, err := r.Run(context.Background(), m, in)
	if err != nil {
		t.Fatal(err)
	}
	if got, err = out.Float32s(); err != nil {
		t.Fatal(err)
	}
	want = reference(t, m, in)
	if fmt.Sprint(out.Dims) != fmt.Sprint(intsOf(want.Dims)) {
		t.Fatalf("output %v, reference %v", out.Dims, want.Dims)
	}
	worst := 0.0
	for k, w := range want.V {
		worst = max(worst, math.Abs(float64(got[k])-w))
	}
	if worst > tol {
		t.Errorf("max |engine − reference| = %.3g over %d values, want ≤ %g", worst, len(got), tol)
	}
	t.Logf("max |engine − reference| = %.3g over %d values", worst, len(got))
	return got, want
}

func intsOf(d []int) []int64 {
	out := make([]int64, len(d))
	for k, v := range d {
		out[k] = int64(v)
	}
	return out
}

func float32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for k, x := range v {
		out[k] = float32(x)
	}
	return out
}
