package alidnn

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// A Reshape that splits a matrix's lane axis into groups of D values, D
// not a multiple of 16 — the fused QKV projection [N,S,3·H·D] of an
// attention whose heads are 15 wide (PP-OCRv4's SVTR, 120 = 8 × 15) viewed
// as [N,S,3,H,D] — leaves groups straddling 16-lane blocks, which no
// permutation of whole blocks can split into heads. permuteGroups moves
// the groups onto block boundaries first: a MatMul by a constant 0/1
// matrix [C, G·⌈D/16⌉·16] copies group g's values to the lanes of its own
// block(s), the rest of each block 0 — exact for finite values, each
// output lane one product by 1 plus products by 0. Its output is the
// split tensor laid out with the group axes outer (groupLayout), which the
// permutation then gathers block by block. The heads' merge back,
// [N,H,S,D] → [N,S,H,D] → [N,S,H·D], is the reverse (permuteUngroup): the
// gather into groups, then the transposed 0/1 matrix packing them.

// groupLayout is, for a view of shape xs of the matrix stack of shape rs
// [..., M, C] that splits its lane axis into trailing axes ending in D
// (xs = rs's leading axes ++ factors of C), D not a multiple of 16, the
// layout of shape xs with rs's leading axes and then the group axes
// outer, D on the lanes (zero-padded) and M the rows: a matrix stack
// [..., M, G·⌈D/16⌉·16] with each of the G groups of C in blocks of its
// own, element for element. ok is false when xs is not such a view.
func groupLayout(rs, xs []int) (lay layout, G int, ok bool) {
	k, j := len(xs), len(rs)-1
	if j < 1 || k <= j+1 || !slices.Equal(xs[:j], rs[:j]) {
		return layout{}, 0, false
	}
	C, D := rs[j], xs[k-1]
	if prod(xs, seq(k)[j:]) != C || D%lanes == 0 {
		return layout{}, 0, false
	}
	return layout{shape: xs, outer: append(seq(j-1), seq(k - 1)[j:]...), lane: k - 1, rows: []int{j - 1}}, C / D, true
}

// groupMatrix is the 0/1 matrix [C, G·width] copying each group of D
// lanes of C = G·D to a block of width lanes of its own, or its
// transpose [G·width, C] packing them back.
func groupMatrix(G, D, width int, pack bool) []float32 {
	C := G * D
	w := make([]float32, C*G*width)
	for g := range G {
		for d := range D {
			if pack {
				w[(g*width+d)*C+g*D+d] = 1
			} else {
				w[(g*D+d)*G*width+g*width+d] = 1
			}
		}
	}
	return w
}

// groupCopy is r·w, w the constant [K, N] named after node and what, by a
// MatMul kept in fp32 in int8 models too: it moves values, and the
// permutations around it run on fp32 tensors only.
func (c *compiler) groupCopy(node, what string, r *value, w []float32, K, N int) (*value, error) {
	wn := fmt.Sprintf("%s/%s", node, what)
	c.vals[wn] = constFloat(wn, []int{K, N}, w)
	on := wn + "ed"
	keep := c.keepFP32
	c.keepFP32 = true
	err := c.matmulNode(&onnx.Node{OpType: "MatMul", Name: node, Inputs: []string{r.name, wn}, Outputs: []string{on}})
	c.keepFP32 = keep
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, r, err)
	}
	y := c.vals[on]
	if err := c.settle(y, false); err != nil {
		return nil, err
	}
	if y.alias != nil || !y.lay.equal(matLayout(y.shape)) {
		return nil, fmt.Errorf("%s %s: the copy %s is laid out %+v, not as matrices: %w", what, r, y, y.lay, ErrUnsupported)
	}
	return y, nil
}

// permuteGroups compiles the permutation of x (shape xs, a view of r
// splitting its lanes into groups that straddle 16-lane blocks) as a copy
// of r with each group in blocks of its own, gathered: the groups keep
// their lanes, their last axis on the lanes or, the last two swapped, on
// the rows. The result's padding lanes are the copy's zeros. ok is false
// when x is not such a view or the permutation moves values within
// groups.
func (c *compiler) permuteGroups(node string, r *value, xs, perm, shape []int) (*value, bool, error) {
	if !r.lay.equal(matLayout(r.shape)) {
		return nil, false, nil
	}
	in, G, ok := groupLayout(r.shape, xs)
	if !ok {
		return nil, false, nil
	}
	for _, lay := range []layout{matLayout(shape), convLayout(shape), transposedLayout(shape)} {
		src, ok := gatherMap(in, xs, perm, lay)
		if !ok {
			continue
		}
		D := xs[len(xs)-1]
		width := (D + lanes - 1) / lanes * lanes
		y, err := c.groupCopy(node, "regroup", r, groupMatrix(G, D, width, false), G*D, G*width)
		if err != nil {
			return nil, false, err
		}
		v := c.permuteLayer(y, shape, lay, src)
		v.zeroPad = true
		return v, true, nil
	}
	return nil, false, nil
}

// permuteUngroup compiles the permutation of x (a matrix stack of shape
// xs, its last axis D on the lanes) by perm into t, reshaped to shape by
// merging t's trailing axes into its lanes — an attention's heads of D
// values merged back, [N,H,S,D] → [N,S,H,D] → [N,S,H·D], D not a multiple
// of 16 — as the gather of t in groups (see groupLayout), then a MatMul
// by the 0/1 matrix packing the groups. ok is false when it is not such a
// merge.
func (c *compiler) permuteUngroup(node string, r *value, xs, perm, shape []int) (*value, bool, error) {
	t := make([]int, len(perm))
	for i, a := range perm {
		t[i] = xs[a]
	}
	lay, G, ok := groupLayout(shape, t)
	if !ok || !r.lay.equal(matLayout(r.shape)) {
		return nil, false, nil
	}
	src, ok := gatherMap(r.lay, xs, perm, lay)
	if !ok {
		return nil, false, nil
	}
	D := t[len(t)-1]
	width := (D + lanes - 1) / lanes * lanes
	gs := slices.Clone(shape)
	gs[len(gs)-1] = G * width
	g := c.permuteLayer(r, gs, matLayout(gs), src)
	g.name = fmt.Sprintf("%s/grouped", node)
	c.vals[g.name] = g
	y, err := c.groupCopy(node, "ungroup", g, groupMatrix(G, D, width, true), G*width, G*D)
	if err != nil {
		return nil, false, err
	}
	return y, true, nil
}
