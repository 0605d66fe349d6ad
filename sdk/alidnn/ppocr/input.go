package ppocr

import (
	"fmt"
	"image"
	"math"

	"golang.org/x/image/draw"
)

// Input is a model's input: NCHW float32 values of one image.
type Input struct {
	Dims []int64 // [1, 3, H, W]
	V    []float32
}

// The recogniser's and classifier's height.
const LineHeight = 48

// ClsWidth is the direction classifier's input width.
const ClsWidth = 192

// Det is the detector's input for img: the image as it is, its sides
// padded with white up to multiples of 32, normalised per channel by
// ImageNet's mean and deviation as PaddleOCR's DBNet pre-processing does.
func Det(img image.Image) Input {
	b := img.Bounds()
	h, w := (b.Dy()+31)/32*32, (b.Dx()+31)/32*32
	mean, std := [3]float64{0.485, 0.456, 0.406}, [3]float64{0.229, 0.224, 0.225}
	in := Input{Dims: []int64{1, 3, int64(h), int64(w)}, V: make([]float32, 3*h*w)}
	for y := range h {
		for x := range w {
			px := [3]float64{1, 1, 1}
			if x < b.Dx() && y < b.Dy() {
				r, g, bl, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
				px = [3]float64{float64(r) / 0xffff, float64(g) / 0xffff, float64(bl) / 0xffff}
			}
			for c := range 3 {
				in.V[(c*h+y)*w+x] = float32((px[c] - mean[c]) / std[c])
			}
		}
	}
	return in
}

// RecStep is what the recogniser's input width is rounded up to: a
// multiple of its stride along the line (8), coarse enough that lines of
// similar lengths share a compiled program (the engine runs static
// shapes).
const RecStep = 64

// Rec is the recogniser's input for a text line: scaled to LineHeight
// pixels high keeping its aspect, its width rounded up to a multiple of
// RecStep with 0 — mid grey once normalised, as PaddleOCR pads — and
// values mapped to [−1, 1].
func Rec(line image.Image) (Input, error) {
	b := line.Bounds()
	if b.Dx() < 1 || b.Dy() < 1 {
		return Input{}, fmt.Errorf("text line %v is empty", b)
	}
	w := max(1, int(math.Ceil(float64(b.Dx())*LineHeight/float64(b.Dy()))))
	return lineInput(line, w, (w+RecStep-1)/RecStep*RecStep), nil
}

// RecAt is Rec's input for a line at a given width: scaled to LineHeight
// pixels high keeping its aspect, squeezed to width if wider, padded as
// Rec pads if narrower — a calibration sample for the recogniser compiled
// for that width.
func RecAt(line image.Image, width int) (Input, error) {
	b := line.Bounds()
	if b.Dx() < 1 || b.Dy() < 1 || width < 1 {
		return Input{}, fmt.Errorf("text line %v at width %d is empty", b, width)
	}
	w := min(width, max(1, int(math.Ceil(float64(b.Dx())*LineHeight/float64(b.Dy())))))
	return lineInput(line, w, width), nil
}

// Cls is the direction classifier's input for a text line: scaled to
// LineHeight pixels high keeping its aspect, at most ClsWidth wide, padded
// to ClsWidth as Rec pads.
func Cls(line image.Image) (Input, error) {
	b := line.Bounds()
	if b.Dx() < 1 || b.Dy() < 1 {
		return Input{}, fmt.Errorf("text line %v is empty", b)
	}
	w := min(ClsWidth, max(1, int(math.Ceil(float64(b.Dx())*LineHeight/float64(b.Dy())))))
	return lineInput(line, w, ClsWidth), nil
}

// lineInput scales line to w×LineHeight bilinearly and lays it out in a
// [1,3,LineHeight,width] input, values (v/255 − 0.5)/0.5, the rest 0.
func lineInput(line image.Image, w, width int) Input {
	scaled := image.NewRGBA(image.Rect(0, 0, w, LineHeight))
	draw.BiLinear.Scale(scaled, scaled.Bounds(), line, line.Bounds(), draw.Src, nil)
	in := Input{Dims: []int64{1, 3, LineHeight, int64(width)}, V: make([]float32, 3*LineHeight*width)}
	for y := range LineHeight {
		for x := range w {
			p := scaled.RGBAAt(x, y)
			for c, v := range [3]uint8{p.R, p.G, p.B} {
				in.V[(c*LineHeight+y)*width+x] = (float32(v)/255 - 0.5) / 0.5
			}
		}
	}
	return in
}
