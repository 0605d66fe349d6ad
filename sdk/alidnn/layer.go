package alidnn

import "github.com/fpga-faas/faas/bitstreams/alidnn/isa"

// layerKind is what fills a layer's accumulator tile before its epilogue.
type layerKind uint8

const (
	// lGemm multiplies the input (in the inp SRAM) by constant weights:
	// Conv, Gemm, MatMul and their quantised forms.
	lGemm layerKind = iota
	// lPool pools the input in the accumulator.
	lPool
	// lMove brings the input into the accumulator unchanged, for
	// element-wise work.
	lMove
	// lTranspose swaps the last two axes of a stack of matrices whose
	// dimensions fill whole blocks (see matmul.go).
	lTranspose
	// lPermute gathers the input's 16-lane elements in another order
	// (see permute.go).
	lPermute
	// lBlockMax takes the lane-wise maximum of each row's blocks (see
	// blockmax.go).
	lBlockMax
)

// layer is one pass over the output tensor, tile by tile: the producer fills
// the accumulator, the steps (fused element-wise operators) transform it in
// place, and a STORE writes the tile out.
type layer struct {
	kind  layerKind
	in    *value
	out   *value
	steps []step

	// accFP says the accumulator holds fp32 after the producer and the steps
	// so far; acc8 that it holds values in int8 range (after requant or
	// quantize), so the tile is stored as int8.
	accFP bool
	acc8  bool

	conv *convSpec
	pool *poolSpec
	// macs are the multiply-accumulates of the network's operator that a
	// GEMM layer computes, one run; a layer computing it in another form
	// (see packedStem) keeps the operator's count, and the packing is 0.
	macs uint64
	// outBlock is where a move layer's blocks start in its output, which
	// may be wider than its input (Concat); outOuter where its outer
	// indices start, and rows where its rows go (see placeRows).
	outBlock int
	outOuter int
	rows     *rowPlace
	// gather is, for a permute layer, the input element each output
	// element is.
	gather []int

	// accScale is, for an int8 GEMM layer, the real value of one unit of the
	// accumulator per output channel (input scale × weight scale); steps in
	// the integer domain use it to convert float constants.
	accScale []float32
	// ptq marks a post-training-quantised layer whose output form (int8 or
	// fp32) its first consumer decides; see compiler.settle.
	ptq bool
	// inClamp are, for a depthwise layer on the depthwise unit, the ReLU
	// or Clip steps of its input's producer that the unit applies to the
	// input as it reads it (see deferInputClamps).
	inClamp []step
}

// takesSteps reports whether element-wise steps may extend l: permute and
// transpose layers' tiles are not the output's rows in order, and a block
// maximum's emitter runs none.
func (l *layer) takesSteps() bool {
	return l.kind != lPermute && l.kind != lTranspose && l.kind != lBlockMax
}

// convSpec is a GEMM producer as a 2-D convolution on images of ih×iw
// pixels per outer index: matrices are ih = rows, iw = 1 with a 1×1 kernel.
type convSpec struct {
	kh, kw, sh, sw, dh, dw int
	pt, pl                 int // top and left padding (bottom, right follow from the output size)
	ih, iw, oh, ow         int
	ic, oc                 int
	// groups splits the channels into that many independent convolutions
	// (0 and 1 are one): output channel o sees only the input channels of
	// its group, so its weights hold ic/groups channels.
	groups int
	fp     bool // fp32; otherwise int8
	// Weights [batch][oc][ic][kh][kw], batch 1 unless every outer index has
	// its own (batched MatMul).
	wF []float32
	// wI are int8-mode weights minus their zero points, up to ±381: the
	// emitter splits each into as many int8 parts as the widest needs and
	// runs every part over the same input, so the sum is exact.
	wI      []int64
	batched bool
	// zx is the input's zero point, subtracted exactly: folded into the bias
	// when there is no padding, else corrected per pixel.
	zx int32
	// wT, when not nil, holds the weights on the device: the transposed
	// second operand of a MatMul of two computed tensors, one matrix per
	// outer index (see matmul.go).
	wT *value
	// scatter, when not nil, places the oh×ow outputs on a grid of the
	// layer's output tensor instead of filling it (see phaseLayers).
	scatter *scatter
}

// scatter places output pixel (y, x) of a GEMM layer at pixel
// (y·step + y0, x·step + x0) of its output, whose images are w pixels wide:
// one phase of a transposed convolution or an upsampling.
type scatter struct{ step, y0, x0, w int }

// icg is the number of input channels each output channel sees.
func (cv *convSpec) icg() int { return cv.ic / max(cv.groups, 1) }

// weight returns the index in the weights of output channel o, input
// channel k and tap t of outer index b, or −1 where k is outside o's group.
func (cv *convSpec) weight(b, o, k, t int) int {
	icg, taps := cv.icg(), cv.kh*cv.kw
	if cv.groups > 1 {
		g := o / (cv.oc / cv.groups)
		if k/icg != g {
			return -1
		}
		k -= g * icg
	}
	return ((b*cv.oc+o)*icg+k)*taps + t
}

