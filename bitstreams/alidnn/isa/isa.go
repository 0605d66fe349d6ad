// Package isa is the AliDNN instruction set: 128-bit little-endian
// instructions for a VTA-style accelerator with separate load, compute and
// store queues synchronised by dependency tokens.
//
// ISA.md in this folder is the specification; its bit-layout tables are
// generated from the field tables in layout.go (go test -run TestISADoc
// -update), so encoder, decoder, documentation and tests share one source of
// truth.
//
// The package API: Encode/Decode one instruction, EncodeProgram/DecodeProgram
// a byte stream, Assemble/Disassemble the text form (the future `hdk asm` and
// `hdk disasm`), GemmUop/AluUop for the 32-bit micro-ops, and Layout for the
// field table of an opcode.
package isa

import "fmt"

// InsnBytes is the size of one encoded instruction.
const InsnBytes = 16

// TokenDepth is how many dependency tokens each of the four token FIFOs
// holds (see ISA.md, "Queues and dependency tokens"): a push into a full
// FIFO is a run-time error, so a program may have at most this many tokens
// outstanding in any direction.
const TokenDepth = 8

// Opcode selects the instruction group (bits 2:0 of every instruction).
type Opcode uint8

// Opcodes. Value 7 is illegal.
const (
	OpLoad     Opcode = 0 // DRAM -> SRAM with 2-D strides and padding
	OpStore    Opcode = 1 // accumulator SRAM -> DRAM, saturating to the data type
	OpGEMM     Opcode = 2 // int8 x int8 -> int32 matrix multiply over micro-op loops
	OpFinish   Opcode = 3 // end of job; raises the completion interrupt with JobID
	OpALU      Opcode = 4 // vector ALU on the accumulator over micro-op loops
	OpPool     Opcode = 5 // max/avg pooling on the accumulator; depthwise convolution of inp
	OpNop      Opcode = 6 // carries dependency tokens for one queue
	numOpcodes        = 7
)

var opNames = [...]string{"load", "store", "gemm", "finish", "alu", "pool", "nop"}

func (o Opcode) String() string {
	if o < numOpcodes {
		return opNames[o]
	}
	return fmt.Sprintf("Opcode(%d)", uint8(o))
}

// MemSpace names an on-chip SRAM (the other side of LOAD/STORE is always DRAM,
// addressed by device byte address).
type MemSpace uint8

// Memory spaces. Values 5..7 are illegal.
const (
	MemUop   MemSpace = 0 // micro-op SRAM (32-bit micro-ops)
	MemInp   MemSpace = 1 // input SRAM (int8 vectors)
	MemWgt   MemSpace = 2 // weight SRAM (int8 matrices)
	MemAcc   MemSpace = 3 // accumulator SRAM (int32 or fp32 vectors)
	MemParam MemSpace = 4 // per-tensor/per-channel quantisation parameters
	numMems           = 5
)

var memNames = [...]string{"uop", "inp", "wgt", "acc", "param"}

func (m MemSpace) String() string {
	if m < numMems {
		return memNames[m]
	}
	return fmt.Sprintf("MemSpace(%d)", uint8(m))
}

// DType is the element type of a LOAD or STORE.
type DType uint8

// Data types. Value 3 is illegal.
const (
	Int8      DType = 0
	Int32     DType = 1
	FP32      DType = 2
	numDTypes       = 3
)

var dtypeNames = [...]string{"int8", "int32", "fp32"}

