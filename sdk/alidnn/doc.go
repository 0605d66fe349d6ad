// Package alidnn compiles ONNX models to AliDNN engine programs and runs
// them.
//
// Compile maps a graph onto the engine layer by layer. Convolutions (1-D
// and 2-D, strided, dilated, grouped and depthwise), Gemm and MatMul (and
// their quantised forms QLinearConv, QLinearMatMul, ConvInteger,
// MatMulInteger) become GEMM layers tiled over output rows and input-channel
// blocks to fit the engine's SRAMs, their loads double-buffered behind the
// array; a grouped convolution runs only the weight blocks its groups touch,
// and a first convolution on few channels packs adjacent pixels into the
// lanes (see stem.go; a stride-2 one 2×2 pixels, space to depth, see
// s2d.go). A depthwise convolution would use one lane in 16 of the array
// (its weight tiles are diagonal), so it runs on the engine's depthwise
// unit (POOL kind dw, see dwunit.go): a 3×3 window of 16 channels a cycle
// in int8, a quarter of that in fp32, the input tiles double-buffered
// through inp like a GEMM's, the weights in param, the bias and a ReLU or
// Clip fused, and the ReLU or Clip of the layer writing its input applied
// as it reads it when nothing else reads that tensor (see dwclamp.go).
// That is 36 fp32 multiply-accumulates a cycle against the array's 64, so
// MobileNet-v2 (7% of its multiply-accumulates depthwise) runs at about
// 1.4× its bound (2.1× when the ALU ran them), ResNet-50 at 1.1×. Kernels, strides or dilations past the unit's 15 fall back, in
// fp32, to the ALU's Horner form (see depthwise.go), else to the array.
// ConvTranspose and Resize by an integer factor
// (nearest, and bilinear over a copy with replicated edges) run as one
// stride-1 convolution per output phase whose STOREs scatter every s-th
// pixel (see convtranspose.go, bilinear.go). A MatMul of two
// computed tensors reads its second operand as weights from device memory,
// transposed on the device when needed, of any inner and output
// dimensions (Bᵀ's rows padded with zeros to whole blocks), its stacks or
// A's repeated on the engine when the other's leading axes broadcast over
// them — attention's Q·Kᵀ and attention·V (see matmul.go). Stacks of
// matrices broadcast as numpy's: a constant B's stacks over A's, and over
// a graph input's repeated as the runtime packs it; a computed A whose
// matrices a constant B's stacks would repeat is refused. A vector operand
// of a MatMul by a constant B is numpy's row or column (see matvec.go).
// Max and average
// pooling become POOL layers (global pooling of images beyond POOL's
// 15-pixel window folds the pixels with the ALU, see gap.go); element-wise operators that follow a layer (bias,
// ReLU, Clip, LeakyRelu, HardSigmoid, HardSwish, Sigmoid, Tanh, Exp, Log,
// Sqrt, Softplus, Abs, Neg, Max/Min,
// batch normalisation, requantisation, casts, residual sums) are fused into
// its accumulator epilogue — gated activations too as exporters decompose
// them, x · HardSigmoid(x), x · Clip(x + 3, 0, 6) / 6 and x · Sigmoid(βx)
// (see selfchain.go) — and the rest run as element-wise layers (Sub of
// a tensor as the addition of its negation; Div by a constant as a
// multiplication by the reciprocal, by a tensor on the ALU's div; Pow by
// a constant, integer exponents up to 16 by multiplication, others as
// e^(p·ln x), see pow.go, and by exponents per element with C's signs and
// special values, see powtensor.go; Erf, GELU's, as a polynomial in four
// layers, see erf.go; comparisons of FLOAT tensors and And/Or/Xor of
// their results on the ALU's lt and eq, exact 0 and 1 for every value, see
// cmpfloat.go; Round, Floor and Ceil on its round). Of two computed
// tensors, one may
// broadcast over the other's rows and outer axes — a squeeze-and-excitation
// gate [N,C,1,1] scaling its block's [N,C,H,W], an attention mask
// [1,1,1,S] added to scores [1,H,S,S] — read as one accumulator row per
// image (see broadcast.go); a [..., 1] operand broadcast along the last
// axis of a tensor holding it on the lanes is first spread to them by a
// MatMul by ones, as is Expand of such a [..., 1] (see lanespread.go),
// whose rows, channels and outer axes then repeat as a Concat of copies
// (see expandrepeat.go); one along part of the rows (a mean over an
// image's last axis) is expanded to the full shape first (see
// broadcastrepeat.go); another broadcast along the lanes (channels) is
// refused. A mean over the last axis, which the lanes hold, is a MatMul
// by constants of 1/C that broadcasts it to every lane (over more than two
// 16-lane blocks, two MatMuls, to lane 0 and back, 32·C products a row,
// not C·C): ReduceMean so (kept; what is not an element-wise operator meeting the
// full width reads lane 0, picked by a MatMul, see picklane.go), as the
// layer normalisation exporters decompose and RMSNorm write it, and LayerNormalization (opset 17, over
// the last axis) as that sequence, its optional Mean and InvStdDev picked
// from lane 0 by a MatMul (see layernorm.go), and from an earlier axis as
// the same sequence with its means reduced over those axes of the stored
// tensor, an image's too (see normaxes.go; a matrix's LayerNormalization
// over the last axis of its [1, M·K] view, see normaxis.go); a graph input that such a
// normalisation reads first is laid out as hidden states, its last axis on
// the lanes, as a MatMul lays out one, not as an image; one read only
// through a Flatten is packed as that matrix (by its own axes where they
// store it so, see storedAs), which element-wise operators then read as
// it is stored (see sameBlocks). Gelu (exact and
// tanh), Swish, Mish and RMSNormalization (over the last axis) compile as
// the sequences of their ONNX function bodies, CastLike as Cast (see
// function.go). ReduceSum, ReduceMax and ReduceMin follow ReduceMean's rule
// (see reduce.go): the sum a MatMul by ones, the maximum and minimum
// Softmax's row-maximum steps with the infinities put back (see lanemax.go); with
// empty axes and noop_with_empty_axes all four are the identity. Over any
// other axes, kept or not, each axis the lanes do not hold folds as
// element-wise Add, Max or Min of its slices, picked whole (see
// reduceaxes.go), before the last axis's lane reduction; a sum or mean
// over an image's channels, which its lanes hold, is a 1×1 convolution by
// ones, held on every channel as the lane reduction is where element-wise
// operators meeting all channels read it (see reducechan.go), and a
// maximum or minimum there is refused. Concat moves each input
// into its place in the output, along any axis, a constant input from the
// constant segment; hidden states [N,S,H] a MatMul wrote keep the hidden
// axis on the lanes, so a ViT's class token concatenated before its patch
// tokens lands in that layout (a lane Concat needing realignment there is
// refused). Cross-channel LRN squares its input, sums
// each channel window with a 1×1 GEMM and finishes in that layer's epilogue
// with the ALU's exp and log; it runs in fp32 in int8 models too. A zero Pad
// in front of a Conv or AveragePool becomes its padding; Identity and
// inference Dropout are aliases. Operators on constants (Transpose of
// weights, Constant and ConstantOfShape, MatMul, and the shape arithmetic
// exporters write in front of a Reshape and for a transformer's position
// ids and masks: Shape, Size, Gather, Slice, ReduceProd, Concat, Squeeze,
// Unsqueeze, Cast, Range, Expand, Where, Trilu, comparisons, logic,
// arithmetic and Pow, and a Loop whose trip count and body read only
// constants, run at compile time, see loopfold.go) are folded at compile
// time. Softmax at the graph's end runs on the host; one that other
// operators read (attention's) runs on the engine over the last axis: the
// row maximum by maxima with butterfly permutation MatMuls within 16-lane
// blocks, then across the blocks' maxima picked to one lane each,
// e^(x − max), the row sum by a MatMul by ones, and the quotient (see
// softmax.go; a −Inf mask weighs 0, +Inf gives NaN).
//
// Element types at the boundary follow one rule (see boundary.go): the
// data path is fp32 and int8, so graph inputs of other types are converted
// as the runtime stages them and outputs as the host reads them back, the
// reformatting TensorRT and onnxruntime's execution providers do. FLOAT16,
// BFLOAT16, float8 and FLOAT4E2M1 inputs are staged as fp32 (exact) and read through
// views, Cast and DequantizeLinear; a DOUBLE input only where every reader
// is a Cast to FLOAT (the staging rounds as that Cast does) or a Cast to a
// narrower float type ending the graph (the host's, from the input's own
// values, see hostcast.go); INT16, UINT16, 4- and 2-bit integer inputs as
// exact fp32 values read as the INT64 inputs below are, and by
// DequantizeLinear ((x − zero point) × scale in fp32, as
// ONNX computes it). A Cast of an fp32 value to any other type whose
// result is only a graph output is the host's conversion as it reads it
// (ONNX's Cast: round to nearest even, float8's saturate, truncation of
// floats to integers wrapping around the type), and so is a QuantizeLinear
// to INT16, UINT16, 4-, 2-bit or float8 types, per tensor, axis or block
// (see hostquant.go: x / scale in float32, rounded half to even, as
// ONNX); in the middle of the graph,
// and arithmetic on a narrow float input (ONNX rounds after each
// operator), are refused. Add, Sub, Mul and Div of two integer inputs
// run where fp32 is exact and the host wraps (and truncates) the result as
// it reads it back (see intarith.go); a 16-bit Mul and UINT32 Add, Sub,
// Mul and comparisons run on int32 lanes, UINT32 inputs staged as their
// bit patterns (see intpath.go and cmpuint32.go), and so does Pow of an
// INT32 input, wrapped squares picked by the exponent's bits (see
// intpow.go). A UINT64 input is staged as its two 32-bit words, on which
// Add, Sub, Mul, Div and comparisons run exactly (see wide.go), and Pow of
// an INT64 input is computed on two words too (see widepow.go). A STRING
// input read only by Equal is staged as the ids the host gives its
// strings, one dictionary a run, so that Equal of ids is Equal of strings
// (see intern.go).
//
// Zero-size tensors fold (see empty.go): an input bound to a shape with a
// 0 is an empty constant, as are empty Slices and Split parts, and what
// reads them folds (a ReduceSum over an empty axis is zeros, ReduceMax −∞,
// ReduceMin +∞); empty outputs come back as empty tensors of their type.
//
// Transformers' integer inputs follow one rule (see embed.go), since the
// engine computes in int8, int32 and fp32 and its LOADs read addresses
// fixed in the instruction stream — it has no indirect load. An INT64 or
// BOOL graph input (token ids, an attention mask) is packed by the runtime
// as fp32, exact up to ±2²⁴ (beyond, the run fails with ErrInput); it may
// be viewed (Reshape, Unsqueeze…), Cast to FLOAT (a copy layer, so the
// extended mask's Sub(1, ·) and Mul by −10000 or finfo.min run on the
// engine after it), compared with a constant scalar (Equal, Less,
// Greater and the OrEqual forms, and Not of the result: exact 0 and 1 by
// clamped integer arithmetic, see compare.go), used as Gather's indices
// or Where's condition or operands, reduced by ReduceMax or ReduceMin (of its Cast to
// FLOAT, exact), read back as a graph output in its own type, and
// is refused elsewhere. A Gather of rows of a constant FLOAT table (axis 0)
// by an INT64 or INT32 graph input — the word and token-type embeddings —
// runs on the host: the table stays in the program's constant segment and
// the runtime copies the rows the ids name into a device tensor
// (Program.Derived) as it packs the run; an id outside [−V, V) fails the
// run with ErrInput naming the input, as onnxruntime fails it. So does a
// Gather, along any axis, of a FLOAT graph input only it reads by such an
// input (see gatherinput.go): the data stays on the host. A Gather
// by constant ids (positions) folds. Where with a constant condition — a
// causal mask sliced from a buffer, folded — and one computed operand t is
// t·S + K on the engine (S 1 where t is picked, K the other operand
// elsewhere), exact for finite t, −Inf included; with a computed BOOL
// condition (a view of a BOOL input or a comparison's result, such as a
// padding mask [N,1,1,S] over the scores) and
// a constant scalar k, t·p + k·(1 − p), or min(t, ±∞) for k = −∞; other
// computed conditions are refused. Where of two computed FLOAT tensors is
// max(min(x, b), min(y, −b)), b +∞ where x is picked and −∞ elsewhere
// (see wheretwo.go; exact but for NaN, which the ALU's min and max drop). An INT64 or BOOL input is laid out
// with its leading axes outer, so that such a mask [N,S] broadcasts over
// scores of any length. Split of a computed tensor along its last axis (GPT-2's fused
// QKV) is a MatMul per part by a 0/1 selection matrix, as is a Slice along
// the last axis where the lanes hold it (any start, end and step; see
// slice.go; exact for finite values, 0 × ∞ being NaN), and a Gemm of a
// computed [..., S, K] flattened to [M, K] (HuggingFace's Conv1D) a MatMul
// of the unflattened tensor; a Gather of a computed tensor by constant
// indices along one of its last two axes (BERT's pooler, hidden[:, 0]) a
// MatMul by a 0/1 selection matrix from the constant segment (see
// where.go). Split and Gather along a leading axis (timm's qkv.unbind(0)
// of [3, B, heads, N, D], Split → Squeeze) pick whole 16-lane elements
// with a permute layer, as does a Slice of a computed tensor (paddle2onnx's
// qkv[0]), one pick per sliced axis (see slice.go); one along the lanes
// that would move values is refused (see select.go).
//
// The engine runs static shapes. Dimensions a model leaves free — the
// symbolic batch and sequence length exporters write — are bound at
// compile time with WithShape (faas model compile --shape): an input's
// whole shape by the input's name, or one symbolic dimension by its name
// in every input that has it, the input's binding winning. The shape
// arithmetic over them then folds away. A free dimension left unbound is
// refused naming the input, the dimension and the binding that fixes it. Tensors live in device memory as 16-lane blocks (see
// layout); the runtime packs inputs and unpacks outputs. A Transpose that
// reorders a tensor's data is free where TensorFlow converters place them
// around NHWC models (see nhwc.go): on a graph input (packed transposed; a
// one-channel image's, which moves only the unit axis, packed with the
// channel on the lanes), before a graph output (unpacked so), or before a
// Flatten into a MatMul or Gemm (whose weight rows are permuted instead).
// Elsewhere, at any rank — attention's head split and merge, a key's
// [N,H,D,S], a token flatten [N,C,L] → [N,L,C] — it runs on the engine
// when the 16-lane blocks stay whole: DMA loads gather the blocks in the
// new order, and the array swaps the last two axes after, when both are
// multiples of 16 (see permute.go). Heads whose width is no multiple of
// 16 (PaddleOCR's SVTR: 8 heads of 15) straddle blocks: their split, a
// Reshape of a matrix's lanes into groups, permuted, runs as a MatMul by a
// 0/1 matrix moving each group to blocks of its own, then that gather, and
// their merge as the gather into groups and a MatMul packing them back
// (see reblock.go); the groups' zero padding lets Q·Kᵀ and attention·V
// read them as B. One that would move values between lanes otherwise is
// refused.
//
// fp32 models run in fp32 on the engine's fp32 datapath. Quantize turns an
// fp32 model into an int8 one after training, calibrated on sample inputs
// run on the engine itself; the lane means and sums of layer
// normalisations and engine Softmax stay fp32 there (a per-tensor scale
// loses a small row, a ViT's class token), and so do Softmax's row-maximum
// steps (a mask's −MaxFloat32 would set their scale) and a layer's bias
// and other per-channel additions its int32 accumulator cannot hold (a
// channel of near-zero weights has as small a scale). Attention's
// MatMuls of two computed tensors, Q·Kᵀ and softmax·V, run on the int8
// array too, both operands at their calibrated per-tensor scales (see
// matmulint8.go). An activation between two int8 GEMMs — GELU (erf or
// tanh), SiLU, HardSwish, any chain of element-wise operators of one tensor
// and scalars — becomes one table lookup (the ALU's lut), its 256 entries
// the chain folded on the values an int8 input holds (see lutfuse.go).
// Pre-quantised
// models run in int8 too: QLinear and Integer operators (an input zero
// point folded into the bias, or corrected per pixel where padding or
// batched weights make it vary), and the QDQ format, whose Conv, MatMul
// or Gemm of DequantizeLinear'd int8 activations and weights (per tensor
// or per output channel) becomes an int8 GEMM dequantising in its
// epilogue (see qdq.go). DequantizeLinear of a device tensor takes a zero
// point per channel (subtracted exactly in the integer accumulator), and
// so does QuantizeLinear: the engine's quantisation saturates with one
// zero point for all lanes, so the rounded quotient is rebuilt in fp32
// from two quantisations saturating at either end (see quantzp.go).
// DequantizeLinear by blocked scales (opset 21) is (x − zp)·scale by
// constants of x's shape (see qblocked.go).
// Models onnxruntime's quantize_dynamic writes run in int8 too:
// DynamicQuantizeLinear → MatMulInteger by int8 weights → Cast → Mul by
// the scales (an embedding's Gather of int8 rows → DequantizeLinear
// gathers rows of the dequantised table). DynamicQuantizeLinear computes its uint8 scale and zero point
// from the tensor's range at run time, but the engine's quantisation takes
// them from the program, and finding a tensor's range on the engine would
// cost a reduction over the whole tensor before every such MatMul; so the
// range is calibrated instead, as Quantize calibrates: Calibrate runs the
// model over sample inputs, once per level of DynamicQuantizeLinear (each
// run quantising the levels before and measuring the next), and compiles
// it with ONNX's scale and zero point for each range measured (see
// dynquant.go; faas model test and run calibrate on their inputs). On
// those inputs the numbers are the quantised graph's; on inputs of another
// range the int8 values saturate where onnxruntime would widen the scale.
// Compile refuses such a model.
//
// A Program is relocatable. Open loads it on an Engine — a slot through the
// node agent (Agent) or the in-process simulator (NewLocal) — into one
// device buffer: constants once, and lanes of activations that the
// instruction stream, relocated to the buffer, runs on. Session.Run runs it
// as often as needed, from many goroutines at once: runs that arrive while
// the engine is busy are coalesced into one job, and jobs are pipelined (see
// Session). Load is the register-level shortcut for a Device the caller
// drives itself, one run at a time.
package alidnn
