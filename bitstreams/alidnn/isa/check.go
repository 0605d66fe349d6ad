package isa

// The checks of field combinations Encode and Decode make beyond each
// field's own range.

// check validates field combinations of an instruction whose fields are all
// in range.
func check(i *Insn) error {
	op := i.Op
	b := func(x bool) int64 {
		if x {
			return 1
		}
		return 0
	}
	// A NOP's queue and a LOAD's memory space first: they decide the
	// queue whose edges checkQueueEdges checks.
	if op == OpNop && i.NopQueue >= numQueues {
		return ferr(op, "queue", int64(i.NopQueue), "illegal queue")
	}
	if op == OpLoad && i.Mem >= numMems {
		return ferr(op, "mem", int64(i.Mem), "illegal memory space")
	}
	if err := checkQueueEdges(i); err != nil {
		return err
	}
	switch op {
	case OpLoad, OpStore:
		return checkMemory(i)
	case OpGEMM, OpALU:
		if op == OpALU && i.Alu >= numAluOps {
			return ferr(op, "alu_op", int64(i.Alu), "illegal ALU operation")
		}
		if i.UopEnd <= i.UopBegin {
			return ferr(op, "uop_end", int64(i.UopEnd), "must be greater than uop_begin (%d)", i.UopBegin)
		}
		if i.IterOut == 0 {
			return ferr(op, "iter_out", 0, "must be at least 1")
		}
		if i.IterIn == 0 {
			return ferr(op, "iter_in", 0, "must be at least 1")
		}
		if op == OpALU {
			return checkALU(i, b)
		}
	case OpPool:
		return checkPool(i)
	}
	return nil
}

// checkQueueEdges rejects tokens to a queue that does not exist: the load
// queue has no previous queue, the store queue no next one.
func checkQueueEdges(i *Insn) error {
	op := i.Op
	switch i.Queue() {
	case QueueLoad:
		if i.PopPrev {
			return ferr(op, "pop_prev", 1, "the load queue has no previous queue")
		}
		if i.PushPrev {
			return ferr(op, "push_prev", 1, "the load queue has no previous queue")
		}
	case QueueStore:
		if i.PopNext {
			return ferr(op, "pop_next", 1, "the store queue has no next queue")
		}
		if i.PushNext {
			return ferr(op, "push_next", 1, "the store queue has no next queue")
		}
	}
	return nil
}

// checkMemory validates a LOAD's or STORE's memory space, data type, sizes
// and padding.
func checkMemory(i *Insn) error {
	op := i.Op
	if i.DType >= numDTypes {
		return ferr(op, "dtype", int64(i.DType), "illegal data type")
	}
	if op == OpStore && i.Mem != MemAcc {
		return ferr(op, "mem", int64(i.Mem), "STORE reads the accumulator only (mem=acc)")
	}
	if op == OpLoad {
		ok := false
		switch i.Mem {
		case MemUop:
			ok = i.DType == Int32
		case MemInp, MemWgt:
			ok = i.DType == Int8 || i.DType == FP32
		case MemAcc, MemParam:
			ok = i.DType == Int32 || i.DType == FP32
		}
		if !ok {
			return ferr(op, "dtype", int64(i.DType), "%s cannot be loaded into %s", i.DType, i.Mem)
		}
	}
	if i.YSize == 0 {
		return ferr(op, "y_size", 0, "must be at least 1")
	}
	if i.XSize == 0 {
		return ferr(op, "x_size", 0, "must be at least 1")
	}
	if i.XStride < i.XSize {
		return ferr(op, "x_stride", int64(i.XStride), "must be at least x_size (%d)", i.XSize)
	}
	pads := [4]struct {
		name string
		v    uint8
	}{{"pad_y0", i.PadY0}, {"pad_y1", i.PadY1}, {"pad_x0", i.PadX0}, {"pad_x1", i.PadX1}}
	padded := false
	for _, p := range pads {
		if p.v == 0 {
			continue
		}
		padded = true
		if op == OpStore || (i.Mem != MemInp && i.Mem != MemAcc) {
			return ferr(op, p.name, int64(p.v), "padding is only for LOAD into inp or acc")
		}
	}
	if i.PadMin && !padded {
		return ferr(op, "pad_min", 1, "pad value set without padding")
	}
	return nil
}

