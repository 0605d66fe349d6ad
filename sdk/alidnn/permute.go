package alidnn

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Transposes of computed tensors that reorder their data — an attention's
// head split [N,S,H,D] → [N,H,S,D] and merge, a key's [N,S,H,D] →
// [N,H,D,S], a token flatten [N,C,L] → [N,L,C] — run on the engine. The
// engine moves no value across lanes outside the GEMM array, so a
// permutation whose 16-lane blocks stay whole (each output element is one
// input element, lane for lane) is a permute layer: DMA LOADs gather the
// input's elements into the accumulator in output order and a STORE writes
// them back. One that also swaps the last two axes, both multiples of 16,
// is that gather followed by a transpose layer (see matmul.go), which a
// MatMul reading Bᵀ drops again; of other sizes, the gather keeps the
// rows on the lanes (transposedLayout), which a MatMul reads as Bᵀ.

// permuteTo compiles x (a device tensor, or an alias of one) transposed
// by perm and stored as a tensor of shape (the transposed shape, or a
// reshape of it): a new device tensor, or an error naming node and why.
func (c *compiler) permuteTo(node string, x *value, perm, shape []int) (*value, error) {
	r := x.root()
	if x.host != nil || x.cols != nil {
		return nil, fmt.Errorf("Transpose %q %v of %s, which is not stored on the device as it is: %w", node, perm, x, ErrUnsupported)
	}
	if err := c.settle(r, false); err != nil {
		return nil, err
	}
	if _, err := c.deviceInput(r, matLayout(r.shape)); err != nil {
		return nil, err
	}
	if err := c.materialize(r); err != nil {
		return nil, err
	}
	if r.el() != f32 {
		return nil, fmt.Errorf("Transpose %q %v of the %v tensor %s: only fp32 tensors are permuted on the engine: %w", node, perm, r.el(), x, ErrUnsupported)
	}
	for _, lay := range []layout{matLayout(shape), convLayout(shape)} {
		if src, ok := gatherMap(r.lay, x.shape, perm, lay); ok {
			return c.permuteLayer(r, shape, lay, src), nil
		}
	}
	// The lane axis moves to the next-to-last place: gather into the
	// shape with the last two axes swapped, then swap them on the array.
	k := len(perm)
	t := slices.Clone(x.shape)
	for i, a := range perm {
		t[i] = x.shape[a]
	}
	if k >= 2 && eqInts(t, shape) && t[k-1]%lanes == 0 && t[k-2]%lanes == 0 {
		p2 := slices.Clone(perm)
		p2[k-2], p2[k-1] = p2[k-1], p2[k-2]
		s2 := slices.Clone(shape)
		s2[k-2], s2[k-1] = s2[k-1], s2[k-2]
		lay := matLayout(s2)
		if src, ok := gatherMap(r.lay, x.shape, p2, lay); ok {
			return c.transposeLast(c.permuteLayer(r, s2, lay, src))
		}
	}
	// Or its last two axes keep the storage's order, the rows on the
	// lanes: a MatMul reads that as Bᵀ.
	if k >= 2 && eqInts(t, shape) {
		lay := transposedLayout(shape)
		if src, ok := gatherMap(r.lay, x.shape, perm, lay); ok {
			return c.permuteLayer(r, shape, lay, src), nil
		}
	}
	if v, ok, err := c.permuteGroups(node, r, x.shape, perm, shape); ok || err != nil {
		return v, err
	}
	if v, ok, err := c.permuteUngroup(node, r, x.shape, perm, shape); ok || err != nil {
		return v, err
	}
	return nil, fmt.Errorf("Transpose %q %v of the computed tensor %s moves values between the lanes of its 16-lane blocks (only permutations keeping the lane axis's blocks whole, or swapping the last two axes when both are multiples of %d, run on the engine): %w",
		node, perm, x, lanes, ErrUnsupported)
}

// relaid returns b, of a's shape, stored as a is, for a step of a's layer
// to read: b itself, or when b's producer laid it out otherwise (a BOOL
// mask staged for broadcasting, beside a computed tensor of its shape) a
// permute layer gathering it into a's layout, which keeps each value in
// its lane. Layouts a permute cannot reach stay as they are, for the
// caller to refuse.
func (c *compiler) relaid(b, a *value) (*value, error) {
	r, ar := b.root(), a.root()
	if r.lay.shape == nil || ar.lay.shape == nil || !eqInts(a.shape, ar.shape) || !eqInts(b.shape, a.shape) ||
		r.bcast != nil || r.el() != f32 || r.lay.equal(ar.lay) || sameStorage(r.lay, ar.lay) {
		return b, nil
	}
	src, ok := gatherMap(r.lay, b.shape, seq(len(b.shape)), ar.lay)
	if !ok {
		return b, nil
	}
	if err := c.settle(r, false); err != nil {
		return nil, err
	}
	return c.permuteLayer(r, b.shape, ar.lay, src), nil
}

