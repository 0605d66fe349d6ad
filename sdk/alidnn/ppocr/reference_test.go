package ppocr_test

import (
	"image"
	"image/draw"
	"math"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"

	"github.com/fpga-faas/faas/sdk/alidnn/ppocr"
)

// The engine's fp32 outputs of the three trained models against a
// float64 evaluation of the same ONNX graphs (internal/onnxref), on
// rendered text: within 1e-4 everywhere, and the same boxes, direction
// and text decoded from both.

const refTol = 1e-4

// TestNetDetReference: the detector's probability map of a two-line page.
func TestNetDetReference(t *testing.T) {
	testenv.FullNetwork(t)
	m, r := setup(t)
	img := page(t, 24, false, "Hello World 123", "Total: 42.50 EUR")
	in := ppocr.Det(img)
	got, want := engine(t, r, m.Det, in, refTol)
	h, w := int(in.Dims[2]), int(in.Dims[3])
	gb, err := ppocr.Boxes(got, h, w, img.Bounds())
	if err != nil {
		t.Fatal(err)
	}
	wb, err := ppocr.Boxes(float32s(want.V), h, w, img.Bounds())
	if err != nil {
		t.Fatal(err)
	}
	if len(wb) != 2 || len(gb) != len(wb) {
		t.Fatalf("boxes %v, reference's %v, want two lines", gb, wb)
	}
	for k := range wb {
		if gb[k].Rectangle != wb[k].Rectangle {
			t.Errorf("box %d at %v, reference's at %v", k, gb[k].Rectangle, wb[k].Rectangle)
		}
	}
}

// line renders text alone and crops it to its ink, grown by a third of
// its size on every side (about as the detector's boxes are).
func line(t *testing.T, text string, px float64, upside bool) *image.RGBA {
	t.Helper()
	img := page(t, px, upside, text)
	ink := image.Rectangle{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if img.RGBAAt(x, y).G < 128 {
				ink = ink.Union(image.Rect(x, y, x+1, y+1))
			}
		}
	}
	if ink.Empty() {
		t.Fatalf("%q rendered no ink", text)
	}
	d := int(px / 3)
	ink = image.Rect(ink.Min.X-d, ink.Min.Y-d, ink.Max.X+d, ink.Max.Y+d).Intersect(b)
	out := image.NewRGBA(image.Rect(0, 0, ink.Dx(), ink.Dy()))
	draw.Draw(out, out.Bounds(), img, ink.Min, draw.Src)
	return out
}

// TestNetClsReference: the direction classifier on a line upright and upside
// down.
func TestNetClsReference(t *testing.T) {
	testenv.FullNetwork(t)
	m, r := setup(t)
	for _, upside := range []bool{false, true} {
		in, err := ppocr.Cls(line(t, "invoice 2026-11-27", 24, upside))
		if err != nil {
			t.Fatal(err)
		}
		got, want := engine(t, r, m.Cls, in, refTol)
		turned := want.V[1] > want.V[0]
		if turned != upside || (got[1] > got[0]) != turned {
			t.Errorf("upside %v: engine %v, reference %v", upside, got, want.V)
		}
		// The classifier is sure (the other class about 1e-7), so the
		// absolute bound says little: the small probability, relatively.
		for k, w := range want.V {
			if rel := math.Abs(float64(got[k])-w) / w; rel > 1e-3 {
				t.Errorf("upside %v: class %d %v, reference %v (%.2g relatively)", upside, k, got[k], w, rel)
			}
		}
	}
}

// TestNetRecReference: the recogniser's CTC probabilities of a line.
func TestNetRecReference(t *testing.T) {
	testenv.FullNetwork(t)
	m, r := setup(t)
	const text = "Hello World 123"
	in, err := ppocr.Rec(line(t, text, 24, false))
	if err != nil {
		t.Fatal(err)
	}
	got, want := engine(t, r, m.Rec, in, refTol)
	steps := want.Dims[1]
	gs, _, err := m.Dict.Decode(got, steps)
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := m.Dict.Decode(float32s(want.V), steps)
	if err != nil {
		t.Fatal(err)
	}
	if gs != text || ws != text {
		t.Errorf("engine read %q, reference %q, want %q", gs, ws, text)
	}
}
