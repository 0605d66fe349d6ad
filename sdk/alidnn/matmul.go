package alidnn

// Gemm and MatMul (and their quantised forms): constant weights become a
// GEMM layer's weights (a fully connected layer after a Flatten, a
// convolution covering the image). MatMul of two computed tensors, as
// attention computes Q·Kᵀ and
// softmax(Q·Kᵀ)·V: the second operand becomes the GEMM's weights, read
// from device memory per outer index instead of from the constants. The
// weight SRAM wants B's columns on its rows (w[n][k] = B[k][n]) while B is
// stored with its columns on the lanes, so a transpose layer first writes
// Bᵀ: each 16×16 tile of B loaded as a weight block and multiplied by the
// identity lands transposed in the accumulator.

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// matmulNode compiles MatMul, Gemm and their quantised forms with a constant
// B as a GEMM layer over A's rows; a MatMul of two computed tensors goes to
// matmulComputed.
func (c *compiler) matmulNode(n *onnx.Node) error {
	op := n.OpType
	ai, bi, ci := 0, 1, 2
	if op == "QLinearMatMul" {
		ai, bi, ci = 0, 3, -1
	}
	if op == "MatMul" || op == "MatMulInteger" {
		ci = -1
	}
	a, err := c.need(n, ai)
	if err != nil {
		return err
	}
	if op == "MatMul" {
		if b, err := c.need(n, 1); err == nil && !b.isConst {
			return c.matmulComputed(n, a, b)
		}
	}
	bv, err := c.needConst(n, bi, "B")
	if err != nil {
		return err
	}
	transA, transB, alpha, beta := int64(0), int64(0), float32(1), float32(1)
	if op == "Gemm" {
		if transA, transB, alpha, beta, err = gemmAttrs(n); err != nil {
			return err
		}
		if len(a.shape) != 2 || len(bv.shape) != 2 {
			return fmt.Errorf("Gemm of %v and %v: want matrices", a.shape, bv.shape)
		}
	}
	if op == "MatMul" && (len(a.shape) == 1 || len(bv.shape) == 1) {
		return c.matmulVectors(n, a, bv)
	}
	if len(a.shape) < 2 || len(bv.shape) < 2 {
		return fmt.Errorf("%s of %v and %v: vectors: %w", op, a.shape, bv.shape, ErrUnsupported)
	}
	// The FC layer after a Flatten/Reshape of an NCHW tensor is a
	// convolution whose kernel covers the whole image — unless the tensor
	// is a graph input that element-wise operators read through the same
	// view too: it is then packed as the matrix (see storedAs).
	if r := a.root(); r != a && len(r.shape) == 4 && len(a.shape) == 2 && transA == 0 && a.shape[0] == r.shape[0] && !c.packedAsView(a) {
		return c.fcConv(n, op, a, bv, transB != 0, alpha, beta, ci)
	}
	c.spreadInput(a, bv.shape)
	ra := len(a.shape)
	M, K := a.shape[ra-2], a.shape[ra-1]
	alay := matLayout(a.shape)
	if transA != 0 {
		M, K = K, M
		alay = layout{shape: a.shape, lane: 0, rows: []int{1}}
	}
	rb := len(bv.shape)
	Kb, N := bv.shape[rb-2], bv.shape[rb-1]
	if transB != 0 {
		Kb, N = N, Kb
	}
	if Kb != K {
		return fmt.Errorf("%s of %v and %v: inner dimensions %d and %d differ", op, a.shape, bv.shape, K, Kb)
	}
	lead, bsrc, err := matmulLeading(op, a.shape, bv.shape)
	if err != nil {
		return err
	}
	bbatch := len(bsrc)
	w := matmulWeights(bv, bsrc, bbatch, N, K, transB != 0, alpha)
	outShape := append(lead, M, N)
	spec := &convSpec{kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, ih: M, iw: 1, oh: M, ow: 1, ic: K, oc: N, batched: bbatch > 1}
	// A Reshape that keeps the shape (x.view(b, t, -1)) keeps the rows.
	if r := a.root(); r.input && r.lay.shape == nil && eqInts(a.shape, r.shape) {
		r.lay = alay
	}
	if err := c.gemmNode(gemmParams{n: n, op: op, x: a, w: w, bias: -1, spec: spec, outShape: outShape, outLay: matLayout(outShape)}); err != nil {
		return err
	}
	if ci >= 0 {
		return c.gemmBias(n, ci, beta, outShape)
	}
	return nil
}

