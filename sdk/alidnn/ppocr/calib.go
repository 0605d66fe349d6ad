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
// detector, pages of calibTexts at the input's size (see detCalibration)
// and its finest layers kept in fp32 (see detFloat); for the classifier
// and the recogniser (its attention in fp32, see attentionMatMuls), each of calibTexts rendered at 16 to 34 px, cropped
// to its ink and laid out at the input's width (upright and upside down
// for the classifier).
func Calibration(m *Models) Calibrator {
	return func(model *onnx.Model, dims []int64) (Int8Plan, error) {
		if len(dims) != 4 {
			return Int8Plan{}, fmt.Errorf("input dims %v: want NCHW", dims)
		}
		h, w := int(dims[2]), int(dims[3])
		switch model {
		case m.Det:
			ins, err := detCalibration(h, w)
			return Int8Plan{Inputs: ins, Float: detFloat(model)}, err
		case m.Rec:
			ins, err := lineCalibration(true, w)
			return Int8Plan{Inputs: ins, Float: attentionMatMuls(model)}, err
		case m.Cls:
			ins, err := lineCalibration(false, w)
			return Int8Plan{Inputs: ins}, err
		}
		return Int8Plan{}, fmt.Errorf("no calibration for a model other than the detector, classifier and recogniser")
	}
}

// lineCalibration returns calibTexts as the recogniser's inputs at width
// w (rec), or as the classifier's, upright and upside down.
func lineCalibration(rec bool, w int) ([]Input, error) {
	var ins []Input
	for k, s := range calibTexts {
		for _, upside := range []bool{false, true} {
			if upside && rec {
				continue
			}
			line, err := renderLine(s, float64(16+6*k), upside)
			if err != nil {
				return nil, err
			}
			in, err := Cls(line)
			if rec {
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

// detFloat names the detector's convolutions that run before its
// backbone reaches 1/16 of the page's resolution: the strides of its
// convolutions, in graph order, multiplied until they reach 16. At 1/2 to
// 1/8 the layers see the strokes themselves, and their int8 error moves
// the edges of the probability map DB draws its boxes from — a box a few
// pixels too tall or wide makes the recogniser read a stray character at
// the line's end, as the int8 detector did at 20 and 32 px.
func detFloat(m *onnx.Model) []string {
	var names []string
	scale := int64(1)
	for _, n := range m.Graph.Nodes {
		if n.OpType != "Conv" {
			continue
		}
		for _, a := range n.Attrs {
			if a.Name == "strides" && len(a.Ints) > 0 {
				scale *= a.Ints[0]
			}
		}
		if scale >= 16 {
			break
		}
		names = append(names, n.Name)
	}
	return names
}

// attentionMatMuls names the MatMuls of two computed tensors: the
// recogniser's attention, Q·Kᵀ and softmax·V. In int8 their error over
// the few tokens of a line makes the CTC decoder read a stray "." at a
// line's end (20 px, upside down); in fp32 they cost the recogniser little.
func attentionMatMuls(m *onnx.Model) []string {
	consts := map[string]bool{}
	for _, t := range m.Graph.Initializers {
		consts[t.Name] = true
	}
	for _, n := range m.Graph.Nodes {
		if n.OpType == "Constant" {
			consts[n.Outputs[0]] = true
		}
	}
	var names []string
	for _, n := range m.Graph.Nodes {
		if n.OpType == "MatMul" && len(n.Inputs) == 2 && !consts[n.Inputs[0]] && !consts[n.Inputs[1]] {
			names = append(names, n.Name)
		}
	}
	return names
}

// detCalibration renders calibTexts on h×w pages, one page per text size
// from 16 to 34 px (the sizes the recogniser is calibrated at), as many
// lines as a page holds (at least one), and returns them as the
// detector's inputs: activations grow with the size of the text, and a
// range calibrated on small text only clips large text's.
func detCalibration(h, w int) ([]Input, error) {
	var ins []Input
	for k, px := range []float64{16, 22, 28, 34} {
		var lines []Line
		for i, y := 0, 8; i < len(calibTexts) && (i == 0 || y+int(px)+8 <= h); i, y = i+1, y+int(px)+16 {
			lines = append(lines, Line{Text: calibTexts[(i+k)%len(calibTexts)], Size: px, X: 8 + 12*i, Y: y})
		}
		img, err := Render(w, h, lines, k%2 == 1, 8, uint64(7+k))
		if err != nil {
			return nil, err
		}
		ins = append(ins, Det(img))
	}
	return ins, nil
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