// permuteLayer adds the layer gathering r's elements src (−1 for a zero
// element) into a new fp32 tensor of shape laid out as lay.
func (c *compiler) permuteLayer(r *value, shape []int, lay layout, src []int) *value {
	l := &layer{kind: lPermute, in: r, accFP: true, gather: src}
	// Padding lanes are gathered from padding lanes (see gatherMap).
	out := &value{shape: shape, typ: r.typ, device: device{lay: lay, layer: l, elem: f32, zeroPad: r.zeroPad}}
	l.out = out
	c.layers = append(c.layers, l)
	return out
}

// gatherMap returns, for every element of a tensor of out's shape laid out
// as out, the element of the input laid out as in that holds its lanes,
// the output's row-major values being those of the input of shape xs
// transposed by perm. It reports false unless every output element is one
// input element with each value in the same lane, and the same number of
// them (so padding lanes stay padding).
func gatherMap(in layout, xs, perm []int, out layout) ([]int, bool) {
	inOff, outOff := in.offsets(), out.offsets()
	st := rowMajorStrides(xs)
	ts := make([]int, len(perm))
	for k, a := range perm {
		ts[k] = xs[a]
	}
	src := make([]int, out.elems())
	for e := range src {
		src[e] = -1
	}
	nOut, nIn := make([]int, len(src)), make([]int, in.elems())
	idx := make([]int, len(ts))
	for _, o := range outOff {
		i := 0
		for k, a := range perm {
			i += idx[k] * st[a]
		}
		s := inOff[i]
		e := o / lanes
		if o%lanes != s%lanes || src[e] >= 0 && src[e] != s/lanes {
			return nil, false
		}
		src[e] = s / lanes
		nOut[e]++
		nIn[s/lanes]++
		for a := len(idx) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < ts[a] {
				break
			}
			idx[a] = 0
		}
	}
	for e, s := range src {
		if s < 0 || nOut[e] != nIn[s] {
			return nil, false
		}
	}
	return src, true
}

// maxField is the largest y_size, x_size or x_stride a LOAD encodes.
const maxField = 1<<16 - 1

// gatherRun is the LOAD reading the longest prefix of the elements src it
// can: y rows of x consecutive elements, stride apart.
func gatherRun(src []int) (y, x, stride int) {
	x = 1
	for x < len(src) && x < maxField && src[x] == src[0]+x {
		x++
	}
	y, stride = 1, x
	if x == len(src) {
		return y, x, stride
	}
	st := src[x] - src[0]
	if st < x || st > maxField {
		return y, x, stride
	}
	for (y+1)*x <= len(src) && y < maxField && rowAt(src[y*x:(y+1)*x], src[0]+y*st) {
		y++
	}
	if y > 1 {
		stride = st
	}
	return y, x, stride
}

// rowAt reports whether row is the consecutive elements from start.
func rowAt(row []int, start int) bool {
	for k, s := range row {
		if s != start+k {
			return false
		}
	}
	return true
}

// permute emits a permute layer: tiles of the accumulator's size filled
// by LOADs of the input's elements in output order, each stored whole.
// gatherRun never starts at a zero element, and stops before one.
func (e *emitter) permute(l *layer) error {
	const eb = lanes * 4
	src := l.gather
	var zero uint64
	if slices.Contains(src, -1) {
		zero = e.blob(make([]byte, eb))
	}
	// Tiles alternate between the two halves of the accumulator, so a
	// tile's loads need not wait for the STORE of the one before.
	half := hw.AccSize / 2
	e.buffers(1, 2)
	for t0, k := 0, 0; t0 < len(src); t0, k = t0+half, k+1 {
		t1 := min(len(src), t0+half)
		base := k % 2 * half
		e.beginTile()
		for p := t0; p < t1; {
			if src[p] < 0 {
				// A run of zero elements: the zero element padded on
				// both sides.
				z := 1
				for p+z < t1 && z < 31 && src[p+z] < 0 {
					z++
				}
				ld := load(isa.MemAcc, f32, base+p-t0, zero, 1, 1, 1)
				ld.PadX0 = uint8(min(z-1, 15))
				ld.PadX1 = uint8(z - 1 - int(ld.PadX0))
				e.compute(ld, false)
				p += z
				continue
			}
			y, x, stride := gatherRun(src[p:t1])
			e.compute(load(isa.MemAcc, f32, base+p-t0, l.in.addr+uint64(src[p]*eb), y, x, stride), false)
			p += y * x
		}
		e.store(isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: isa.FP32, SRAM: uint32(base), DRAM: l.out.addr + uint64(t0*eb),
			YSize: 1, XSize: uint32(t1 - t0), XStride: uint32(t1 - t0)})
	}
	return nil
}

// permuteNode compiles the Transpose n of x on the engine.
func (c *compiler) permuteNode(n *onnx.Node, x *value, perm, shape []int) error {
	v, err := c.permuteTo(n.Name, x, perm, shape)
	if err != nil {
		return err
	}
	c.set(n, 0, v)
	return nil
}
