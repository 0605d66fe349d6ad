package isa

import (
	"fmt"
	"strconv"
	"strings"
)

// The text form, one instruction per line ('#' starts a comment, blank lines
// are ignored):
//
//	load.inp int8 sram=0 dram=0x1000 y=4 x=16 stride=16 pad=1,1,1,1 ; push_next
//	load.uop int32 sram=0 dram=0x0 y=1 x=8 stride=8
//	gemm reset uop=0:8 iter=4,16 dst=16,1 src=0,1 wgt=1,0 ; pop_prev
//	alu.requant uop=0:1 iter=1,16 dst=0,1 src=0,0 zp=-3 per_channel
//	pool.max win=2,2 stride=2,2 dst=0 src=64 ch=1 in=4,4
//	pool.dw win=3,3 stride=1,1 dst=0 src=0 ch=2 in=6,6 wgt=200 bias clamp fp32
//	store.acc int8 sram=0 dram=0x2000 y=4 x=16 stride=16 ; pop_prev push_prev
//	finish job=42
//	nop.compute ; pop_next push_next
//
// A mnemonic is group[.variant]; operands are key=value (numbers in decimal
// or 0x hex; pairs a,b; ranges begin:end) or bare words (the data type,
// reset, per_channel, fp32, bias, clamp, in_clamp); dependency tokens follow ';'. See ISA.md.

type operand struct {
	key    string
	fields []string // layout field names, in value order
	sep    string   // separator between values
}

var (
	memOperands = []operand{
		{"sram", []string{"sram"}, ""},
		{"dram", []string{"dram"}, ""},
		{"y", []string{"y_size"}, ""},
		{"x", []string{"x_size"}, ""},
		{"stride", []string{"x_stride"}, ""},
		{"pad", []string{"pad_y0", "pad_y1", "pad_x0", "pad_x1"}, ","},
		{"padval", nil, ""}, // zero | min
	}
	loopOperands = []operand{
		{"uop", []string{"uop_begin", "uop_end"}, ":"},
		{"iter", []string{"iter_out", "iter_in"}, ","},
		{"dst", []string{"dst_out", "dst_in"}, ","},
		{"src", []string{"src_out", "src_in"}, ","},
	}
	gemmOperands = append(append([]operand(nil), loopOperands...), operand{"wgt", []string{"wgt_out", "wgt_in"}, ","})
	aluOperands  = append(append([]operand(nil), loopOperands...),
		operand{"imm", []string{"imm"}, ""}, operand{"zp", []string{"imm"}, ""})
	poolOperands = []operand{
		{"win", []string{"win_h", "win_w"}, ","},
		{"stride", []string{"stride_h", "stride_w"}, ","},
		{"dst", []string{"dst"}, ""},
		{"src", []string{"src"}, ""},
		{"ch", []string{"channels"}, ""},
		{"in", []string{"in_h", "in_w"}, ","},
	}
	dwOperands = append(append([]operand(nil), poolOperands...),
		operand{"gap", []string{"gap_h", "gap_w"}, ","}, operand{"wgt", []string{"wgt"}, ""})
	finishOperands = []operand{{"job", []string{"job_id"}, ""}}
)

var tokenNames = []string{"pop_prev", "pop_next", "push_prev", "push_next"}

// AsmError is an assembly error at a line (1-based) and column (1-based
// byte offset; 0 when the error concerns the whole line).
type AsmError struct {
	Line, Col int
	Err       error
}

