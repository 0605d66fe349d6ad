package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/ppocr"
)

// TestNetReadRendered runs the program's reading of its default page, upside
// down, on an engine simulated in the process instead of a faasd slot:
// both lines found in the page's order and read as rendered; and a page
// the engine reads otherwise is reported, not passed.
func TestNetReadRendered(t *testing.T) {
	testenv.FullNetwork(t)
	m, sim := setup(t)
	img, want, err := input("", "Hello World 123|FPGA as a Service", 24, true)
	if err != nil {
		t.Fatal(err)
	}
	if want[0] != "FPGA as a Service" {
		t.Fatalf("upside-down page's lines %q, want them in its reading order", want)
	}
	ctx := context.Background()
	r := ppocr.NewRunner(sim)
	defer r.Close(ctx)
	out, err := read(ctx, r, m, img, want)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := out.print(f, "the simulator", false); err != nil {
		t.Error(err)
	}
	wrong := []string{"FPGA as a Service", "Hello World 124"}
	if out, err = read(ctx, r, m, img, wrong); err != nil {
		t.Fatal(err)
	}
	if err := out.print(f, "the simulator", true); err == nil || !strings.Contains(err.Error(), `line 1 read "Hello World 123"`) {
		t.Errorf("print of a misread page: %v, want the line named", err)
	}
}

// TestNetReadRenderedInt8 reads the default page, upright and upside
// down, with the models quantised to int8 (-int8), calibrated on an engine
// of its own (an in-process engine does not take memory back).
func TestNetReadRenderedInt8(t *testing.T) {
	testenv.FullNetwork(t)
	m, sim := setup(t)
	_, calib := setup(t)
	ctx := context.Background()
	r := ppocr.NewInt8Runner(sim, calib, ppocr.Calibration(m))
	defer r.Close(ctx)
	for _, upside := range []bool{false, true} {
		img, want, err := input("", "Hello World 123|FPGA as a Service", 24, upside)
		if err != nil {
			t.Fatal(err)
		}
		out, err := read(ctx, r, m, img, want)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Misread) > 0 {
			t.Errorf("upside %v: %q", upside, out.Misread)
		}
	}
}

// setup reads the vendored models and returns an engine simulated in the
// process, closed with the test.
func setup(t *testing.T) (*ppocr.Models, alidnn.Engine) {
	t.Helper()
	m, err := ppocr.ReadModels(testenv.TestData(t, "ocr", "ppocrv4"))
	if err != nil {
		t.Fatal(err)
	}
	sim, err := model.NewLocal(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	return m, alidnn.NewLocal(sim)
}
