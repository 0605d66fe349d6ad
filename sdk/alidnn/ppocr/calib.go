package ppocr

import (
	"fmt"
	"image"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// calibTexts are the lines int8 programs are calibrated on: pangrams,
// digits and punctuation, none of them a line the tests read.
var calibTexts = []string{"Pack my box with five dozen", "liquor jugs: 0123456789", "WALTZ, NYMPH, FOR QUICK JIGS", "vex bud? (sphinx) #1 & 2%"}

// Calibration returns the Calibrator of m's three models: for the
// detector, a page of calibTexts at the input's size; for the classifier
// and the recogniser, each of calibTexts rendered at 16 to 34 px, cropped
// to its ink and laid out at the input's width (upright and upside down
// for the classifier).
func Calibration(m *Models) Calibrator {
	return func(model *onnx.Model, dims []int64) ([]Input, error) {
		if len(dims) != 4 {
			return nil, fmt.Errorf("input dims %v: want NCHW", dims)
		}
		h, w := int(dims[2]), int(dims[3])
		switch model {
		case m.Det:
			return detCalibration(h, w)
		case m.Cls, m.Rec:
			var ins []Input
			for k, s := range calibTexts {
				for _, upside := range []bool{false, true} {
					if upside && model == m.Rec {
						continue
					}
					line, err := renderLine(s, float64(16+6*k), upside)
					if err != nil {
						return nil, err
					}
					in, err := Cls(line)
					if model == m.Rec {
						in, err = RecAt(line, w)
					}
					if err != nil {
						return nil, err
					}
					ins = append(ins, in)
				}
			}
			return ins, nil
		}
		return nil, fmt.Errorf("no calibration for a model other than the detector, classifier and recogniser")
	}
}

// detCalibration renders calibTexts at 20 px, as many lines as an h×w page
// holds (at least one), and returns it as the detector's input.
func detCalibration(h, w int) ([]Input, error) {
	var lines []Line
	for k, y := 0, 8; k < len(calibTexts) && (k == 0 || y+28 <= h); k, y = k+1, y+36 {
		lines = append(lines, Line{Text: calibTexts[k], Size: 20, X: 8 + 12*k, Y: y})
	}
	img, err := Render(w, h, lines, false, 8, 7)
	if err != nil {
		return nil, err
	}
	return []Input{Det(img)}, nil
}

// renderLine renders text alone and crops it to its ink, grown by a
// third of its size on every side (about as the detector's boxes are).
func renderLine(text string, px float64, upside bool) (*image.RGBA, error) {
	w := int(float64(len(text))*px*0.7) + int(2*px)
	img, err := Render(w, int(2*px), []Line{{Text: text, Size: px, X: int(px / 2), Y: int(px / 3)}}, upside, 8, 11)
	if err != nil {
		return nil, err
	}
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
		return nil, fmt.Errorf("%q rendered no ink", text)
	}
	d := int(px / 3)
	ink = image.Rect(ink.Min.X-d, ink.Min.Y-d, ink.Max.X+d, ink.Max.Y+d).Intersect(b)
	return crop(img, ink), nil
}
