package isa

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Field is one bit field of an instruction: bits Lo .. Lo+Width-1 of the
// 128-bit little-endian instruction word (bit 0 is bit 0 of byte 0, bit 64 is
// bit 0 of byte 8). Signed fields hold two's complement values.
type Field struct {
	Name   string
	Lo     int
	Width  int
	Signed bool
	Doc    string
}

// field binds a Field to the Insn member it encodes.
type field struct {
	Field
	get func(*Insn) uint64 // raw value; signed values sign-extended to 64 bits
	set func(*Insn, uint64)
}

type integer interface {
	~uint8 | ~uint32 | ~uint64
}

func u[T integer](name string, lo, width int, p func(*Insn) *T, doc string) field {
	return field{
		Field: Field{Name: name, Lo: lo, Width: width, Doc: doc},
		get:   func(i *Insn) uint64 { return uint64(*p(i)) },
		set:   func(i *Insn, v uint64) { *p(i) = T(v) },
	}
}

func s32(name string, lo, width int, p func(*Insn) *int32, doc string) field {
	return field{
		Field: Field{Name: name, Lo: lo, Width: width, Signed: true, Doc: doc},
		get:   func(i *Insn) uint64 { return uint64(int64(*p(i))) },
		set:   func(i *Insn, v uint64) { *p(i) = int32(int64(v)) },
	}
}

func bit(name string, lo int, p func(*Insn) *bool, doc string) field {
	return field{
		Field: Field{Name: name, Lo: lo, Width: 1, Doc: doc},
		get: func(i *Insn) uint64 {
			if *p(i) {
				return 1
			}
			return 0
		},
		set: func(i *Insn, v uint64) { *p(i) = v != 0 },
	}
}

// header is common to every instruction: opcode and dependency tokens.
var header = []field{
	u("opcode", 0, 3, func(i *Insn) *Opcode { return &i.Op }, "instruction group"),
	bit("pop_prev", 3, func(i *Insn) *bool { return &i.PopPrev }, "wait for a token from the previous queue"),
	bit("pop_next", 4, func(i *Insn) *bool { return &i.PopNext }, "wait for a token from the next queue"),
	bit("push_prev", 5, func(i *Insn) *bool { return &i.PushPrev }, "send a token to the previous queue when done"),
	bit("push_next", 6, func(i *Insn) *bool { return &i.PushNext }, "send a token to the next queue when done"),
}

func with(fs ...field) []field { return append(append([]field(nil), header...), fs...) }

func fp32(i *Insn) *bool { return &i.FP32 }

var memFields = with(
	u("mem", 7, 3, func(i *Insn) *MemSpace { return &i.Mem }, "SRAM memory space"),
	u("dtype", 10, 2, func(i *Insn) *DType { return &i.DType }, "element data type"),
	bit("pad_min", 12, func(i *Insn) *bool { return &i.PadMin }, "pad value: 0 = zero, 1 = minimum of the type"),
	u("sram", 13, 16, func(i *Insn) *uint32 { return &i.SRAM }, "SRAM base (elements of the space)"),
	u("dram", 29, 35, func(i *Insn) *uint64 { return &i.DRAM }, "DRAM device byte address (32 GiB)"),
	u("y_size", 64, 16, func(i *Insn) *uint32 { return &i.YSize }, "rows"),
	u("x_size", 80, 16, func(i *Insn) *uint32 { return &i.XSize }, "elements per row"),
	u("x_stride", 96, 16, func(i *Insn) *uint32 { return &i.XStride }, "elements between DRAM row starts"),
	u("pad_y0", 112, 4, func(i *Insn) *uint8 { return &i.PadY0 }, "padding rows before"),
	u("pad_y1", 116, 4, func(i *Insn) *uint8 { return &i.PadY1 }, "padding rows after"),
	u("pad_x0", 120, 4, func(i *Insn) *uint8 { return &i.PadX0 }, "padding columns before"),
	u("pad_x1", 124, 4, func(i *Insn) *uint8 { return &i.PadX1 }, "padding columns after"),
)

