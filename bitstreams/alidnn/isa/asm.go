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
//	store.acc int8 sram=0 dram=0x2000 y=4 x=16 stride=16 ; pop_prev push_prev
//	finish job=42
//	nop.compute ; pop_next push_next
//
// A mnemonic is group[.variant]; operands are key=value (numbers in decimal
// or 0x hex; pairs a,b; ranges begin:end) or bare words (the data type,
// reset, per_channel); dependency tokens follow ';'. See ISA.md.

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

func assembleLine(line string) (Insn, bool, *AsmError) {
	var i Insn
	body, tokens, hasTokens := strings.Cut(line, ";")
	words := splitWords(body, 0)
	if len(words) == 0 {
		if hasTokens {
			return i, false, &AsmError{Col: len(body) + 1, Err: fmt.Errorf("dependency tokens without an instruction")}
		}
		return i, false, nil
	}
	fail := func(w asmWord, format string, args ...any) (Insn, bool, *AsmError) {
		return Insn{}, false, &AsmError{Col: w.col, Err: fmt.Errorf(format, args...)}
	}
	mn := words[0]
	group, variant, hasVariant := strings.Cut(mn.text, ".")
	g := lookup(opNames[:], group)
	if g < 0 {
		return fail(mn, "unknown mnemonic %q", mn.text)
	}
	op := Opcode(g)
	i.Op = op
	var variants []string
	var ops []operand
	var bare []string
	var required []string
	switch op {
	case OpLoad, OpStore:
		variants, ops, bare = memNames[:], memOperands, dtypeNames[:]
		required = []string{"sram", "dram", "y", "x", "stride"}
	case OpGEMM:
		ops, bare = gemmOperands, []string{"reset", "fp32"}
		required = []string{"uop", "iter", "dst", "src", "wgt"}
	case OpALU:
		variants, ops, bare = aluNames[:], aluOperands, []string{"per_channel", "fp32"}
		required = []string{"uop", "iter", "dst"}
	case OpPool:
		variants, ops, bare = poolNames[:], poolOperands, []string{"fp32"}
		required = []string{"win", "stride", "dst", "src", "ch", "in"}
	case OpFinish:
		ops, required = finishOperands, []string{"job"}
	case OpNop:
		variants = queueNames[:]
	}
	if variants == nil && hasVariant {
		return fail(mn, "%s takes no variant, got %q", group, mn.text)
	}
	if variants != nil {
		v := lookup(variants, variant)
		if !hasVariant || v < 0 {
			return fail(mn, "%s needs a variant: %s.{%s}", group, group, strings.Join(variants, ","))
		}
		switch op {
		case OpLoad, OpStore:
			i.Mem = MemSpace(v)
		case OpALU:
			i.Alu = AluOp(v)
			if !i.Alu.Unary() {
				required = append(required, "src")
			}
		case OpPool:
			i.Pool = PoolKind(v)
		case OpNop:
			i.NopQueue = Queue(v)
		}
	}
	quant := op == OpALU && (i.Alu == AluRequant || i.Alu == AluQuantize || i.Alu == AluDequantize)
	seen := map[string]bool{}
	// cols maps a layout field name to the column of the word that set it,
	// so validation errors point at the operand.
	cols := map[string]int{"opcode": mn.col, "mem": mn.col, "alu_op": mn.col, "pool_kind": mn.col, "queue": mn.col}
	for _, w := range words[1:] {
		key, val, isKV := strings.Cut(w.text, "=")
		if seen[key] {
			return fail(w, "operand %q given twice", key)
		}
		seen[key] = true
		if !isKV {
			switch {
			case lookup(bare, key) < 0:
				return fail(w, "unknown operand %q for %s", key, mn.text)
			case op == OpLoad || op == OpStore:
				if seen["$dtype"] {
					return fail(w, "data type given twice")
				}
				seen["$dtype"] = true
				i.DType = DType(lookup(dtypeNames[:], key))
				cols["dtype"] = w.col
			case key == "reset":
				i.Reset = true
				cols["reset"] = w.col
			case key == "per_channel":
				i.PerChannel = true
				cols["per_channel"] = w.col
			case key == "fp32":
				i.FP32 = true
				cols["fp32"] = w.col
			}
			continue
		}
		var spec *operand
		for k := range ops {
			if ops[k].key == key {
				spec = &ops[k]
			}
		}
		if spec == nil || (key == "imm" && quant) || (key == "zp" && op == OpALU && !quant) {
			return fail(w, "unknown operand %q for %s", key, mn.text)
		}
		if key == "padval" {
			switch val {
			case "zero":
			case "min":
				i.PadMin = true
				cols["pad_min"] = w.col
			default:
				return fail(w, "operand %q: padval is zero or min", w.text)
			}
			continue
		}
		vals := []string{val}
		if spec.sep != "" {
			vals = strings.Split(val, spec.sep)
		}
		if len(vals) != len(spec.fields) {
			return fail(w, "operand %q: want %d values separated by %q", w.text, len(spec.fields), spec.sep)
		}
		for k, name := range spec.fields {
			f := fieldByName(op, name)
			var raw uint64
			if f.Signed {
				v, err := strconv.ParseInt(vals[k], 0, 64)
				if err != nil {
					return fail(w, "operand %q: bad number %q", w.text, vals[k])
				}
				raw = uint64(v)
			} else {
				v, err := strconv.ParseUint(vals[k], 0, 64)
				if err != nil {
					return fail(w, "operand %q: bad number %q", w.text, vals[k])
				}
				raw = v
			}
			if !inRange(f, raw) {
				return fail(w, "operand %q: %s does not fit in %d bits", w.text, name, f.Width)
			}
			f.set(&i, raw)
			cols[name] = w.col
		}
		if key == "imm" {
			i.UseImm = true
			cols["use_imm"] = w.col
		}
	}
	if (op == OpLoad || op == OpStore) && !seen["$dtype"] {
		return fail(mn, "missing data type (%s)", strings.Join(dtypeNames[:], ", "))
	}
	for _, r := range required {
		if !seen[r] {
			return fail(mn, "missing operand %q", r)
		}
	}
	if hasTokens {
		base := len(body) + 1
		for _, w := range splitWords(tokens, base) {
			cols[w.text] = w.col
			switch w.text {
			case "pop_prev":
				if i.PopPrev {
					return fail(w, "token %q given twice", w.text)
				}
				i.PopPrev = true
			case "pop_next":
				if i.PopNext {
					return fail(w, "token %q given twice", w.text)
				}
				i.PopNext = true
			case "push_prev":
				if i.PushPrev {
					return fail(w, "token %q given twice", w.text)
				}
				i.PushPrev = true
			case "push_next":
				if i.PushNext {
					return fail(w, "token %q given twice", w.text)
				}
				i.PushNext = true
			default:
				return fail(w, "unknown token %q (want %s)", w.text, strings.Join(tokenNames, ", "))
			}
		}
	}
	if _, err := Encode(i); err != nil {
		col := 0
		if fe, ok := err.(*FieldError); ok {
			col = cols[fe.Field]
		}
		return Insn{}, false, &AsmError{Col: col, Err: err}
	}
	return i, true, nil
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