// poolSpec is a POOL producer.
type poolSpec struct {
	avg            bool
	kh, kw, sh, sw int
	dh, dw         int // dilations: 1, or a dilated window pooled tap by tap
	pt, pl         int
	ih, iw, oh, ow int
	countPad       bool // average pool divides by the whole window, padding included
	// pb, pr are the explicit bottom and right padding: with countPad a
	// window counts padding up to them, not the extra rows and columns
	// ceil_mode adds.
	pb, pr int
}

func (p *poolSpec) dilated() bool { return p.dh > 1 || p.dw > 1 }

// spanH and spanW are the input rows and columns a window covers.
func (p *poolSpec) spanH() int { return (p.kh-1)*max(p.dh, 1) + 1 }
func (p *poolSpec) spanW() int { return (p.kw-1)*max(p.dw, 1) + 1 }

// scales returns, for an average pool, the factor each output pixel's
// pooled value must be multiplied by to divide by the elements ONNX
// counts, and whether any is not 1. The POOL instruction divides by
// kh·kw; dilated taps are summed undivided. A window counts its taps
// inside the image, or inside the explicitly padded image with
// count_include_pad (never ceil_mode's extra rows and columns).
func (p *poolSpec) scales() ([]float32, bool) {
	div := p.kh * p.kw
	if p.dilated() {
		div = 1
	}
	top, left, bottom, right := 0, 0, p.ih, p.iw
	if p.countPad {
		top, left, bottom, right = -p.pt, -p.pl, p.ih+p.pb, p.iw+p.pr
	}
	f := make([]float32, p.oh*p.ow)
	any := false
	for y := range p.oh {
		for x := range p.ow {
			cnt := taps(y*p.sh-p.pt, p.kh, max(p.dh, 1), top, bottom) * taps(x*p.sw-p.pl, p.kw, max(p.dw, 1), left, right)
			f[y*p.ow+x] = float32(div) / float32(cnt)
			any = any || f[y*p.ow+x] != 1
		}
	}
	return f, any
}

// taps counts the window positions start + i·d, i < k, in [lo, hi).
func taps(start, k, d, lo, hi int) int {
	n := 0
	for i := range k {
		if v := start + i*d; v >= lo && v < hi {
			n++
		}
	}
	return n
}

type stepKind uint8

const (
	sAddRow     stepKind = iota // + a per-channel (or scalar) constant
	sMulRow                     // × a per-channel (or scalar) constant
	sAddTensor                  // + a tensor laid out like the output
	sMulTensor                  // × a tensor laid out like the output
	sRelu                       // max(x, 0)
	sRequant                    // int32 → int8 with per-channel M, S and a zero point
	sQuantize                   // fp32 → int8 with per-channel scale and a zero point
	sDequantize                 // int → fp32 with per-channel scale and a zero point
	sMinRow                     // min with a per-channel (or scalar) constant
	sMaxRow                     // max with a per-channel (or scalar) constant
	sMinTensor                  // min with a tensor laid out like the output
	sMaxTensor                  // max with a tensor laid out like the output
	// sSelf combines the accumulator with a function of itself (LeakyRelu,
	// HardSwish): a scratch copy goes through chain, one fp32 constant per
	// operation, and is combined into the tile by comb, combs times (Pow's
	// x·x·x; 0 is once). With rowF the tile is first set to those
	// per-channel values: k / x combines k with x by div.
	sSelf
	sExp // e^x, fp32 only
	sLog // ln x, fp32 only
	// sDivTensor divides by a tensor laid out like the output, fp32 only.
	sDivTensor
	// The comparisons give 1 or 0 (fp32 only): x < a per-channel
	// constant, x = one, x < a tensor laid out like the output, x = one,
	// and x > one, which negates the tile and its own copy of the operand
	// (−x < −t) as the ALU has no gt; a NaN on either side gives 0.
	sLtRow
	sEqRow
	sLtTensor
	sEqTensor
	sGtTensor
	sRound // x rounded half to even to an integer, fp32 only
	// sFloor is ⌊x⌋ = r − lt(x, r) with r = round(x): an sSelf whose
	// chain is round and comb lt, the tile then negated and the scratch
	// r added (each exact; −0 stays −0).
	sFloor
	// sSquare is x·x, fp32: the ALU multiplies the tile by itself, which
	// an sSelf would first copy (a LayerNorm's variance, Pow 2).
	sSquare
	// sLut replaces each int8 value by its entry of lut, a function of one
	// variable tabulated (see lutfuse.go).
	sLut
)

// selfOp is one operation of an sSelf chain: the scratch copy op= a scalar.
type selfOp struct {
	op isa.AluOp
	c  float32
}

// step is an element-wise operator fused into a layer. Per-channel values
// have one entry per output channel (the output's lane axis).
type step struct {
	kind  stepKind
	fp    bool // the accumulator holds fp32 when the step runs
	rowF  []float32
	rowI  []int64
	shift []int64
	zp    int32
	t     *value
	// tlay is, for a tensor operand broadcast to the output, the layout
	// its storage is read by (see broadcastLayout).
	tlay *layout
	// spread says t is one block of lanes, each lane holding its row's
	// value, read for every output block (see laneOperand).
	spread bool
	chain  []selfOp
	comb   isa.AluOp
	combs  int
	lut    []int8 // sLut's 256 entries, for inputs −128..127
}
