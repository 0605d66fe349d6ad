package alidnn

import (
	"fmt"
	"math"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// window is the geometry of a convolution or pooling window along one axis.
type window struct{ k, s, d, pb, pe, out int }

// windows reads kernel_shape, strides, dilations, pads and auto_pad for a
// 2-D window over an h×w image; kernel gives the kernel when the node has no
// kernel_shape attribute (Conv takes it from the weights).
func windows(n *onnx.Node, h, w int, kernel []int) (y, x window, err error) {
	get := func(name string, def []int) ([]int, error) {
		v, err := n.Ints(name)
		if err != nil || v == nil {
			return def, err
		}
		return toInts(v), nil
	}
	ks, err := get("kernel_shape", kernel)
	if err != nil {
		return y, x, err
	}
	if len(ks) != 2 {
		return y, x, fmt.Errorf("kernel_shape %v: only 2-D windows: %w", ks, ErrUnsupported)
	}
	st, err := get("strides", []int{1, 1})
	if err != nil {
		return y, x, err
	}
	dl, err := get("dilations", []int{1, 1})
	if err != nil {
		return y, x, err
	}
	pads, err := get("pads", []int{0, 0, 0, 0})
	if err != nil {
		return y, x, err
	}
	autoPad, err := n.String("auto_pad", "NOTSET")
	if err != nil {
		return y, x, err
	}
	ceil, err := n.Int("ceil_mode", 0)
	if err != nil {
		return y, x, err
	}
	if len(st) != 2 || len(dl) != 2 || len(pads) != 4 {
		return y, x, fmt.Errorf("strides %v, dilations %v, pads %v: want 2, 2 and 4 values", st, dl, pads)
	}
	dims := []int{h, w}
	out := [2]window{}
	for a := 0; a < 2; a++ {
		wd := window{k: ks[a], s: st[a], d: dl[a], pb: pads[a], pe: pads[a+2]}
		if wd.k < 1 || wd.s < 1 || wd.d < 1 || wd.pb < 0 || wd.pe < 0 {
			return y, x, fmt.Errorf("window %+v: kernel, stride and dilation must be positive, pads non-negative", wd)
		}
		span := (wd.k-1)*wd.d + 1
		switch autoPad {
		case "NOTSET", "":
		case "VALID":
			wd.pb, wd.pe = 0, 0
		case "SAME_UPPER", "SAME_LOWER":
			o := (dims[a] + wd.s - 1) / wd.s
			total := max((o-1)*wd.s+span-dims[a], 0)
			wd.pb = total / 2
			if autoPad == "SAME_LOWER" {
				wd.pb = total - total/2
			}
			wd.pe = total - wd.pb
		default:
			return y, x, fmt.Errorf("auto_pad %q", autoPad)
		}
		if dims[a]+wd.pb+wd.pe < span {
			return y, x, fmt.Errorf("window %d wide does not fit the padded input %d", span, dims[a]+wd.pb+wd.pe)
		}
		wd.out = (dims[a]+wd.pb+wd.pe-span)/wd.s + 1
		if ceil != 0 && (dims[a]+wd.pb+wd.pe-span)%wd.s != 0 {
			// One more window, partly past the end padding, unless it
			// would start in that padding.
			if wd.out*wd.s < dims[a]+wd.pb {
				wd.out++
			}
		}
		if wd.out < 1 {
			return y, x, fmt.Errorf("window %d wide does not fit the padded input %d", span, dims[a]+wd.pb+wd.pe)
		}
		out[a] = wd
	}
	return out[0], out[1], nil
}

// deviceInput prepares x as the input of a layer that needs layout want
// (used when x is a graph input without one yet).
func (c *compiler) deviceInput(x *value, want layout) (*value, error) {
	if _, err := c.device(x); err != nil {
		return nil, err
	}
	r := x.root()
	if r.lay.shape == nil {
		if r.input && x == r {
			r.lay = want
			return r, nil
		}
		r.lay = convLayout(r.shape)
	}
	return r, nil
}

func (c *compiler) convNode(n *onnx.Node) error {
	op := n.OpType
	xi, wi, bi := 0, 1, 2
	if op == "QLinearConv" {
		xi, wi, bi = 0, 3, 8
	}
	x, err := c.need(n, xi)
	if err != nil {
		return err
	}
	wv, err := c.needConst(n, wi, "weights")
	if err != nil {
		return err
	}
	groups, err := n.Int("group", 1)
	if err != nil {
		return err
	}
	// A 1-D convolution is a 2-D one on images one pixel high.
	oneD := len(x.shape) == 3 && len(wv.shape) == 3
	if oneD {
		n = lift1D(n)
	} else if len(x.shape) != 4 || len(wv.shape) != 4 {
		return fmt.Errorf("%s of a rank-%d input with rank-%d weights: only 1-D and 2-D convolutions: %w", op, len(x.shape), len(wv.shape), ErrUnsupported)
	}
	N, C := x.shape[0], x.shape[1]
	H, W := 1, x.shape[len(x.shape)-1]
	kh, kw := 1, wv.shape[len(wv.shape)-1]
	if !oneD {
		H, kh = x.shape[2], wv.shape[2]
	}
	OC := wv.shape[0]
	if groups < 1 || int64(C)%groups != 0 || int64(OC)%groups != 0 {
		return fmt.Errorf("group = %d does not divide %d input and %d output channels", groups, C, OC)
	}
	if wv.shape[1]*int(groups) != C {
		return fmt.Errorf("weights %v for %d input channels in %d groups", wv.shape, C, groups)
	}
	y, xw, err := windows(n, H, W, []int{kh, kw})
	if err != nil {
		return err
	}
	if y.k != kh || xw.k != kw {
		return fmt.Errorf("kernel_shape %dx%d does not match weights %v", y.k, xw.k, wv.shape)
	}
	spec := &convSpec{kh: y.k, kw: xw.k, sh: y.s, sw: xw.s, dh: y.d, dw: xw.d, pt: y.pb, pl: xw.pb,
		ih: H, iw: W, oh: y.out, ow: xw.out, ic: C, oc: OC, groups: int(groups)}
	outShape := []int{N, OC, y.out, xw.out}
	if oneD {
		outShape = []int{N, OC, xw.out}
		x = &value{shape: []int{N, C, 1, W}, typ: x.typ, alias: x.root(), q: x.root().q}
	}
	padded := y.pb+y.pe+xw.pb+xw.pe > 0
	if ok, err := c.packedStem(n, x, wv, bi, spec, outShape); ok || err != nil {
		return err
	}
	return c.gemmNode(n, op, x, wv, bi, spec, outShape, convLayout(outShape), padded)
}

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
		if transA, err = n.Int("transA", 0); err != nil {
			return err
		}
		if transB, err = n.Int("transB", 0); err != nil {
			return err
		}
		if alpha, err = n.Float("alpha", 1); err != nil {
			return err
		}
		if beta, err = n.Float("beta", 1); err != nil {
			return err
		}
		if len(a.shape) != 2 || len(bv.shape) != 2 {
			return fmt.Errorf("Gemm of %v and %v: want matrices", a.shape, bv.shape)
		}
	}
	if len(a.shape) < 2 || len(bv.shape) < 2 {
		return fmt.Errorf("%s of %v and %v: vectors: %w", op, a.shape, bv.shape, ErrUnsupported)
	}
	// The FC layer after a Flatten/Reshape of an NCHW tensor is a
	// convolution whose kernel covers the whole image.
	if r := a.root(); r != a && len(r.shape) == 4 && len(a.shape) == 2 && transA == 0 && a.shape[0] == r.shape[0] {
		return c.fcConv(n, op, a, bv, transB != 0, alpha, beta, ci)
	}
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
	batch := 1
	for _, d := range a.shape[:ra-2] {
		batch *= d
	}
	bbatch := 1
	for _, d := range bv.shape[:rb-2] {
		bbatch *= d
	}
	// B's leading axes broadcast against A's: B's matrix for A's matrix
	// b is bsrc[b]; a B with leading axes A lacks would broadcast A.
	bsrc := []int{0}
	if bbatch != 1 {
		if _, err := broadcastShape(a.shape[:ra-2], bv.shape[:rb-2]); err != nil || rb > ra {
			return fmt.Errorf("%s: B's leading axes %v do not broadcast to A's %v: %w", op, bv.shape[:rb-2], a.shape[:ra-2], ErrUnsupported)
		}
		bsrc = broadcastIndex(a.shape[:ra-2], bv.shape[:rb-2])
		bbatch = batch
	}
	// Weights as [batch][N][K][1][1].
	wshape := []int{bbatch * N, K, 1, 1}
	w := &value{shape: wshape, typ: bv.typ, isConst: true}
	src := func(b, k, j int) int {
		b = bsrc[b]
		if transB != 0 {
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
	} else {
		iv := bv.ints()
		w.i = make([]int64, bbatch*N*K)
		for b := range bbatch {
			for j := range N {
				for k := range K {
					w.i[(b*N+j)*K+k] = iv[src(b, k, j)]
				}
			}
		}
	}
	outShape := append(append([]int(nil), a.shape[:ra-2]...), M, N)
	spec := &convSpec{kh: 1, kw: 1, sh: 1, sw: 1, dh: 1, dw: 1, ih: M, iw: 1, oh: M, ow: 1, ic: K, oc: N, batched: bbatch > 1}
	if r := a.root(); r.input && r.lay.shape == nil && a == r {
		r.lay = alay
	}
	if err := c.gemmNode(n, op, a, w, -1, spec, outShape, matLayout(outShape), false); err != nil {
		return err
	}
	if ci >= 0 {
		return c.gemmBias(n, ci, beta, outShape)
	}
	return nil
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
	w := &value{shape: []int{N, C, H, W}, typ: bv.typ, isConst: true}
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
	if err := c.gemmNode(n, op, r, w, -1, spec, outShape, outLay, false); err != nil {
		return err
	}
	if ci >= 0 {
		return c.gemmBias(n, ci, beta, outShape)
	}
	return nil
}

