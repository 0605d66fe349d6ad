package onnxtest_test

import (
	"math"
	"math/rand/v2"
)

// synth draws labelled 3×32×32 images of six pattern classes: stripes in
// four orientations, a checkerboard and a blob, each at a random period or
// size, phase and colour, over a random background with uniform noise.
// Only correctly rounded arithmetic is used (no math.Sin or math.Exp,
// whose last bits differ between architectures), so the images are the
// same bits everywhere.
type synth struct{ r *rand.Rand }

const (
	synthClasses = 6
	synthSide    = 32
	synthNoise   = 0.4
)

var synthShape = shape{3, synthSide, synthSide}

func newSynth(seed uint64) *synth { return &synth{rand.New(rand.NewPCG(seed, 0x5eed))} }

// uniform is a draw from [lo, hi).
func (s *synth) uniform(lo, hi float64) float64 { return lo + float64((hi-lo)*s.r.Float64()) }

// next returns an image and its class.
func (s *synth) next() ([]float64, int) {
	label := s.r.IntN(synthClasses)
	period, phase := s.uniform(4, 9), s.uniform(0, 1)
	ci, cj, radius := s.uniform(8, 24), s.uniform(8, 24), s.uniform(5, 11)
	var bg, fg [3]float64
	for c := range bg {
		bg[c] = s.uniform(-0.5, 0.5)
		d := s.uniform(0.6, 1.4)
		if s.r.IntN(2) == 0 {
			d = -d
		}
		fg[c] = bg[c] + d
	}
	x := make([]float64, synthShape.size())
	for i := range synthSide {
		for j := range synthSide {
			fi, fj := float64(i), float64(j)
			var p float64 // the pattern's weight of fg over bg, in [0, 1]
			switch label {
			case 0:
				p = triangle(fi/period + phase)
			case 1:
				p = triangle(fj/period + phase)
			case 2:
				p = triangle((fi+fj)/period + phase)
			case 3:
				p = triangle((fi-fj)/period + phase)
			case 4:
				p = float64(int(math.Floor(fi/period*2+phase)+math.Floor(fj/period*2+phase)) & 1)
			case 5:
				di, dj := fi-ci, fj-cj
				p = max(0, 1-(float64(di*di)+float64(dj*dj))/float64(radius*radius))
			}
			for c := range 3 {
				x[(c*synthSide+i)*synthSide+j] = bg[c] + float64((fg[c]-bg[c])*p) + float64(synthNoise*s.uniform(-1, 1))
			}
		}
	}
	return x, label
}

// triangle is a triangle wave of period 1 between 0 and 1.
func triangle(t float64) float64 { return math.Abs(2*(t-math.Floor(t)) - 1) }

// batch draws n images and their classes.
func (s *synth) batch(n int) ([][]float64, []int) {
	xs, ys := make([][]float64, n), make([]int, n)
	for k := range n {
		xs[k], ys[k] = s.next()
	}
	return xs, ys
}