// matmulLeading broadcasts the leading (stack) axes of A and a constant B:
// the output's leading axes, and for each of A's matrices in order the
// index of B's matrix it is multiplied by (one entry when B has none to
// broadcast). The engine runs one GEMM per matrix of A, so a B whose
// leading axes would repeat A's matrices ([3,1,3,4] × [1,2,4,2] makes
// [3,2,3,2]) is refused rather than given A's shape, unless spreadInput
// has repeated them.
func matmulLeading(op string, a, b []int) (lead, bsrc []int, err error) {
	la, lb := a[:len(a)-2], b[:len(b)-2]
	if lead, err = broadcastShape(la, lb); err != nil {
		return nil, nil, fmt.Errorf("%s of %v and %v: leading axes: %w", op, a, b, err)
	}
	if size(lead) != size(la) {
		return nil, nil, fmt.Errorf("%s of %v and %v: the output's %v matrices repeat A's %v, and a constant B is applied once per matrix of A: %w",
			op, a, b, lead, la, ErrUnsupported)
	}
	if size(lb) == 1 {
		return lead, []int{0}, nil
	}
	return lead, broadcastIndex(lead, lb), nil
}

// spreadInput repeats the matrices of A, a graph input read by this
// MatMul alone, where the leading axes of a constant B of shape bs
// broadcast them: the runtime packs the input broadcast, so that each
// output matrix has a matrix of A of its own (see matmulLeading).
func (c *compiler) spreadInput(a *value, bs []int) {
	if !a.input || a.alias != nil || a.bcast != nil || a.packed != nil || a.lay.shape != nil || c.dataReaders(a.name) != 1 || c.outputs[a.name] || len(bs) < 2 {
		return
	}
	r := len(a.shape)
	lead, err := broadcastShape(a.shape[:r-2], bs[:len(bs)-2])
	if err != nil || size(lead) == size(a.shape[:r-2]) {
		return
	}
	a.bcast = a.shape
	a.shape = append(lead, a.shape[r-2:]...)
}