var gemmFields = with(
	bit("reset", 7, func(i *Insn) *bool { return &i.Reset }, "write zero to acc[dst] instead of accumulating"),
	u("uop_begin", 8, 13, func(i *Insn) *uint32 { return &i.UopBegin }, "first micro-op"),
	u("uop_end", 21, 14, func(i *Insn) *uint32 { return &i.UopEnd }, "one past the last micro-op"),
	u("iter_out", 35, 14, func(i *Insn) *uint32 { return &i.IterOut }, "outer loop extent"),
	u("iter_in", 49, 14, func(i *Insn) *uint32 { return &i.IterIn }, "inner loop extent"),
	bit("fp32", 63, fp32, "fp32 × fp32 → fp32 from the fp32 banks of inp and wgt"),
	u("dst_out", 64, 11, func(i *Insn) *uint32 { return &i.DstOut }, "acc index factor, outer loop"),
	u("dst_in", 75, 11, func(i *Insn) *uint32 { return &i.DstIn }, "acc index factor, inner loop"),
	u("src_out", 86, 11, func(i *Insn) *uint32 { return &i.SrcOut }, "inp index factor, outer loop"),
	u("src_in", 97, 11, func(i *Insn) *uint32 { return &i.SrcIn }, "inp index factor, inner loop"),
	u("wgt_out", 108, 10, func(i *Insn) *uint32 { return &i.WgtOut }, "wgt index factor, outer loop"),
	u("wgt_in", 118, 10, func(i *Insn) *uint32 { return &i.WgtIn }, "wgt index factor, inner loop"),
)

var aluFields = with(
	aluOpBits("alu_op", 7, 4, 0, "ALU operation, bits 3:0 (alu_op_4 is bit 4)"),
	bit("use_imm", 11, func(i *Insn) *bool { return &i.UseImm }, "second operand is imm"),
	bit("per_channel", 12, func(i *Insn) *bool { return &i.PerChannel }, "one quantisation parameter per lane"),
	u("uop_begin", 13, 13, func(i *Insn) *uint32 { return &i.UopBegin }, "first micro-op"),
	u("uop_end", 26, 14, func(i *Insn) *uint32 { return &i.UopEnd }, "one past the last micro-op"),
	u("iter_out", 40, 12, func(i *Insn) *uint32 { return &i.IterOut }, "outer loop extent"),
	u("iter_in", 52, 12, func(i *Insn) *uint32 { return &i.IterIn }, "inner loop extent"),
	u("dst_out", 64, 11, func(i *Insn) *uint32 { return &i.DstOut }, "acc dst index factor, outer loop"),
	u("dst_in", 75, 11, func(i *Insn) *uint32 { return &i.DstIn }, "acc dst index factor, inner loop"),
	u("src_out", 86, 11, func(i *Insn) *uint32 { return &i.SrcOut }, "src (acc or param) index factor, outer loop"),
	u("src_in", 97, 11, func(i *Insn) *uint32 { return &i.SrcIn }, "src (acc or param) index factor, inner loop"),
	s32("imm", 108, 16, func(i *Insn) *int32 { return &i.Imm }, "immediate, or zero point for requant/quantize/dequantize"),
	bit("fp32", 124, fp32, "lanes are fp32 (add, mul, min, max, relu; required by exp, log, div, lt, eq, round); imm is bfloat16"),
	aluOpBits("alu_op_4", 125, 1, 4, "ALU operation, bit 4: 1 = lut (alu_op 16)"),
)

// aluOpBits is width bits of an ALU's operation from bit k: the operation
// grew a fifth bit (lut) after every value of the first four was taken, so
// bit 4 lives at 125.
func aluOpBits(name string, lo, width, k int, doc string) field {
	return field{
		Field: Field{Name: name, Lo: lo, Width: width, Doc: doc},
		// The top field returns every higher bit too, so an operation
		// beyond 31 fails its range check instead of encoding as another.
		get: func(i *Insn) uint64 {
			if k == 0 {
				return uint64(i.Alu) & mask(width)
			}
			return uint64(i.Alu) >> k
		},
		set: func(i *Insn, v uint64) {
			m := AluOp(mask(width)) << k
			i.Alu = i.Alu&^m | AluOp(v)<<k&m
		},
	}
}

// poolKindBit is one bit of a POOL's kind: the kind grew depthwise values
// after its low bit's neighbours were taken, so its high bit lives at 57.
func poolKindBit(name string, lo, k int, doc string) field {
	return field{
		Field: Field{Name: name, Lo: lo, Width: 1, Doc: doc},
		// Bit 1 returns every higher bit too, so a kind beyond 3 fails
		// its range check instead of encoding as another kind.
		get: func(i *Insn) uint64 {
			if k == 0 {
				return uint64(i.Pool) & 1
			}
			return uint64(i.Pool) >> 1
		},
		set: func(i *Insn, v uint64) { i.Pool = i.Pool&^(1<<k) | PoolKind(v&1)<<k },
	}
}

