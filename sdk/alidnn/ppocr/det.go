package ppocr

import (
	"fmt"
	"image"
	"math"
	"sort"
)

// DB post-processing thresholds, PaddleOCR's defaults: a pixel is text
// above Thresh; a region is kept if its mean probability reaches
// BoxThresh, then grown by UnclipRatio (the detector learns text regions
// shrunk by about that much).
const (
	Thresh      = 0.3
	BoxThresh   = 0.6
	UnclipRatio = 1.5
	minSide     = 3
)

// Box is a detected text region and its mean probability.
type Box struct {
	image.Rectangle
	Score float64
}

// Boxes turns the detector's probability map [h, w] (its input's size)
// into text boxes within bounds (the image before padding), upright
// rectangles in reading order: each 4-connected region of pixels above
// Thresh whose mean probability reaches BoxThresh, its bounding box grown
// on every side by area·UnclipRatio/perimeter as DB's unclip grows it.
func Boxes(prob []float32, h, w int, bounds image.Rectangle) ([]Box, error) {
	if h < 1 || w < 1 || len(prob) != h*w {
		return nil, fmt.Errorf("probability map of %d values for %d×%d", len(prob), h, w)
	}
	seen := make([]bool, h*w)
	var boxes []Box
	var queue []int
	for start := range prob {
		if seen[start] || prob[start] <= Thresh {
			continue
		}
		r := image.Rect(start%w, start/w, start%w+1, start/w+1)
		var sum float64
		queue = append(queue[:0], start)
		seen[start] = true
		for i := 0; i < len(queue); i++ {
			p := queue[i]
			x, y := p%w, p/w
			sum += float64(prob[p])
			r = r.Union(image.Rect(x, y, x+1, y+1))
			for _, q := range [4][2]int{{x - 1, y}, {x + 1, y}, {x, y - 1}, {x, y + 1}} {
				if q[0] < 0 || q[0] >= w || q[1] < 0 || q[1] >= h {
					continue
				}
				n := q[1]*w + q[0]
				if !seen[n] && prob[n] > Thresh {
					seen[n] = true
					queue = append(queue, n)
				}
			}
		}
		score := sum / float64(len(queue))
		if score < BoxThresh || r.Dx() < minSide || r.Dy() < minSide {
			continue
		}
		d := int(math.Round(float64(r.Dx()*r.Dy()) * UnclipRatio / float64(2*(r.Dx()+r.Dy()))))
		grown := image.Rect(r.Min.X-d, r.Min.Y-d, r.Max.X+d, r.Max.Y+d).Add(bounds.Min).Intersect(bounds)
		if !grown.Empty() {
			boxes = append(boxes, Box{grown, score})
		}
	}
	sort.SliceStable(boxes, func(i, j int) bool {
		a, b := boxes[i], boxes[j]
		if a.Max.Y <= b.Min.Y || b.Max.Y <= a.Min.Y { // on different lines
			return a.Min.Y < b.Min.Y
		}
		return a.Min.X < b.Min.X
	})
	return boxes, nil
}
