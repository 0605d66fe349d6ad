package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Concat along an axis other than the lanes (rows of an image, matrices
// stacked, a batch) moves each input into its place in the output: the
// lanes stay where they are, so no data crosses the GEMM array.

// rowPlace says where a move layer's rows go in a wider output: in runs
// of run input rows, the k-th run at output row k·outRun + off.
type rowPlace struct {
	run, outRun, off int
}

// placeRows clips a tile of m rows from input row r to its run and
// returns the tile's rows and its first output row.
func (l *layer) placeRows(r, m int) (int, int) {
	p := l.rows
	if p == nil {
		return m, r
	}
	m = min(m, p.run-r%p.run)
	return m, r/p.run*p.outRun + p.off + r%p.run
}

// concatMoves compiles a Concat along axis a, an outer or row axis of the
// output's layout lay (layOf's of its shape), as one move layer per input.
func (c *compiler) concatMoves(n *onnx.Node, ins []*value, lay layout, a int, layOf func([]int) layout) error {
	shape := lay.shape
	out := &value{shape: shape, typ: ins[0].typ, device: device{lay: lay}}
	// inner is the rows of the output one step along a spans.
	inner, isRow := 1, false
	for _, ra := range lay.rows {
		if ra == a {
			isRow = true
		} else if isRow {
			inner *= shape[ra]
		}
	}
	off := 0
	for k, x := range ins {
		if err := c.settle(x, false); err != nil {
			return err
		}
		r := x.root()
		if r.lay.shape == nil {
			r.lay = layOf(r.shape)
		}
		if !eqInts(x.shape, r.shape) || !r.lay.equal(layOf(r.shape)) || x.view != nil || x.cols != nil {
			return fmt.Errorf("Concat input %s after a reshape: %w", x, ErrUnsupported)
		}
		el := r.el()
		if k == 0 {
			out.elem, out.q = el, r.q
		} else if el != out.elem || r.q != out.q {
			return fmt.Errorf("Concat of %v and %v tensors (or different quantisation): %w", out.elem, el, ErrUnsupported)
		}
		l := &layer{kind: lMove, in: r, out: out, accFP: el == f32, acc8: el == i8}
		if isRow {
			l.rows = &rowPlace{run: x.shape[a] * inner, outRun: shape[a] * inner, off: off * inner}
		} else {
			l.outOuter = off
		}
		c.layers = append(c.layers, l)
		off += x.shape[a]
	}
	c.set(n, 0, out)
	return nil
}