func (e *AsmError) Error() string {
	if e.Col > 0 {
		return fmt.Sprintf("line %d col %d: %v", e.Line, e.Col, e.Err)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

func (e *AsmError) Unwrap() error { return e.Err }

type asmWord struct {
	text string
	col  int // 1-based
}

func splitWords(s string, base int) []asmWord {
	var out []asmWord
	start := -1
	for k := 0; k <= len(s); k++ {
		space := k == len(s) || s[k] == ' ' || s[k] == '\t' || s[k] == '\r'
		if space && start >= 0 {
			out = append(out, asmWord{s[start:k], base + start + 1})
			start = -1
		} else if !space && start < 0 {
			start = k
		}
	}
	return out
}

func lookup(names []string, s string) int {
	for k, n := range names {
		if n == s {
			return k
		}
	}
	return -1
}

func fieldByName(op Opcode, name string) field {
	for _, f := range layouts[op] {
		if f.Name == name {
			return f
		}
	}
	panic("isa: no field " + name + " in " + op.String())
}

// Assemble parses the text form into instructions. Each instruction is
// validated as by Encode; errors name the line, and the column and operand
// where they can.
func Assemble(text string) ([]Insn, error) {
	var prog []Insn
	for n, line := range strings.Split(text, "\n") {
		if k := strings.IndexByte(line, '#'); k >= 0 {
			line = line[:k]
		}
		i, ok, err := assembleLine(line)
		if err != nil {
			err.Line = n + 1
			return nil, err
		}
		if ok {
			prog = append(prog, i)
		}
	}
	return prog, nil
}

// lineAsm is the assembly of one instruction: the instruction so far, its
// mnemonic's grammar, and what the operands have set.
type lineAsm struct {
	i  Insn
	mn asmWord // the mnemonic
	// The mnemonic's grammar: its variants, key=value operands, bare
	// operands, and the operands it requires.
	variants, bare, required []string
	ops                      []operand
	quant                    bool // a requantising ALU operation, which takes zp but not imm
	seen                     map[string]bool
	// cols maps a layout field name to the column of the word that set it,
	// so validation errors point at the operand.
	cols map[string]int
}

func asmErr(w asmWord, format string, args ...any) *AsmError {
	return &AsmError{Col: w.col, Err: fmt.Errorf(format, args...)}
}

func assembleLine(line string) (Insn, bool, *AsmError) {
	body, tokens, hasTokens := strings.Cut(line, ";")
	words := splitWords(body, 0)
	if len(words) == 0 {
		if hasTokens {
			return Insn{}, false, &AsmError{Col: len(body) + 1, Err: fmt.Errorf("dependency tokens without an instruction")}
		}
		return Insn{}, false, nil
	}
	a := &lineAsm{mn: words[0]}
	group, variant, hasVariant := strings.Cut(a.mn.text, ".")
	g := lookup(opNames[:], group)
	if g < 0 {
		return Insn{}, false, asmErr(a.mn, "unknown mnemonic %q", a.mn.text)
	}
	a.i.Op = Opcode(g)
	a.grammar()
	if err := a.variant(group, variant, hasVariant); err != nil {
		return Insn{}, false, err
	}
	op := a.i.Op
	a.quant = op == OpALU && (a.i.Alu == AluRequant || a.i.Alu == AluQuantize || a.i.Alu == AluDequantize)
	a.seen = map[string]bool{}
	a.cols = map[string]int{"opcode": a.mn.col, "mem": a.mn.col, "alu_op": a.mn.col, "alu_op_4": a.mn.col, "pool_kind": a.mn.col, "queue": a.mn.col}
	for _, w := range words[1:] {
		if err := a.operand(w); err != nil {
			return Insn{}, false, err
		}
	}
	if (op == OpLoad || op == OpStore) && !a.seen["$dtype"] {
		return Insn{}, false, asmErr(a.mn, "missing data type (%s)", strings.Join(dtypeNames[:], ", "))
	}
	for _, r := range a.required {
		if !a.seen[r] {
			return Insn{}, false, asmErr(a.mn, "missing operand %q", r)
		}
	}
	if hasTokens {
		for _, w := range splitWords(tokens, len(body)+1) {
			if err := a.token(w); err != nil {
				return Insn{}, false, err
			}
		}
	}
	if _, err := Encode(a.i); err != nil {
		col := 0
		if fe, ok := err.(*FieldError); ok {
			col = a.cols[fe.Field]
		}
		return Insn{}, false, &AsmError{Col: col, Err: err}
	}
	return a.i, true, nil
}

// grammar sets the variants and operands of the instruction's opcode.
func (a *lineAsm) grammar() {
	switch a.i.Op {
	case OpLoad, OpStore:
		a.variants, a.ops, a.bare = memNames[:], memOperands, dtypeNames[:]
		a.required = []string{"sram", "dram", "y", "x", "stride"}
	case OpGEMM:
		a.ops, a.bare = gemmOperands, []string{"reset", "fp32"}
		a.required = []string{"uop", "iter", "dst", "src", "wgt"}
	case OpALU:
		a.variants, a.ops, a.bare = aluNames[:], aluOperands, []string{"per_channel", "fp32"}
		a.required = []string{"uop", "iter", "dst"}
	case OpPool:
		a.variants, a.ops, a.bare = poolNames[:], poolOperands, []string{"fp32"}
		a.required = []string{"win", "stride", "dst", "src", "ch", "in"}
	case OpFinish:
		a.ops, a.required = finishOperands, []string{"job"}
	case OpNop:
		a.variants = queueNames[:]
	}
}

// variant sets the instruction's variant, the part of the mnemonic after
// the dot, which some opcodes need and the others must not have.
func (a *lineAsm) variant(group, variant string, hasVariant bool) *AsmError {
	if a.variants == nil && hasVariant {
		return asmErr(a.mn, "%s takes no variant, got %q", group, a.mn.text)
	}
	if a.variants == nil {
		return nil
	}
	v := lookup(a.variants, variant)
	if !hasVariant || v < 0 {
		return asmErr(a.mn, "%s needs a variant: %s.{%s}", group, group, strings.Join(a.variants, ","))
	}
	switch a.i.Op {
	case OpLoad, OpStore:
		a.i.Mem = MemSpace(v)
	case OpALU:
		a.i.Alu = AluOp(v)
		if !a.i.Alu.Unary() {
			a.required = append(a.required, "src")
		}
	case OpPool:
		a.i.Pool = PoolKind(v)
		if a.i.Pool.Depthwise() {
			a.ops, a.bare = dwOperands, []string{"fp32", "bias", "clamp", "in_clamp"}
			a.required = append(a.required, "wgt")
		}
	case OpNop:
		a.i.NopQueue = Queue(v)
	}
	return nil
}

// operand sets what operand word w says: a bare flag or data type, or
// key=value.
func (a *lineAsm) operand(w asmWord) *AsmError {
	key, val, isKV := strings.Cut(w.text, "=")
	if a.seen[key] {
		return asmErr(w, "operand %q given twice", key)
	}
	a.seen[key] = true
	if !isKV {
		return a.bareOperand(w, key)
	}
	var spec *operand
	for k := range a.ops {
		if a.ops[k].key == key {
			spec = &a.ops[k]
		}
	}
	op := a.i.Op
	if spec == nil || (key == "imm" && a.quant) || (key == "zp" && op == OpALU && !a.quant) {
		return asmErr(w, "unknown operand %q for %s", key, a.mn.text)
	}
	if key == "padval" {
		switch val {
		case "zero":
		case "min":
			a.i.PadMin = true
			a.cols["pad_min"] = w.col
		default:
			return asmErr(w, "operand %q: padval is zero or min", w.text)
		}
		return nil
	}
	if err := a.fields(w, spec, val); err != nil {
		return err
	}
	if key == "imm" {
		a.i.UseImm = true
		a.cols["use_imm"] = w.col
	}
	return nil
}

// bareOperand sets a flag or, for LOAD and STORE, the data type.
func (a *lineAsm) bareOperand(w asmWord, key string) *AsmError {
	switch {
	case lookup(a.bare, key) < 0:
		return asmErr(w, "unknown operand %q for %s", key, a.mn.text)
	case a.i.Op == OpLoad || a.i.Op == OpStore:
		if a.seen["$dtype"] {
			return asmErr(w, "data type given twice")
		}
		a.seen["$dtype"] = true
		a.i.DType = DType(lookup(dtypeNames[:], key))
		a.cols["dtype"] = w.col
	case key == "reset":
		a.i.Reset = true
		a.cols["reset"] = w.col
	case key == "per_channel":
		a.i.PerChannel = true
		a.cols["per_channel"] = w.col
	case key == "fp32":
		a.i.FP32 = true
		a.cols["fp32"] = w.col
	case key == "bias":
		a.i.DwBias = true
		a.cols["bias"] = w.col
	case key == "clamp":
		a.i.DwClamp = true
		a.cols["clamp"] = w.col
	case key == "in_clamp":
		a.i.DwInClamp = true
		a.cols["in_clamp"] = w.col
	}
	return nil
}

// fields sets the layout fields of operand spec from its value val.
func (a *lineAsm) fields(w asmWord, spec *operand, val string) *AsmError {
	vals := []string{val}
	if spec.sep != "" {
		vals = strings.Split(val, spec.sep)
	}
	if len(vals) != len(spec.fields) {
		return asmErr(w, "operand %q: want %d values separated by %q", w.text, len(spec.fields), spec.sep)
	}
	for k, name := range spec.fields {
		f := fieldByName(a.i.Op, name)
		var raw uint64
		if f.Signed {
			v, err := strconv.ParseInt(vals[k], 0, 64)
			if err != nil {
				return asmErr(w, "operand %q: bad number %q", w.text, vals[k])
			}
			raw = uint64(v)
		} else {
			v, err := strconv.ParseUint(vals[k], 0, 64)
			if err != nil {
				return asmErr(w, "operand %q: bad number %q", w.text, vals[k])
			}
			raw = v
		}
		if !inRange(f, raw) {
			return asmErr(w, "operand %q: %s does not fit in %d bits", w.text, name, f.Width)
		}
		f.set(&a.i, raw)
		a.cols[name] = w.col
	}
	return nil
}

// token sets the dependency token w, each at most once.
func (a *lineAsm) token(w asmWord) *AsmError {
	a.cols[w.text] = w.col
	var flag *bool
	switch w.text {
	case "pop_prev":
		flag = &a.i.PopPrev
	case "pop_next":
		flag = &a.i.PopNext
	case "push_prev":
		flag = &a.i.PushPrev
	case "push_next":
		flag = &a.i.PushNext
	default:
		return asmErr(w, "unknown token %q (want %s)", w.text, strings.Join(tokenNames, ", "))
	}
	if *flag {
		return asmErr(w, "token %q given twice", w.text)
	}
	*flag = true
	return nil
}

// Disassemble returns the text form of a program, one instruction per line.
// For every valid program p, Assemble(Disassemble(p)) returns p.
func Disassemble(p []Insn) string {
	var sb strings.Builder
	for _, i := range p {
		sb.WriteString(DisassembleInsn(i))
		sb.WriteByte('\n')
	}
	return sb.String()
}

// DisassembleInsn returns the text form of one instruction.
func DisassembleInsn(i Insn) string {
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	switch i.Op {
	case OpLoad, OpStore:
		w("%s.%s %s sram=%d dram=%#x y=%d x=%d stride=%d", i.Op, i.Mem, i.DType, i.SRAM, i.DRAM, i.YSize, i.XSize, i.XStride)
		if i.PadY0|i.PadY1|i.PadX0|i.PadX1 != 0 {
			w(" pad=%d,%d,%d,%d", i.PadY0, i.PadY1, i.PadX0, i.PadX1)
		}
		if i.PadMin {
			w(" padval=min")
		}
	case OpGEMM:
		w("gemm")
		if i.Reset {
			w(" reset")
		}
		if i.FP32 {
			w(" fp32")
		}
		w(" uop=%d:%d iter=%d,%d dst=%d,%d src=%d,%d wgt=%d,%d",
			i.UopBegin, i.UopEnd, i.IterOut, i.IterIn, i.DstOut, i.DstIn, i.SrcOut, i.SrcIn, i.WgtOut, i.WgtIn)
	case OpALU:
		w("alu.%s uop=%d:%d iter=%d,%d dst=%d,%d", i.Alu, i.UopBegin, i.UopEnd, i.IterOut, i.IterIn, i.DstOut, i.DstIn)
		if !i.Alu.Unary() || i.SrcOut|i.SrcIn != 0 {
			w(" src=%d,%d", i.SrcOut, i.SrcIn)
		}
		switch {
		case i.Alu == AluRequant || i.Alu == AluQuantize || i.Alu == AluDequantize:
			if i.Imm != 0 {
				w(" zp=%d", i.Imm)
			}
		case i.UseImm:
			w(" imm=%d", i.Imm)
		}
		if i.PerChannel {
			w(" per_channel")
		}
		if i.FP32 {
			w(" fp32")
		}
	case OpPool:
		w("pool.%s win=%d,%d stride=%d,%d dst=%d src=%d ch=%d in=%d,%d",
			i.Pool, i.WinH, i.WinW, i.StrideH, i.StrideW, i.PoolDst, i.PoolSrc, i.Channels, i.InH, i.InW)
		if i.Pool.Depthwise() {
			if i.GapH|i.GapW != 0 {
				w(" gap=%d,%d", i.GapH, i.GapW)
			}
			w(" wgt=%d", i.DwWgt)
			if i.DwBias {
				w(" bias")
			}
			if i.DwClamp {
				w(" clamp")
			}
			if i.DwInClamp {
				w(" in_clamp")
			}
		}
		if i.FP32 {
			w(" fp32")
		}
	case OpFinish:
		w("finish job=%d", i.JobID)
	case OpNop:
		w("nop.%s", i.NopQueue)
	default:
		w("%s", i.Op)
	}
	var toks []string
	for k, b := range []bool{i.PopPrev, i.PopNext, i.PushPrev, i.PushNext} {
		if b {
			toks = append(toks, tokenNames[k])
		}
	}
	if len(toks) > 0 {
		w(" ; %s", strings.Join(toks, " "))
	}
	return sb.String()
}