// size is the number of elements of shape.
func size(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// gemmAttrs are Gemm's attributes.
func gemmAttrs(n *onnx.Node) (transA, transB int64, alpha, beta float32, err error) {
	if transA, err = n.Int("transA", 0); err != nil {
		return
	}
	if transB, err = n.Int("transB", 0); err != nil {
		return
	}
	if alpha, err = n.Float("alpha", 1); err != nil {
		return
	}
	beta, err = n.Float("beta", 1)
	return
}

// matmulWeights lays B out as GEMM weights [batch][N][K][1][1], times
// alpha: batch b's matrix is B's bsrc[b], transposed unless transB.
func matmulWeights(bv *value, bsrc []int, bbatch, N, K int, transB bool, alpha float32) *value {
	w := &value{shape: []int{bbatch * N, K, 1, 1}, typ: bv.typ, constant: constant{isConst: true}}
	src := func(b, k, j int) int {
		b = bsrc[b]
		if transB {
			return (b*N+j)*K + k
		}
		return (b*K+k)*N + j
	}
	if bv.isFloat() {
		f := bv.floats()
		w.f = make([]float32, bbatch*N*K)
		for b := range bbatch {
			for j := range N {
				for k := range K {
					w.f[(b*N+j)*K+k] = alpha * f[src(b, k, j)]
				}
			}
		}
		return w
	}
	iv := bv.ints()
	w.i = make([]int64, bbatch*N*K)
	for b := range bbatch {
		for j := range N {
			for k := range K {
				w.i[(b*N+j)*K+k] = iv[src(b, k, j)]
			}
		}
	}
	return w
}

// gemmBias adds Gemm's C·beta to the layer just made.
func (c *compiler) gemmBias(n *onnx.Node, ci int, beta float32, outShape []int) error {
	cv, err := c.in(n, ci)
	if err != nil || cv == nil {
		return err
	}
	if !cv.isConst {
		return fmt.Errorf("C (%q) must be a constant: %w", cv.name, ErrUnsupported)
	}
	if _, err := broadcastShape(outShape, cv.shape); err != nil {
		return err
	}
	y := c.vals[n.Outputs[0]]
	l := y.layer
	vals := mapF(cv.floats(), func(x float32) float32 { return beta * x })
	if row, ok := perLane(l.out.lay, cv.shape, vals); ok {
		if err := c.rowStep(l, sAddRow, row); err != nil {
			return err
		}
	} else {
		if err := c.settle(y, false); err != nil {
			return err
		}
		t, err := expand(l.out.lay, constFloat(cv.name, cv.shape, vals))
		if err != nil {
			return err
		}
		l.steps = append(l.steps, step{kind: sAddTensor, fp: true, t: t})
	}
	c.set(n, 0, c.rename(l, y.typ))
	return nil
}

// packedAsView reports whether a, a view of a graph input not laid out
// yet that nothing else reads, is read by other operators than one
// MatMul, so that the input is better packed as the view itself.
func (c *compiler) packedAsView(a *value) bool {
	r := a.root()
	return r.input && r.lay.shape == nil && r.bcast == nil && r.packed == nil && !c.outputs[r.name] &&
		c.dataReaders(r.name) == 1 && c.dataReaders(a.name) > 1
}

// fcConv compiles Gemm/MatMul(Flatten(x), B) with x an NCHW tensor as a
// convolution with an H×W kernel, permuting B instead of the activations.
func (c *compiler) fcConv(n *onnx.Node, op string, a, bv *value, transB bool, alpha, beta float32, ci int) error {
	r := a.root()
	Nb, C, H, W := r.shape[0], r.shape[1], r.shape[2], r.shape[3]
	K := C * H * W
	if a.shape[1] != K || len(bv.shape) != 2 {
		return fmt.Errorf("%s of %v and %v: %w", op, a.shape, bv.shape, ErrUnsupported)
	}
	Kb, N := bv.shape[0], bv.shape[1]
	if transB {
		Kb, N = N, Kb
	}
	if Kb != K {
		return fmt.Errorf("%s: inner dimensions %d and %d differ", op, K, Kb)
	}
	w := &value{shape: []int{N, C, H, W}, typ: bv.typ, constant: constant{isConst: true}}
	src := func(k, j int) int {
		if transB {
			return j*K + k
		}
		return k*N + j
	}
	// k = c·H·W + h·W + w is already the row-major index of [N][C][H][W].
	if bv.isFloat() {
		f := bv.floats()
		w.f = make([]float32, N*K)
		for j := range N {
			for k := range K {
				w.f[j*K+k] = alpha * f[src(k, j)]
			}
		}
	} else {
		iv := bv.ints()
		w.i = make([]int64, N*K)
		for j := range N {
			for k := range K {
				w.i[j*K+k] = iv[src(k, j)]
			}
		}
	}
	spec := &convSpec{kh: H, kw: W, sh: 1, sw: 1, dh: 1, dw: 1, ih: H, iw: W, oh: 1, ow: 1, ic: C, oc: N}
	outShape := []int{Nb, N}
	// [Nb][N/16][1] elements: outer axis 0, lanes axis 1.
	outLay := layout{shape: outShape, outer: []int{0}, lane: 1}
	if err := c.gemmNode(gemmParams{n: n, op: op, x: r, w: w, bias: -1, spec: spec, outShape: outShape, outLay: outLay}); err != nil {
		return err
	}
	if ci >= 0 {
		return c.gemmBias(n, ci, beta, outShape)
	}
	return nil
}

// matmulComputed compiles MatMul(a, b) with b computed on the device, in
// fp32 (int8 in a post-training-quantised model, see matmulComputedInt8):
// stacks of matrices whose leading axes broadcast as numpy's, of any
// inner and output dimensions. The array reads Bᵀ as weights, one matrix
// per output stack (see weightsOf); an A whose stacks B's repeat is
// gathered into one matrix per output stack too.
func (c *compiler) matmulComputed(n *onnx.Node, a, b *value) error {
	ra, rb := len(a.shape), len(b.shape)
	if ra < 2 || rb < 2 {
		return fmt.Errorf("MatMul of the computed tensors %s and %s: only stacks of matrices, not vectors: %w", a, b, ErrUnsupported)
	}
	M, K, N := a.shape[ra-2], a.shape[ra-1], b.shape[rb-1]
	if b.shape[rb-2] != K {
		return fmt.Errorf("MatMul of %v and %v: inner dimensions %d and %d differ", a.shape, b.shape, K, b.shape[rb-2])
	}
	lead, err := broadcastShape(a.shape[:ra-2], b.shape[:rb-2])
	if err != nil {
		return fmt.Errorf("MatMul of %v and %v: leading axes: %w", a.shape, b.shape, err)
	}
	for _, v := range []*value{a, b} {
		if !slices.Equal(v.shape, v.root().shape) {
			return fmt.Errorf("MatMul operand %s after a reshape: %w", v, ErrUnsupported)
		}
	}
	if c.opts.int8 && !c.keepFP32 {
		if ok, err := c.matmulComputedInt8(n, a, b, lead, M, K, N); ok || err != nil {
			return err
		}
	}
	for _, v := range []*value{a, b} {
		if err := c.settle(v, false); err != nil {
			return err
		}
	}
	if a, err = c.deviceInput(a, matLayout(a.root().shape)); err != nil {
		return err
	}
	if a.el() != f32 || !a.lay.equal(matLayout(a.shape)) {
		return fmt.Errorf("MatMul operand %s is %v laid out %+v on the device, want fp32 matrices: %w", a, a.el(), a.lay, ErrUnsupported)
	}
	bt, err := c.weightsOf(n, b, lead, 0)
	if err != nil {
		return err
	}
	if !slices.Equal(a.shape[:ra-2], lead) {
		a = c.restack(a, a.shape[:ra-2], lead, M, append(slices.Clone(lead), M, K))
	}
	c.computedGemm(n, a, bt, lead, M, K, N, true)
	return nil
}

// computedGemm appends the GEMM layer multiplying the M×K matrices of a by
// the weights bt that weightsOf wrote, one matrix per stack of lead, in
// fp32 or int8, and makes its output n's.
func (c *compiler) computedGemm(n *onnx.Node, a, bt *value, lead []int, M, K, N int, fp bool) *layer {
	batch := size(lead)
	spec := &convSpec{kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, ih: M, iw: 1, oh: M, ow: 1, ic: K, oc: N, fp: fp, batched: batch > 1, wT: bt}
	shape := append(slices.Clone(lead), M, N)
	l := &layer{kind: lGemm, in: a, conv: spec, accFP: fp, macs: uint64(batch * M * N * K)}
	out := &value{shape: shape, typ: onnx.Float, device: device{lay: matLayout(shape), layer: l}}
	l.out = out
	c.layers = append(c.layers, l)
	c.set(n, 0, out)
	return l
}

// weightsOf returns B as the array reads a MatMul's computed weights: Bᵀ,
// N rows of K lanes, the rows padded with zeros to whole 16-row blocks,
// one matrix per stack of lead. Q·Kᵀ: a B that a transpose layer made for
// this MatMul alone is used as it was before (Bᵀ), and the transpose
// dropped. A B laid out with its rows on the lanes (a tensor an
// element-wise layer wrote in channel layout, a Transpose's gather)
// already is Bᵀ. Other Bs (N on the lanes) are transposed on the array,
// their K rows padded with zeros first, so the padding lanes of Bᵀ are
// zeros whatever A's hold. With a range q > 0, an int8 GEMM's, Bᵀ is
// int8 at the symmetric scale of q: quantised before a transpose on the
// array, which then runs at four times the rate, else after.
func (c *compiler) weightsOf(n *onnx.Node, b *value, lead []int, q float32) (*value, error) {
	rb := len(b.shape)
	K, N := b.shape[rb-2], b.shape[rb-1]
	bl := b.shape[:rb-2]
	var bt *value
	if l := b.layer; l != nil && l.kind == lTranspose && l.out == b && b.uses == 1 && !c.outputs[b.name] && c.layers[len(c.layers)-1] == l {
		c.layers = c.layers[:len(c.layers)-1]
		bt = l.in
	} else if r := b.root(); r.lay.shape != nil && r.el() == f32 && r.lay.equal(transposedLayout(r.shape)) {
		if K%lanes != 0 && !r.zeroPad {
			return nil, fmt.Errorf("MatMul %q: B %s holds its %d rows on the lanes, whose padding would meet A's: %w", n.Name, b, K, ErrUnsupported)
		}
		bt = r
	} else {
		r, err := c.deviceInput(b, matLayout(b.root().shape))
		if err != nil {
			return nil, err
		}
		if r.el() != f32 || !r.lay.equal(matLayout(r.shape)) {
			return nil, fmt.Errorf("MatMul operand %s is %v laid out %+v on the device, want fp32 matrices: %w", b, r.el(), r.lay, ErrUnsupported)
		}
		if N%lanes != 0 && !r.zeroPad {
			return nil, fmt.Errorf("MatMul %q: B %s is transposed on the array, which needs its %d columns in whole blocks of %d: %w", n.Name, b, N, lanes, ErrUnsupported)
		}
		// Zero padding lanes are zero columns: B padded to whole blocks
		// both ways transposes as it is.
		if kp, np := (K+lanes-1)/lanes*lanes, (N+lanes-1)/lanes*lanes; kp != K || np != N {
			r = c.restack(r, bl, bl, kp, append(slices.Clone(bl), kp, np))
		}
		// Restacking Bᵀ after the transpose gathers 32-bit values: B's
		// stacks must be lead's to quantise before.
		if q > 0 && slices.Equal(bl, lead) {
			if r, err = c.quantizeOperand(r, q); err != nil {
				return nil, err
			}
		}
		if bt, err = c.transposeLast(r); err != nil {
			return nil, err
		}
	}
	np := (N + lanes - 1) / lanes * lanes
	if bt.lay.s() != np || !slices.Equal(bl, lead) {
		bt = c.restack(bt, bl, lead, np, append(slices.Clone(lead), np, K))
	}
	if q > 0 && bt.el() == f32 {
		return c.quantizeOperand(bt, q)
	}
	return bt, nil
}

// restack gathers the matrices of v, stored [stacks][lane blocks][rows]
// with its stacks of shape vs, into a new fp32 tensor of shape laid out as
// matrices: one matrix per stack of lead (vs broadcast to it, numpy's
// way), each v's rows followed by zero rows up to rows.
func (c *compiler) restack(v *value, vs, lead []int, rows int, shape []int) *value {
	cb, vr := v.lay.cb(), v.lay.s()
	from := broadcastIndex(lead, vs)
	src := make([]int, 0, len(from)*cb*rows)
	for _, o := range from {
		for kb := range cb {
			for y := range rows {
				if y < vr {
					src = append(src, (o*cb+kb)*vr+y)
				} else {
					src = append(src, -1)
				}
			}
		}
	}
	return c.permuteLayer(v, shape, matLayout(shape), src)
}

// transposeLast returns b, fp32 or int8, with its last two axes swapped,
// written by a transpose layer: Bᵀ laid out as matrices, B's rows on the
// lanes. Both axes must fill whole 16-lane blocks.
func (c *compiler) transposeLast(b *value) (*value, error) {
	if !slices.Equal(b.shape, b.root().shape) {
		return nil, fmt.Errorf("transposing %s after a reshape: %w", b, ErrUnsupported)
	}
	if err := c.settle(b, false); err != nil {
		return nil, err
	}
	b, err := c.deviceInput(b, matLayout(b.root().shape))
	if err != nil {
		return nil, err
	}
	el := b.el()
	if el != f32 && (el != i8 || b.q.zp != 0) || !b.lay.equal(matLayout(b.shape)) {
		return nil, fmt.Errorf("MatMul operand %s is %v laid out %+v on the device, want fp32 or symmetric int8 matrices: %w", b, el, b.lay, ErrUnsupported)
	}
	r := len(b.shape)
	if r < 2 || b.shape[r-1]%lanes != 0 || b.shape[r-2]%lanes != 0 {
		return nil, fmt.Errorf("transposing the last axes of %s: they must be multiples of %d: %w", b, lanes, ErrUnsupported)
	}
	shape := slices.Clone(b.shape)
	shape[r-2], shape[r-1] = shape[r-1], shape[r-2]
	l := &layer{kind: lTranspose, in: b, accFP: el == f32, acc8: el == i8}
	bt := &value{shape: shape, typ: onnx.Float, q: b.q, device: device{lay: matLayout(shape), layer: l, elem: el}}
	l.out = bt
	c.layers = append(c.layers, l)
	return bt, nil
}

// transpose emits a transpose layer: per outer index and 16-column block
// of B, chunks of its 16-row tiles go to the weight SRAM, one GEMM against
// the identity writes them transposed, and one STORE puts each tile's 16
// rows into Bᵀ's row block. int8 tiles sum in int32 and store exactly.
func (e *emitter) transpose(l *layer) error {
	in, out := l.in, l.out
	r := len(in.shape)
	K, N := in.shape[r-2], in.shape[r-1]
	KB, NB := K/lanes, N/lanes
	outer := in.lay.o()
	el := l.storeElem()
	one := []byte{1}
	if el == f32 {
		one = []byte{0, 0, 0x80, 0x3f} // fp32 1.0
	}
	id := make([]byte, lanes*lanes*el.size())
	for k := range lanes {
		copy(id[(k*lanes+k)*el.size():], one)
	}
	ident := e.blob(id)
	u := &uopTable{}
	uop := u.addGemm(0, 0, 0)
	if err := e.loadUops(u); err != nil {
		return err
	}
	m := min(KB, hw.WgtSize, hw.AccSize/lanes)
	rowBytes := lanes * el.size()
	for o := range outer {
		for nb := range NB {
			for kb0 := 0; kb0 < KB; kb0 += m {
				t := min(m, KB-kb0)
				e.beginTile()
				src := in.addr + uint64(((o*NB+nb)*K+kb0*lanes)*rowBytes)
				e.loadBatch(load(isa.MemInp, el, 0, ident, 1, lanes, lanes), load(isa.MemWgt, el, 0, src, 1, t, t))
				g := isa.Insn{Op: isa.OpGEMM, UopBegin: uop, UopEnd: uop + 1, IterOut: uint32(t), IterIn: lanes, DstOut: lanes, DstIn: 1, FP32: el == f32, Reset: true}
				e.compute(g, true)
				g.Reset, g.SrcIn, g.WgtOut = false, 1, 1
				e.compute(g, false)
				e.release()
				e.store(isa.Insn{Op: isa.OpStore, Mem: isa.MemAcc, DType: dtypeOf(el),
					DRAM: out.addr + uint64(((o*KB+kb0)*N+nb*lanes)*rowBytes), YSize: uint32(t), XSize: lanes, XStride: uint32(N)})
			}
		}
	}
	return nil
}

// transposedLayout lays a stack of matrices out with their rows on the
// lanes: byte for byte the matLayout of the transposed stack.
func transposedLayout(shape []int) layout {
	r := len(shape)
	return layout{shape: shape, outer: seq(r - 2), lane: r - 2, rows: []int{r - 1}}
}

// foldMatMul multiplies floating-point constants as ONNX's MatMul does:
// numpy's broadcast of the leading axes, a 1-D operand promoted to a
// matrix and its axis dropped from the result. Sums run in float64. A
// product too large to hold at compile time is left to the engine.
func (c *compiler) foldMatMul(n *onnx.Node) (*value, error) {
	a, b, err := c.needPair(n)
	if err != nil {
		return nil, err
	}
	if !a.isFloat() || !b.isFloat() {
		return nil, nil
	}
	as, bs := promoteVectors(a.shape, b.shape)
	if len(as) < 2 || len(bs) < 2 {
		return nil, fmt.Errorf("MatMul of %v and %v: scalars", a.shape, b.shape)
	}
	M, K, N := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	if bs[len(bs)-2] != K {
		return nil, fmt.Errorf("MatMul of %v and %v: inner dimensions %d and %d differ", a.shape, b.shape, K, bs[len(bs)-2])
	}
	la, lb := as[:len(as)-2], bs[:len(bs)-2]
	lead, err := broadcastShape(la, lb)
	if err != nil {
		return nil, fmt.Errorf("MatMul of %v and %v: leading axes: %w", a.shape, b.shape, err)
	}
	if size(lead)*M*N > 1<<24 || size(lead)*M*N*K > 1<<28 {
		return nil, nil
	}
	y := multiplyStacks(a.floats(), b.floats(), broadcastIndex(lead, la), broadcastIndex(lead, lb), M, K, N)
	shape := append(lead, M, N)
	if len(b.shape) == 1 {
		shape = slices.Delete(shape, len(shape)-1, len(shape))
	}
	if len(a.shape) == 1 {
		shape = slices.Delete(shape, len(lead), len(lead)+1)
	}
	return constFloat("", shape, y), nil
}

// promoteVectors makes MatMul's 1-D operands matrices: A a row, B a
// column.
func promoteVectors(a, b []int) (as, bs []int) {
	as, bs = a, b
	if len(a) == 1 {
		as = []int{1, a[0]}
	}
	if len(b) == 1 {
		bs = []int{b[0], 1}
	}
	return as, bs
}

// multiplyStacks multiplies output matrix m as A's matrix ia[m] by B's ib[m].
func multiplyStacks(a, b []float32, ia, ib []int, M, K, N int) []float32 {
	y := make([]float32, len(ia)*M*N)
	for m := range ia {
		pa, pb := a[ia[m]*M*K:], b[ib[m]*K*N:]
		for i := range M {
			for j := range N {
				var s float64
				for k := range K {
					s += float64(pa[i*K+k]) * float64(pb[k*N+j])
				}
				y[(m*M+i)*N+j] = float32(s)
			}
		}
	}
	return y
}
