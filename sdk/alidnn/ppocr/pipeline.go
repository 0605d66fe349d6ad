package ppocr

import (
	"context"
	"fmt"
	"image"
	"image/draw"
	"strings"
)

// ClsThresh is how sure the classifier must be that a line is upside down
// before it is turned, PaddleOCR's default.
const ClsThresh = 0.9

// Result is one text line read.
type Result struct {
	Box    Box
	Upside bool    // the classifier turned the line by 180°
	Text   string  // the recogniser's decoded text, spaces at its ends trimmed
	Score  float64 // its mean character probability
}

// Read runs PP-OCR on img with r: the detector's boxes in reading order,
// each line cropped, turned when the direction classifier says so, and
// recognised.
func Read(ctx context.Context, r *Runner, m *Models, img image.Image) ([]Result, error) {
	in := Det(img)
	prob, err := r.Run(ctx, m.Det, in)
	if err != nil {
		return nil, fmt.Errorf("detector: %w", err)
	}
	pv, err := prob.Float32s()
	if err != nil {
		return nil, fmt.Errorf("detector output: %w", err)
	}
	boxes, err := Boxes(pv, int(in.Dims[2]), int(in.Dims[3]), img.Bounds())
	if err != nil {
		return nil, fmt.Errorf("detector output: %w", err)
	}
	var out []Result
	for _, b := range boxes {
		res, err := readLine(ctx, r, m, crop(img, b.Rectangle))
		if err != nil {
			return nil, fmt.Errorf("text line at %v: %w", b.Rectangle, err)
		}
		res.Box = b
		out = append(out, res)
	}
	return out, nil
}

// readLine classifies the direction of line and recognises it.
func readLine(ctx context.Context, r *Runner, m *Models, line *image.RGBA) (Result, error) {
	var res Result
	cin, err := Cls(line)
	if err != nil {
		return res, err
	}
	c, err := r.Run(ctx, m.Cls, cin)
	if err != nil {
		return res, fmt.Errorf("direction classifier: %w", err)
	}
	cp, err := c.Float32s()
	if err != nil || len(cp) != 2 {
		return res, fmt.Errorf("direction classifier output %v: %d values, want 2 (%v)", c.Dims, len(cp), err)
	}
	if cp[1] > cp[0] && cp[1] >= ClsThresh {
		res.Upside = true
		line = rotate180(line)
	}
	rin, err := Rec(line)
	if err != nil {
		return res, err
	}
	p, err := r.Run(ctx, m.Rec, rin)
	if err != nil {
		return res, fmt.Errorf("recogniser: %w", err)
	}
	pv, err := p.Float32s()
	if err != nil || len(p.Dims) != 3 {
		return res, fmt.Errorf("recogniser output %v: %v", p.Dims, err)
	}
	res.Text, res.Score, err = m.Dict.Decode(pv, int(p.Dims[1]))
	// A box reaches past the line's ink by a margin (DB's unclip), where
	// the recogniser now and then reads a space: no ink bounds it, so it
	// is the margin, not a word break.
	res.Text = strings.TrimSpace(res.Text)
	return res, err
}

// crop copies rect of img into a new image.
func crop(img image.Image, rect image.Rectangle) *image.RGBA {
	out := image.NewRGBA(image.Rect(0, 0, rect.Dx(), rect.Dy()))
	draw.Draw(out, out.Bounds(), img, rect.Min, draw.Src)
	return out
}