func (d DType) String() string {
	if d < numDTypes {
		return dtypeNames[d]
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// AluOp is the operation of an ALU instruction.
type AluOp uint8

// ALU operations: the 4-bit alu_op field and, for lut, its fifth bit
// alu_op_4 (bit 125; every value of the four low bits was taken).
const (
	AluAdd        AluOp = 0  // dst = dst + (src | imm), wrapping int32
	AluMul        AluOp = 1  // dst = dst * (src | imm), low 32 bits
	AluMin        AluOp = 2  // dst = min(dst, src | imm)
	AluMax        AluOp = 3  // dst = max(dst, src | imm)
	AluShr        AluOp = 4  // dst = (dst + 2^(s-1)) >> s, arithmetic, s = src|imm in 0..31
	AluClip       AluOp = 5  // dst = clamp(dst, -imm, imm); imm >= 0 required
	AluRelu       AluOp = 6  // dst = max(dst, 0)
	AluRequant    AluOp = 7  // dst = sat8(rshift_round(dst * M, S) + zp); M, S from param[src]
	AluQuantize   AluOp = 8  // dst = sat8(round(fp32(dst) / scale) + zp); scale from param[src]
	AluDequantize AluOp = 9  // dst = fp32((dst - zp) * scale); scale from param[src]
	AluExp        AluOp = 10 // dst = e^dst; fp32 only
	AluLog        AluOp = 11 // dst = ln dst; fp32 only
	AluDiv        AluOp = 12 // dst = dst / (src | imm); fp32 only
	AluLt         AluOp = 13 // dst = 1.0 if dst < (src | imm) else 0.0; fp32 only
	AluEq         AluOp = 14 // dst = 1.0 if dst == (src | imm) else 0.0; fp32 only
	AluRound      AluOp = 15 // dst = dst rounded half to even to an integer; fp32 only
	AluLut        AluOp = 16 // dst = int8 table entry of sat8(dst), the lane's table in param[src..src+31]
	numAluOps           = 17
)

var aluNames = [...]string{"add", "mul", "min", "max", "shr", "clip", "relu", "requant", "quantize", "dequantize", "exp", "log", "div", "lt", "eq", "round", "lut"}

func (a AluOp) String() string {
	if a < numAluOps {
		return aluNames[a]
	}
	return fmt.Sprintf("AluOp(%d)", uint8(a))
}

// Unary reports whether the operation reads only dst: relu, exp, log and round
// have no second operand, so use_imm, imm and the src factors must be zero.
func (a AluOp) Unary() bool { return a == AluRelu || a == AluExp || a == AluLog || a == AluRound }

// Param reports whether the operation's src indexes param rather than acc:
// the quantisation parameters of requant, quantize and dequantize, and
// lut's tables.
func (a AluOp) Param() bool {
	return a == AluRequant || a == AluQuantize || a == AluDequantize || a == AluLut
}

// LutRows is the number of param rows a lut table spans: 256 int8 entries a
// lane, eight to a lane's 64 bits.
const LutRows = 32

// PoolKind selects max or average pooling, or the depthwise convolution.
type PoolKind uint8

// Pooling kinds.
const (
	PoolMax          PoolKind = 0
	PoolAvg          PoolKind = 1
	PoolDepthwise    PoolKind = 2 // per-lane window × weights from param, input from inp
	PoolDepthwiseAcc PoolKind = 3 // as PoolDepthwise, adding to what acc[dst] holds
	numPoolKinds              = 4
)

var poolNames = [...]string{"max", "avg", "dw", "dwacc"}

// Depthwise reports whether the kind is a depthwise convolution.
func (p PoolKind) Depthwise() bool { return p == PoolDepthwise || p == PoolDepthwiseAcc }

func (p PoolKind) String() string {
	if p < numPoolKinds {
		return poolNames[p]
	}
	return fmt.Sprintf("PoolKind(%d)", uint8(p))
}

// Queue is one of the three instruction queues.
type Queue uint8

// Queues. Value 3 is illegal in a NOP's queue field.
const (
	QueueLoad    Queue = 0
	QueueCompute Queue = 1
	QueueStore   Queue = 2
	numQueues          = 3
)

var queueNames = [...]string{"load", "compute", "store"}

func (q Queue) String() string {
	if q < numQueues {
		return queueNames[q]
	}
	return fmt.Sprintf("Queue(%d)", uint8(q))
}

// Insn is one decoded instruction: a tagged struct whose Op selects which of
// the other fields are meaningful. Fields an opcode does not use must be zero
// (Encode rejects them), so every valid Insn has exactly one encoding and
// Insn values compare with ==.
type Insn struct {
	Op Opcode

	// Dependency tokens (every opcode). "prev" is the queue before this one
	// in load -> compute -> store, "next" the one after: pop waits for and
	// consumes a token, push produces one after the instruction completes.
	PopPrev, PopNext, PushPrev, PushNext bool

	// LOAD and STORE.
	Mem     MemSpace
	DType   DType
	PadMin  bool   // pad with the type's minimum (for max-pool) instead of zero
	SRAM    uint32 // SRAM base, in elements of the memory space
	DRAM    uint64 // device byte address
	YSize   uint32 // rows
	XSize   uint32 // elements per row
	XStride uint32 // elements between row starts in DRAM
	PadY0   uint8  // rows of padding before (top)
	PadY1   uint8  // after (bottom)
	PadX0   uint8  // columns of padding before (left)
	PadX1   uint8  // after (right)

	// GEMM and ALU: micro-ops UopBegin..UopEnd-1 run inside two loops
	// (IterOut x IterIn); each index is uop.field + out*XOut + in*XIn.
	Reset            bool // GEMM: write zero instead of accumulating
	UopBegin, UopEnd uint32
	IterOut, IterIn  uint32
	DstOut, DstIn    uint32 // accumulator index factors
	SrcOut, SrcIn    uint32 // GEMM: input index; ALU: accumulator or param index
	WgtOut, WgtIn    uint32 // GEMM: weight index

	// GEMM, ALU and POOL: compute in fp32 instead of integers. GEMM reads the
	// fp32 banks of inp and wgt; ALU and POOL treat acc lanes as fp32.
	FP32 bool

	// ALU.
	Alu        AluOp
	UseImm     bool  // second operand is Imm instead of acc[src]
	PerChannel bool  // requant/quantize/dequantize: one parameter per lane
	Imm        int32 // 16-bit signed immediate; zero point for requant/quantize/dequantize

	// POOL: window WinH x WinW with stride StrideH x StrideW over an
	// InH x InW x Channels (channel blocks) tile at acc[PoolSrc] (inp for
	// the depthwise kind), output at acc[PoolDst].
	Pool             PoolKind
	WinH, WinW       uint8
	StrideH, StrideW uint8
	PoolDst, PoolSrc uint32
	Channels         uint32
	InH, InW         uint32
	// Depthwise only: the rows and columns skipped between window taps
	// (dilation − 1), the param row of the first channel block's weights,
	// whether each block's rows start with a bias row, whether a low and a
	// high row follow to clamp the sums (a fused ReLU or Clip), and whether
	// two more clamp each input as it is read (the producer's ReLU or Clip).
	GapH, GapW                 uint8
	DwWgt                      uint32
	DwBias, DwClamp, DwInClamp bool

	// FINISH.
	JobID uint32

	// NOP.
	NopQueue Queue // the queue this NOP is dispatched to
}

// Queue reports the queue an instruction is dispatched to, following VTA:
// loads of input and weights go to the load queue; loads of micro-ops,
// accumulator and parameters to the compute queue; STORE to the store
// queue; GEMM, ALU, POOL and FINISH to the compute queue; NOP to the queue
// it names.
func (i Insn) Queue() Queue {
	switch i.Op {
	case OpLoad:
		if i.Mem == MemInp || i.Mem == MemWgt {
			return QueueLoad
		}
		return QueueCompute
	case OpStore:
		return QueueStore
	case OpNop:
		return i.NopQueue
	}
	return QueueCompute
}