// checkPool validates a POOL's kind, window and input sizes.
func checkPool(i *Insn) error {
	op := i.Op
	if !i.Pool.Depthwise() {
		for _, p := range []struct {
			name string
			v    uint32
		}{{"gap_h", uint32(i.GapH)}, {"gap_w", uint32(i.GapW)}, {"wgt", i.DwWgt}, {"bias", uint32(boolBit(i.DwBias))}, {"clamp", uint32(boolBit(i.DwClamp))},
			{"in_clamp", uint32(boolBit(i.DwInClamp))}} {
			if p.v != 0 {
				return ferr(op, p.name, int64(p.v), "only for the depthwise kind; must be zero for %s", i.Pool)
			}
		}
	}
	for _, p := range []struct {
		name string
		v    uint32
	}{{"win_h", uint32(i.WinH)}, {"win_w", uint32(i.WinW)}, {"stride_h", uint32(i.StrideH)}, {"stride_w", uint32(i.StrideW)}, {"channels", i.Channels}} {
		if p.v == 0 {
			return ferr(op, p.name, 0, "must be at least 1")
		}
	}
	if eh := i.SpanH(); i.InH < eh {
		return ferr(op, "in_h", int64(i.InH), "must be at least the window's extent (%d)", eh)
	}
	if ew := i.SpanW(); i.InW < ew {
		return ferr(op, "in_w", int64(i.InW), "must be at least the window's extent (%d)", ew)
	}
	return nil
}

// SpanH is the rows a POOL's window covers: (win_h − 1) × (gap_h + 1) + 1,
// the window height for max and avg (whose gaps are zero).
func (i Insn) SpanH() uint32 { return windowSpan(i.WinH, i.GapH) }

// SpanW is the columns a POOL's window covers, as SpanH.
func (i Insn) SpanW() uint32 { return windowSpan(i.WinW, i.GapW) }

func windowSpan(win, gap uint8) uint32 {
	if win == 0 {
		return 0
	}
	return (uint32(win)-1)*(uint32(gap)+1) + 1
}

// PoolOut is the output tile of a POOL: (in − span) / stride + 1 each way.
func (i Insn) PoolOut() (h, w uint32) {
	return (i.InH-i.SpanH())/uint32(i.StrideH) + 1, (i.InW-i.SpanW())/uint32(i.StrideW) + 1
}

func boolBit(b bool) int {
	if b {
		return 1
	}
	return 0
}

func checkALU(i *Insn, b func(bool) int64) error {
	op := OpALU
	quant := i.Alu == AluRequant || i.Alu == AluQuantize || i.Alu == AluDequantize
	switch i.Alu {
	case AluAdd, AluMul, AluMin, AluMax, AluRelu:
	case AluExp, AluLog, AluDiv, AluLt, AluEq, AluRound:
		if !i.FP32 {
			return ferr(op, "fp32", 0, "%s has no int32 form; fp32 must be set", i.Alu)
		}
	default:
		if i.FP32 {
			return ferr(op, "fp32", 1, "%s has no fp32 form (only add, mul, min, max, relu, exp, log, div, lt, eq, round)", i.Alu)
		}
	}
	if i.PerChannel && !quant {
		return ferr(op, "per_channel", 1, "only for requant, quantize and dequantize")
	}
	switch i.Alu {
	case AluAdd, AluMul, AluMin, AluMax, AluShr, AluDiv, AluLt, AluEq:
		if !i.UseImm && i.Imm != 0 {
			return ferr(op, "imm", int64(i.Imm), "set without use_imm")
		}
		if i.Alu == AluShr && i.UseImm && (i.Imm < 0 || i.Imm > 31) {
			return ferr(op, "imm", int64(i.Imm), "shift must be 0..31")
		}
	case AluClip:
		if !i.UseImm {
			return ferr(op, "use_imm", 0, "clip takes its bound from imm; use_imm must be 1")
		}
		if i.Imm < 0 {
			return ferr(op, "imm", int64(i.Imm), "clip bound must be non-negative")
		}
	case AluLut:
		if i.UseImm {
			return ferr(op, "use_imm", 1, "lut reads its table from param[src]")
		}
		if i.Imm != 0 {
			return ferr(op, "imm", int64(i.Imm), "lut takes no immediate")
		}
	case AluRelu, AluExp, AluLog, AluRound:
		if i.UseImm {
			return ferr(op, "use_imm", 1, "%s has no second operand", i.Alu)
		}
		if i.Imm != 0 {
			return ferr(op, "imm", int64(i.Imm), "%s has no second operand", i.Alu)
		}
		if i.SrcOut != 0 {
			return ferr(op, "src_out", int64(i.SrcOut), "%s has no second operand; must be zero", i.Alu)
		}
		if i.SrcIn != 0 {
			return ferr(op, "src_in", int64(i.SrcIn), "%s has no second operand; must be zero", i.Alu)
		}
	default: // requant, quantize, dequantize
		if i.UseImm {
			return ferr(op, "use_imm", b(i.UseImm), "%s takes its parameters from param[src]; imm is the zero point", i.Alu)
		}
		if i.Imm < -128 || i.Imm > 127 {
			return ferr(op, "imm", int64(i.Imm), "zero point must be -128..127")
		}
	}
	return nil
}
