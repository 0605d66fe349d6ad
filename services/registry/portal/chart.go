package portal

import (
	"fmt"
	"sort"
)

// barChart is a server-rendered SVG bar chart: geometry computed here, the
// template draws rects with presentation attributes and classes only (the
// CSP forbids inline style).
type barChart struct {
	ID, Title     string
	Width, Height int
	PlotLeft      int
	PlotBottom    int // y of the x axis
	Bars          []bar
	YTicks        []tick
	XTicks        []tick
}

type bar struct {
	X, Y, W, H string
	Label      string // the bar's tooltip and accessible text
}

type tick struct {
	Pos    string
	Label  string
	Anchor string // text-anchor: the first and last labels stay inside the plot
}

// Chart geometry in SVG user units; the SVG scales to its box.
const (
	chartW, chartH       = 720, 240
	chartLeft, chartTop  = 84, 12
	chartRight, chartBot = 8, 28
)

// newBarChart draws one bar a key (in the given order) of height values[k]
// against a y axis from 0 to the largest value; yLabel formats axis values.
func newBarChart(id, title string, keys []string, values map[string]int64, labels map[string]string, yLabel func(int64) string) barChart {
	c := barChart{ID: id, Title: title, Width: chartW, Height: chartH, PlotLeft: chartLeft, PlotBottom: chartH - chartBot}
	plotW, plotH := float64(chartW-chartLeft-chartRight), float64(chartH-chartTop-chartBot)
	var top int64
	for _, k := range keys {
		top = max(top, values[k])
	}
	if top == 0 {
		top = 1
	}
	n := max(len(keys), 1)
	step := plotW / float64(n)
	gap := step * 0.2
	for i, k := range keys {
		h := float64(values[k]) / float64(top) * plotH
		x := float64(chartLeft) + float64(i)*step + gap/2
		c.Bars = append(c.Bars, bar{X: f1(x), Y: f1(float64(chartTop) + plotH - h), W: f1(step - gap), H: f1(h), Label: labels[k]})
	}
	for _, f := range []float64{0, 0.5, 1} {
		c.YTicks = append(c.YTicks, tick{Pos: f1(float64(chartTop) + plotH*(1-f)), Label: yLabel(int64(f * float64(top)))})
	}
	// Labels under the first, middle and last bars; fewer when few bars.
	idx := map[int]bool{0: true, len(keys) / 2: true, len(keys) - 1: true}
	var at []int
	for i := range idx {
		if i >= 0 && i < len(keys) {
			at = append(at, i)
		}
	}
	sort.Ints(at)
	for j, i := range at {
		t := tick{Pos: f1(float64(chartLeft) + (float64(i)+0.5)*step), Label: keys[i], Anchor: "middle"}
		switch {
		case len(at) == 1:
		case j == 0:
			t.Pos, t.Anchor = f1(float64(chartLeft)+float64(i)*step+gap/2), "start"
		case j == len(at)-1:
			t.Pos, t.Anchor = f1(float64(chartLeft)+float64(i+1)*step-gap/2), "end"
		}
		c.XTicks = append(c.XTicks, t)
	}
	return c
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
