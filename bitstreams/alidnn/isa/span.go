package isa

// Block sizes of the reference configuration (alidnn.Default: BATCH = 1,
// BLOCK_IN = BLOCK_OUT = 16), which fix the DRAM size of an element.
const (
	BlockLanes = 16                      // lanes of an inp or acc element
	WgtLanes   = BlockLanes * BlockLanes // int8 weights of a wgt element
)

// ElemBytes is the DRAM size of one element of a LOAD (store false) or
// STORE (store true) of memory space m with data type d, in the reference
// configuration: a micro-op is 4 bytes; inp and wgt elements are 1 byte per
// lane in int8 and 4 in fp32; acc elements 4 bytes per lane, except a STORE
// of int8 (1); param lanes are 8 bytes whatever the type. It returns 0 for
// an illegal memory space.
func ElemBytes(m MemSpace, d DType, store bool) uint64 {
	switch m {
	case MemUop:
		return 4
	case MemInp:
		if d == FP32 {
			return 4 * BlockLanes
		}
		return BlockLanes
	case MemWgt:
		if d == FP32 {
			return 4 * WgtLanes
		}
		return WgtLanes
	case MemAcc:
		if store && d == Int8 {
			return BlockLanes
		}
		return 4 * BlockLanes
	case MemParam:
		return 8 * BlockLanes
	}
	return 0
}

// DRAMSpan reports the DRAM bytes a LOAD or STORE can touch: [addr,
// addr+n), from the first byte of the first row to the last byte of the last
// row (y_size rows of x_size elements, x_stride elements apart; padding is
// made on chip and reads nothing). Bytes between rows are inside the span
// though not accessed, which makes the span a safe bound for an access
// check. ok is false for other opcodes and for a LOAD or STORE whose memory
// space is illegal or whose tile is empty.
//
// The span is computed for the reference configuration (see ElemBytes);
// n never overflows: it is below 2^43 for any field values.
func (i Insn) DRAMSpan() (addr, n uint64, ok bool) {
	if i.Op != OpLoad && i.Op != OpStore {
		return 0, 0, false
	}
	esz := ElemBytes(i.Mem, i.DType, i.Op == OpStore)
	if esz == 0 || i.YSize == 0 || i.XSize == 0 {
		return 0, 0, false
	}
	// The last row starts (y_size-1)*x_stride elements in. With x_stride <
	// x_size (which Encode refuses) rows would overlap and the last one
	// still ends the span.
	last := uint64(i.YSize-1) * uint64(i.XStride)
	return i.DRAM, (last + uint64(i.XSize)) * esz, true
}