// gemmNode makes the GEMM layer of a convolution or matrix product: fp32,
// natively quantised (the *Integer and QLinear* operators), or quantised
// after training (fp32 operators in int8 mode).
func (c *compiler) gemmNode(n *onnx.Node, op string, x, w *value, biasIdx int, spec *convSpec, outShape []int, outLay layout, padded bool) error {
	inLay := convLayout(x.root().shape)
	if len(x.shape) != 4 {
		inLay = matLayout(x.shape)
	}
	if err := c.settle(x, true); err != nil {
		return err
	}
	x, err := c.deviceInput(x, inLay)
	if err != nil {
		return err
	}
	if spec.ih*spec.iw != x.lay.s() || spec.ic != x.lay.c() {
		return fmt.Errorf("input %s laid out as %d rows of %d channels, want %d×%d of %d: %w", x, x.lay.s(), x.lay.c(), spec.ih, spec.iw, spec.ic, ErrUnsupported)
	}
	l := &layer{kind: lGemm, in: x, conv: spec}
	out := &value{shape: outShape, typ: onnx.Float, lay: outLay, layer: l}
	l.out = out
	perOC := spec.icg() * spec.kh * spec.kw
	l.macs = uint64(outLay.o() * spec.oh * spec.ow * spec.oc * perOC)
	quantOp := op == "ConvInteger" || op == "QLinearConv" || op == "MatMulInteger" || op == "QLinearMatMul"
	switch {
	case quantOp:
		if x.el() != i8 {
			return fmt.Errorf("%s input %s is %v on the device, want int8: %w", op, x, x.el(), ErrUnsupported)
		}
		var sx float32
		var zx int64
		var sw []float32
		var zw []int64
		lay := layout{shape: []int{spec.oc}, lane: 0}
		if op == "QLinearConv" || op == "QLinearMatMul" {
			s, z, typ, err := c.quantParams(n, 1, x.lay, false)
			if err != nil {
				return fmt.Errorf("x: %w", err)
			}
			sx, zx = s[0], int64(devZP(z[0], typ))
			if sw, zw, _, err = c.quantParams(n, 4, lay, false); err != nil {
				return fmt.Errorf("w: %w", err)
			}
		} else {
			if zv, err := c.in(n, 2); err != nil {
				return err
			} else if zv != nil {
				if !zv.isConst || len(zv.ints()) != 1 {
					return fmt.Errorf("input zero point must be a per-tensor constant: %w", ErrUnsupported)
				}
				zx = int64(devZP(zv.ints()[0], zv.typ))
			}
			zw = make([]int64, spec.oc)
			if zv, err := c.in(n, 3); err != nil {
				return err
			} else if zv != nil {
				if !zv.isConst {
					return fmt.Errorf("weight zero point must be a constant: %w", ErrUnsupported)
				}
				z := zv.ints()
				for o := range zw {
					zw[o] = z[min(o, len(z)-1)]
				}
			}
			sx, sw = 1, fill(spec.oc, 1)
		}
		// The device computes Σ (x − zx)(w − zw) exactly: w − zw is split
		// into int8 parts when it needs more bits (see convSpec.wI); zx is
		// folded or corrected (see convSpec.zx).
		wi := w.ints()
		spec.wI = make([]int64, len(wi))
		for k, v := range wi {
			o := (k / perOC) % spec.oc
			d := v - zw[o]
			if d < -3*127 || d > 3*127 {
				return fmt.Errorf("weight %d minus its zero point %d is %d, beyond three int8 parts: %w", v, zw[o], d, ErrUnsupported)
			}
			spec.wI[k] = d
		}
		l.accScale = make([]float32, spec.oc)
		for o := range l.accScale {
			l.accScale[o] = sx * sw[o]
		}
		c.layers = append(c.layers, l)
		if zx != 0 {
			if padded {
				spec.zx = int32(zx)
			} else {
				corr := make([]int64, spec.oc)
				for k, v := range spec.wI {
					corr[(k/perOC)%spec.oc] -= zx * v
				}
				if spec.batched {
					return fmt.Errorf("batched %s with an input zero point: %w", op, ErrUnsupported)
				}
				l.steps = append(l.steps, step{kind: sAddRow, rowI: corr})
			}
		}
		if op == "ConvInteger" || op == "MatMulInteger" {
			out.typ = onnx.Int32
			c.set(n, 0, out)
			return nil
		}
		if bi := biasIdx; bi >= 0 {
			bv, err := c.in(n, bi)
			if err != nil {
				return err
			}
			if bv != nil {
				if !bv.isConst || len(bv.ints()) != spec.oc {
					return fmt.Errorf("bias must be a constant of %d values", spec.oc)
				}
				l.steps = append(l.steps, step{kind: sAddRow, rowI: bv.ints()})
			}
		}
		ys, yz, ytyp, err := c.quantParams(n, 6, layout{shape: []int{1}, lane: 0}, false)
		if err != nil {
			return fmt.Errorf("y: %w", err)
		}
		zy := devZP(yz[0], ytyp)
		c.requant(l, ys[0], zy)
		out.typ = ytyp
		out.q = quant{scale: ys[0], zp: zy}
		c.set(n, 0, out)
		return nil
	case c.opts.int8:
		// Post-training quantisation: int8 input at its calibrated scale,
		// weights per output channel, accumulator settled by the consumer.
		if x.el() != i8 {
			q, err := c.quantizeTo(x)
			if err != nil {
				return err
			}
			x = q
			l.in = x
		}
		if x.q.zp != 0 {
			return fmt.Errorf("input %s has zero point %d: %w", x, x.q.zp, ErrUnsupported)
		}
		wf := w.floats()
		sw := make([]float32, spec.oc)
		for k, v := range wf {
			o := (k / perOC) % spec.oc
			sw[o] = max(sw[o], float32(math.Abs(float64(v))))
		}
		for o := range sw {
			if sw[o] == 0 {
				sw[o] = 1
			}
			sw[o] /= 127
		}
		spec.wI = make([]int64, len(wf))
		for k, v := range wf {
			spec.wI[k] = int64(math.Round(float64(v / sw[(k/perOC)%spec.oc])))
		}
		l.accScale = make([]float32, spec.oc)
		for o := range sw {
			l.accScale[o] = x.q.scale * sw[o]
		}
		l.ptq = true
	default:
		if x.el() != f32 {
			return fmt.Errorf("%s input %s is %v on the device, want fp32: %w", op, x, x.el(), ErrUnsupported)
		}
		spec.fp = true
		// A copy: a following BatchNormalization folds into it in place,
		// and another Conv may read the same initializer.
		spec.wF = slices.Clone(w.floats())
		l.accFP = true
	}
	c.layers = append(c.layers, l)
	c.set(n, 0, out)
	if biasIdx >= 0 {
		bv, err := c.in(n, biasIdx)
		if err != nil {
			return err
		}
		if bv != nil {
			if !bv.isConst || bv.len() != spec.oc {
				return fmt.Errorf("bias must be a constant of %d values: %w", spec.oc, ErrUnsupported)
			}
			if err := c.rowStep(l, sAddRow, bv.floats()); err != nil {
				return err
			}
			c.set(n, 0, c.rename(l, out.typ))
		}
	}
	return nil
}

