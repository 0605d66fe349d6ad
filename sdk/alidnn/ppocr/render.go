package ppocr

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"math/rand/v2"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// Line is one line of text to render: its text, font size in pixels and
// top-left position of its line box.
type Line struct {
	Text string
	Size float64
	X, Y int
}

// Render draws lines in black Go Regular on a white w×h image, turned
// by 180° when upside, with light noise: every channel of every pixel
// moved by up to ±noise levels (0 for none), from a generator seeded by
// seed so that the image is the same every run.
func Render(w, h int, lines []Line, upside bool, noise int, seed uint64) (*image.RGBA, error) {
	f, err := opentype.Parse(goregular.TTF)
	if err != nil {
		return nil, fmt.Errorf("parsing Go Regular: %w", err)
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	for _, l := range lines {
		face, err := opentype.NewFace(f, &opentype.FaceOptions{Size: l.Size, DPI: 72, Hinting: font.HintingFull})
		if err != nil {
			return nil, fmt.Errorf("Go Regular at %g px: %w", l.Size, err)
		}
		d := font.Drawer{Dst: img, Src: image.NewUniform(color.Black), Face: face,
			Dot: fixed.P(l.X, l.Y+face.Metrics().Ascent.Ceil())}
		d.DrawString(l.Text)
		face.Close()
	}
	if upside {
		img = rotate180(img)
	}
	if noise > 0 {
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		for k := range img.Pix {
			if k%4 == 3 {
				continue // alpha
			}
			v := int(img.Pix[k]) + r.IntN(2*noise+1) - noise
			img.Pix[k] = uint8(min(max(v, 0), 255))
		}
	}
	return img, nil
}

// rotate180 turns img by 180°.
func rotate180(img *image.RGBA) *image.RGBA {
	b := img.Bounds()
	out := image.NewRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			out.SetRGBA(b.Max.X-1-(x-b.Min.X), b.Max.Y-1-(y-b.Min.Y), img.RGBAAt(x, y))
		}
	}
	return out
}
