package alidnn

import (
	"slices"
	"testing"
)

// TestBlockSpans: a GEMM runs each output block over the input blocks its
// weights touch: LRN's band only the neighbouring ones, a dense matrix all.
func TestBlockSpans(t *testing.T) {
	band := func(c, size int) *convSpec {
		p := lrnParams{size: size, alpha: 1}
		w := make([]float32, c*c)
		for o := range c {
			lo, hi := p.window(o, c)
			for i := lo; i <= hi; i++ {
				w[o*c+i] = 1
			}
		}
		return &convSpec{kh: 1, kw: 1, ic: c, oc: c, fp: true, wF: w}
	}
	dense := &convSpec{kh: 1, kw: 1, ic: 40, oc: 20, wI: fillI(40*20, 3)}
	corners := &convSpec{kh: 1, kw: 1, ic: 40, oc: 20, wI: make([]int64, 40*20)}
	corners.wI[0], corners.wI[len(corners.wI)-1] = 1, -1
	zero := &convSpec{kh: 1, kw: 1, ic: 40, oc: 20, wI: make([]int64, 40*20)}
	for _, c := range []struct {
		name string
		cv   *convSpec
		want [][2]int
	}{
		{"lrn 96 size 5", band(96, 5), [][2]int{{0, 2}, {0, 3}, {1, 4}, {2, 5}, {3, 6}, {4, 6}}},
		{"lrn 40 size 35", band(40, 35), [][2]int{{0, 3}, {0, 3}, {0, 3}}},
		{"lrn 64 size 35", band(64, 35), [][2]int{{0, 3}, {0, 4}, {0, 4}, {1, 4}}},
		{"dense", dense, [][2]int{{0, 3}, {0, 3}}},
		{"corners", corners, [][2]int{{0, 1}, {2, 3}}},
		{"all zero", zero, [][2]int{{0, 1}, {0, 1}}},
	} {
		ob, kb := (c.cv.oc+lanes-1)/lanes, (c.cv.ic+lanes-1)/lanes
		if got := blockSpans(c.cv, 1, ob, kb); !slices.Equal(got, c.want) {
			t.Errorf("%s: spans %v, want %v", c.name, got, c.want)
		}
	}
}