// requant appends the int32 → int8 step for an output of scale sy.
func (c *compiler) requant(l *layer, sy float32, zy int32) {
	m := make([]int64, len(l.accScale))
	s := make([]int64, len(l.accScale))
	for o, a := range l.accScale {
		m[o], s[o] = fixedPoint(float64(a) / float64(sy))
	}
	l.steps = append(l.steps, step{kind: sRequant, rowI: m, shift: s, zp: zy})
	l.acc8 = true
}

// fixedPoint writes a real multiplier as M·2^−(31+S), M a Q31 integer in
// [2^30, 2^31), clamping S to the engine's range.
func fixedPoint(r float64) (int64, int64) {
	if r <= 0 {
		return 0, 0
	}
	f, e := math.Frexp(r) // r = f·2^e, f in [0.5, 1)
	m := int64(math.Round(f * (1 << 31)))
	if m == 1<<31 {
		m /= 2
		e++
	}
	s := int64(-e)
	for 31+s > 62 {
		m /= 2
		s--
	}
	for 31+s < 1 {
		s++ // saturates: multipliers ≥ 2^30 are out of range anyway
	}
	return m, s
}

// settle decides what an unsettled post-training-quantised layer outputs,
// when its output is first used by something other than a fused step: int8
// at the calibrated scale for consumers that take int8, fp32 otherwise.
func (c *compiler) settle(v *value, int8OK bool) error {
	l := v.root().layer
	if l == nil || !l.ptq {
		return nil
	}
	l.ptq = false
	if int8OK {
		r, ok := c.opts.ranges[l.out.name]
		if !ok || r <= 0 {
			r = 1
		}
		sy := r / 127
		c.requant(l, sy, 0)
		l.out.q = quant{scale: sy}
		return nil
	}
	l.steps = append(l.steps, step{kind: sDequantize, rowF: l.accScale})
	l.accFP = true
	return nil
}