var poolFields = with(
	poolKindBit("pool_kind", 7, 0, "kind bit 0; kind = pool_kind + 2 × pool_kind_1: 0 = max, 1 = avg, 2 = dw, 3 = dwacc"),
	u("win_h", 8, 4, func(i *Insn) *uint8 { return &i.WinH }, "window height"),
	u("win_w", 12, 4, func(i *Insn) *uint8 { return &i.WinW }, "window width"),
	u("stride_h", 16, 4, func(i *Insn) *uint8 { return &i.StrideH }, "vertical stride"),
	u("stride_w", 20, 4, func(i *Insn) *uint8 { return &i.StrideW }, "horizontal stride"),
	u("dst", 24, 16, func(i *Insn) *uint32 { return &i.PoolDst }, "acc base of the output tile"),
	u("src", 40, 16, func(i *Insn) *uint32 { return &i.PoolSrc }, "acc base of the input tile"),
	bit("fp32", 56, fp32, "lanes are fp32"),
	poolKindBit("pool_kind_1", 57, 1, "kind bit 1 (see pool_kind)"),
	bit("bias", 58, func(i *Insn) *bool { return &i.DwBias }, "depthwise: each channel block's param rows start with a bias row"),
	bit("clamp", 59, func(i *Insn) *bool { return &i.DwClamp }, "depthwise: clamp the sums to a low and a high row (after the bias row)"),
	bit("in_clamp", 60, func(i *Insn) *bool { return &i.DwInClamp }, "depthwise: clamp each input to a low and a high row (after clamp's rows)"),
	u("channels", 64, 12, func(i *Insn) *uint32 { return &i.Channels }, "channel blocks (acc rows per pixel)"),
	u("in_h", 76, 12, func(i *Insn) *uint32 { return &i.InH }, "input tile height"),
	u("in_w", 88, 12, func(i *Insn) *uint32 { return &i.InW }, "input tile width"),
	u("wgt", 100, 12, func(i *Insn) *uint32 { return &i.DwWgt }, "depthwise: param row of the first channel block"),
	u("gap_h", 112, 4, func(i *Insn) *uint8 { return &i.GapH }, "depthwise: rows skipped between window taps (dilation − 1)"),
	u("gap_w", 116, 4, func(i *Insn) *uint8 { return &i.GapW }, "depthwise: columns skipped between window taps (dilation − 1)"),
)

var finishFields = with(
	u("job_id", 7, 32, func(i *Insn) *uint32 { return &i.JobID }, "reported with the completion interrupt"),
)

var nopFields = with(
	u("queue", 7, 2, func(i *Insn) *Queue { return &i.NopQueue }, "0 = load, 1 = compute, 2 = store"),
)

var layouts = [numOpcodes][]field{
	OpLoad:   memFields,
	OpStore:  memFields,
	OpGEMM:   gemmFields,
	OpFinish: finishFields,
	OpALU:    aluFields,
	OpPool:   poolFields,
	OpNop:    nopFields,
}

// allFields lists, once per Insn member, a field that reads it; Encode uses it
// to reject members the opcode does not use.
var allFields = func() []field {
	seen := map[string]bool{}
	var all []field
	for _, l := range layouts {
		for _, f := range l {
			if !seen[f.Name] {
				seen[f.Name] = true
				all = append(all, f)
			}
		}
	}
	return all
}()

// Layout returns the field table of an opcode (header included), in bit
// order. It returns nil for an illegal opcode.
func Layout(op Opcode) []Field {
	if op >= numOpcodes {
		return nil
	}
	out := make([]Field, len(layouts[op]))
	for k, f := range layouts[op] {
		out[k] = f.Field
	}
	return out
}

// word is a 128-bit instruction: w[0] holds bits 63:0, w[1] bits 127:64.
type word [2]uint64

func mask(width int) uint64 {
	if width >= 64 {
		return ^uint64(0)
	}
	return 1<<uint(width) - 1
}

func (w *word) get(lo, width int) uint64 {
	switch {
	case lo >= 64:
		return w[1] >> uint(lo-64) & mask(width)
	case lo+width <= 64:
		return w[0] >> uint(lo) & mask(width)
	}
	n := 64 - lo // bits in w[0]
	return w[0]>>uint(lo) | (w[1]&mask(width-n))<<uint(n)
}

func (w *word) put(lo, width int, v uint64) {
	v &= mask(width)
	switch {
	case lo >= 64:
		w[1] |= v << uint(lo-64)
	case lo+width <= 64:
		w[0] |= v << uint(lo)
	default:
		n := 64 - lo
		w[0] |= v << uint(lo)
		w[1] |= v >> uint(n)
	}
}

// usedMask returns the bits a layout defines; the rest are reserved.
func usedMask(l []field) word {
	var w word
	for _, f := range l {
		w.put(f.Lo, f.Width, ^uint64(0))
	}
	return w
}

var usedMasks = func() (m [numOpcodes]word) {
	for op, l := range layouts {
		m[op] = usedMask(l)
	}
	return m
}()

