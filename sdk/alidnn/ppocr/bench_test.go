package ppocr_test

import (
	"context"
	"image"
	"image/draw"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/ppocr"
)

// benchLines is the page both benchmarks read: two lines, 24 px, upright.
var benchLines = []string{"Hello World 123", "Total: 42.50 EUR"}

// BenchmarkRead reads a rendered two-line page (384×160) end to end on the
// in-process engine — detection, direction of each line, recognition —
// with the programs compiled before the timer starts. It reports the
// engine's modeled time per page (device-ms), the pages a second one chip
// reads at that time (pages/s-chip), and, as ns/op, the pipeline's time
// on this host with the engine simulated.
func BenchmarkRead(b *testing.B) {
	m := models(b)
	sim, err := model.NewLocal(0)
	if err != nil {
		b.Fatal(err)
	}
	defer sim.Close()
	r := ppocr.NewRunner(alidnn.NewLocal(sim))
	defer r.Close(context.Background())
	benchRead(b, r, m)
}

// BenchmarkReadInt8 is BenchmarkRead with the models quantised to int8
// as Calibration plans it (the detector's finest layers in fp32).
func BenchmarkReadInt8(b *testing.B) {
	m := models(b)
	sim, err := model.NewLocal(0)
	if err != nil {
		b.Fatal(err)
	}
	defer sim.Close()
	calib, err := model.NewLocal(0)
	if err != nil {
		b.Fatal(err)
	}
	defer calib.Close()
	r := ppocr.NewInt8Runner(alidnn.NewLocal(sim), alidnn.NewLocal(calib), ppocr.Calibration(m))
	defer r.Close(context.Background())
	benchRead(b, r, m)
}

// benchRead reads benchLines' page b.N times with r, its programs
// compiled first, and reports the modeled time per page.
func benchRead(b *testing.B, r *ppocr.Runner, m *ppocr.Models) {
	img := page(b, 24, false, benchLines...)
	read := func() {
		res, err := ppocr.Read(context.Background(), r, m, img)
		if err != nil {
			b.Fatal(err)
		}
		if len(res) != len(benchLines) || res[0].Text != benchLines[0] || res[1].Text != benchLines[1] {
			b.Fatalf("read %+v, want %q", res, benchLines)
		}
	}
	read() // compiles every program the page needs
	dev0 := r.Stats.DeviceNS
	b.ResetTimer()
	for range b.N {
		read()
	}
	b.StopTimer()
	ms := float64(r.Stats.DeviceNS-dev0) / 1e6 / float64(b.N)
	b.ReportMetric(ms, "device-ms")
	b.ReportMetric(1000/ms, "pages/s-chip")
}

// BenchmarkReadHost reads the same page with the same models, pre- and
// post-processing on this host's CPU alone: each model evaluated by the
// float64 reference interpreter (internal/onnxref, plain Go, not an
// optimised runtime). It reports its time per page as host-ms.
func BenchmarkReadHost(b *testing.B) {
	m := models(b)
	img := page(b, 24, false, benchLines...)
	start := time.Now()
	for range b.N {
		in := ppocr.Det(img)
		prob := reference(b, m.Det, in)
		boxes, err := ppocr.Boxes(float32s(prob.V), int(in.Dims[2]), int(in.Dims[3]), img.Bounds())
		if err != nil {
			b.Fatal(err)
		}
		if len(boxes) != len(benchLines) {
			b.Fatalf("%d boxes, want %d", len(boxes), len(benchLines))
		}
		for k, box := range boxes {
			line := image.NewRGBA(image.Rect(0, 0, box.Dx(), box.Dy()))
			draw.Draw(line, line.Bounds(), img, box.Min, draw.Src)
			cin, err := ppocr.Cls(line)
			if err != nil {
				b.Fatal(err)
			}
			if c := reference(b, m.Cls, cin); c.V[1] > c.V[0] && c.V[1] >= ppocr.ClsThresh {
				b.Fatalf("line %d classified upside down", k)
			}
			rin, err := ppocr.Rec(line)
			if err != nil {
				b.Fatal(err)
			}
			p := reference(b, m.Rec, rin)
			text, _, err := m.Dict.Decode(float32s(p.V), p.Dims[1])
			if err != nil || text != benchLines[k] {
				b.Fatalf("line %d read %q (%v), want %q", k, text, err, benchLines[k])
			}
		}
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "host-ms")
}