// quantizeTo brings an fp32 tensor to int8 at its calibrated scale, for a
// post-training-quantised consumer.
func (c *compiler) quantizeTo(x *value) (*value, error) {
	r, ok := c.opts.ranges[x.name]
	if !ok || r <= 0 {
		return nil, fmt.Errorf("no calibrated range for %s", x)
	}
	l := &layer{kind: lMove, in: x, accFP: true}
	s := r / 127
	l.steps = []step{{kind: sQuantize, fp: true, rowF: fill(x.lay.c(), s)}}
	l.acc8 = true
	out := &value{name: x.name + "/quantized", shape: x.shape, typ: onnx.Int8, lay: x.lay, layer: l, q: quant{scale: s}, uses: 1}
	l.out = out
	c.layers = append(c.layers, l)
	return out, nil
}

func (c *compiler) poolNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	if len(x.shape) != 4 {
		return fmt.Errorf("pooling of a rank-%d tensor: only 2-D: %w", len(x.shape), ErrUnsupported)
	}
	N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	var y, xw window
	switch n.OpType {
	case "GlobalAveragePool", "GlobalMaxPool":
		y = window{k: H, s: 1, d: 1, out: 1}
		xw = window{k: W, s: 1, d: 1, out: 1}
	default:
		if y, xw, err = windows(n, H, W, nil); err != nil {
			return err
		}
		if sr, err := n.Int("storage_order", 0); err != nil || sr != 0 {
			return fmt.Errorf("storage_order: %w", ErrUnsupported)
		}
		if len(n.Outputs) > 1 && n.Outputs[1] != "" {
			return fmt.Errorf("MaxPool's indices output: %w", ErrUnsupported)
		}
	}
	cip, err := n.Int("count_include_pad", 0)
	if err != nil {
		return err
	}
	avg := n.OpType == "AveragePool" || n.OpType == "GlobalAveragePool"
	spec := &poolSpec{avg: avg, kh: y.k, kw: xw.k, sh: y.s, sw: xw.s, dh: y.d, dw: xw.d, pt: y.pb, pl: xw.pb, pb: y.pe, pr: xw.pe,
		ih: H, iw: W, oh: y.out, ow: xw.out, countPad: cip != 0}
	// Max pooling, and average pooling whose windows all count kh·kw
	// elements, run on int8 tensors as they are (the engine's average
	// rounds the sum's quotient half away from zero); averages that need
	// another divisor read fp32.
	// Dilated windows pool on the fp32 ALU.
	_, rescale := spec.scales()
	if err := c.settle(x, !spec.dilated() && (!avg || !rescale)); err != nil {
		return err
	}
	x, err = c.deviceInput(x, convLayout(x.shape))
	if err != nil {
		return err
	}
	if avg && rescale && x.el() != f32 {
		return fmt.Errorf("average pooling of an integer tensor with windows over the padding: %w", ErrUnsupported)
	}
	if spec.dilated() && x.el() != f32 {
		return fmt.Errorf("dilated pooling of the integer tensor %s: %w", x, ErrUnsupported)
	}
	l := &layer{kind: lPool, in: x, pool: spec, accFP: x.el() == f32, acc8: x.el() == i8}
	outShape := []int{N, C, y.out, xw.out}
	out := &value{shape: outShape, typ: x.typ, lay: convLayout(outShape), layer: l, q: x.q}
	l.out = out
	c.layers = append(c.layers, l)
	c.set(n, 0, out)
	return nil
}