// FieldError reports an invalid instruction field.
type FieldError struct {
	Op     Opcode
	Field  string // field name as in Layout and ISA.md
	Value  string // the offending value, in decimal
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("isa: %s: %s=%s: %s", e.Op, e.Field, e.Value, e.Reason)
}

func ferr(op Opcode, name string, v int64, format string, args ...any) error {
	return &FieldError{Op: op, Field: name, Value: strconv.FormatInt(v, 10), Reason: fmt.Sprintf(format, args...)}
}

func inRange(f field, raw uint64) bool {
	if f.Signed {
		v := int64(raw)
		return v >= -(1<<(f.Width-1)) && v < 1<<(f.Width-1)
	}
	return raw <= mask(f.Width)
}

// Encode validates an instruction and returns its 16-byte encoding. Every
// field must fit its width, fields the opcode does not use must be zero, and
// the combination must be valid (see ISA.md); the error names the field.
func Encode(i Insn) ([InsnBytes]byte, error) {
	var b [InsnBytes]byte
	if i.Op >= numOpcodes {
		return b, ferr(i.Op, "opcode", int64(i.Op), "illegal opcode")
	}
	l := layouts[i.Op]
	own := map[string]bool{}
	for _, f := range l {
		own[f.Name] = true
		if raw := f.get(&i); !inRange(f, raw) {
			v := strconv.FormatUint(raw, 10)
			if f.Signed {
				v = strconv.FormatInt(int64(raw), 10)
			}
			return b, &FieldError{Op: i.Op, Field: f.Name, Value: v, Reason: fmt.Sprintf("does not fit in %d bits", f.Width)}
		}
	}
	for _, f := range allFields {
		if !own[f.Name] && f.get(&i) != 0 {
			return b, &FieldError{Op: i.Op, Field: f.Name, Value: strconv.FormatUint(f.get(&i), 10),
				Reason: fmt.Sprintf("field not used by %s; must be zero", i.Op)}
		}
	}
	if err := check(&i); err != nil {
		return b, err
	}
	var w word
	for _, f := range l {
		w.put(f.Lo, f.Width, f.get(&i))
	}
	binary.LittleEndian.PutUint64(b[0:8], w[0])
	binary.LittleEndian.PutUint64(b[8:16], w[1])
	return b, nil
}

// Decode returns the instruction encoded in b. It rejects illegal opcodes,
// reserved bits that are set and invalid field combinations; the error names
// the field. Decode(Encode(i)) == i for every valid i and, conversely, a
// successful Decode re-encodes to the same bytes.
func Decode(b [InsnBytes]byte) (Insn, error) {
	w := word{binary.LittleEndian.Uint64(b[0:8]), binary.LittleEndian.Uint64(b[8:16])}
	var i Insn
	op := Opcode(w.get(0, 3))
	if op >= numOpcodes {
		return i, ferr(op, "opcode", int64(op), "illegal opcode")
	}
	used := usedMasks[op]
	if r0, r1 := w[0]&^used[0], w[1]&^used[1]; r0 != 0 || r1 != 0 {
		return i, fmt.Errorf("isa: %s: reserved bits set: %#016x_%016x", op, r1, r0)
	}
	for _, f := range layouts[op] {
		v := w.get(f.Lo, f.Width)
		if f.Signed && v>>(f.Width-1)&1 != 0 {
			v |= ^mask(f.Width) // sign-extend
		}
		f.set(&i, v)
	}
	if err := check(&i); err != nil {
		return Insn{}, err
	}
	return i, nil
}

// EncodeProgram encodes instructions back to back.
func EncodeProgram(p []Insn) ([]byte, error) {
	out := make([]byte, 0, len(p)*InsnBytes)
	for k, i := range p {
		b, err := Encode(i)
		if err != nil {
			return nil, fmt.Errorf("instruction %d (byte offset %d): %w", k, k*InsnBytes, err)
		}
		out = append(out, b[:]...)
	}
	return out, nil
}

// DecodeProgram decodes a byte stream of instructions; its length must be a
// multiple of 16.
func DecodeProgram(b []byte) ([]Insn, error) {
	if len(b)%InsnBytes != 0 {
		return nil, fmt.Errorf("isa: program length %d is not a multiple of %d (trailing %d bytes at byte offset %d)",
			len(b), InsnBytes, len(b)%InsnBytes, len(b)/InsnBytes*InsnBytes)
	}
	p := make([]Insn, 0, len(b)/InsnBytes)
	for off := 0; off < len(b); off += InsnBytes {
		i, err := Decode([InsnBytes]byte(b[off : off+InsnBytes]))
		if err != nil {
			return nil, fmt.Errorf("instruction %d (byte offset %d): %w", off/InsnBytes, off, err)
		}
		p = append(p, i)
	}
	return p, nil
}
