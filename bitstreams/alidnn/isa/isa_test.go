package isa

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// samples is one valid instruction of every kind and variant, with
// non-trivial values, used as bases for the boundary tests.
func samples() []Insn {
	mem := func(op Opcode, m MemSpace, d DType) Insn {
		return Insn{Op: op, Mem: m, DType: d, SRAM: 1, DRAM: 0x1000, YSize: 2, XSize: 3, XStride: 65535}
	}
	loopI := func(op Opcode) Insn {
		return Insn{Op: op, UopBegin: 0, UopEnd: 16383, IterOut: 2, IterIn: 3, DstOut: 4, DstIn: 1, SrcOut: 5, SrcIn: 6}
	}
	alu := func(a AluOp, useImm bool, imm int32) Insn {
		i := loopI(OpALU)
		i.Alu, i.UseImm, i.Imm = a, useImm, imm
		if a.Unary() {
			i.SrcOut, i.SrcIn = 0, 0
		}
		return i
	}
	inp := mem(OpLoad, MemInp, Int8)
	inp.PadY0, inp.PadY1, inp.PadX0, inp.PadX1, inp.PadMin, inp.PushNext = 1, 2, 3, 4, true, true
	acc := mem(OpLoad, MemAcc, FP32)
	acc.PadX1, acc.PopPrev = 15, true
	wgt := mem(OpLoad, MemWgt, Int8)
	wgt.PopNext = true
	st := mem(OpStore, MemAcc, Int8)
	st.PopPrev, st.PushPrev = true, true
	gemm := loopI(OpGEMM)
	gemm.UopEnd, gemm.Reset, gemm.WgtOut, gemm.WgtIn = 16383, true, 7, 8
	gemm.PopPrev, gemm.PopNext, gemm.PushPrev, gemm.PushNext = true, true, true, true
	rq := alu(AluRequant, false, -3)
	rq.PerChannel = true
	return []Insn{
		inp, acc, wgt, st,
		mem(OpLoad, MemUop, Int32), mem(OpLoad, MemParam, Int32), mem(OpLoad, MemAcc, Int32),
		mem(OpStore, MemAcc, Int32), mem(OpStore, MemAcc, FP32),
		gemm,
		alu(AluAdd, true, -32768), alu(AluMul, false, 0), alu(AluMin, true, 32767), alu(AluMax, false, 0),
		alu(AluShr, true, 31), alu(AluShr, false, 0), alu(AluClip, true, 127), alu(AluRelu, false, 0),
		rq, alu(AluQuantize, false, 127), alu(AluDequantize, false, -128),
		mem(OpLoad, MemInp, FP32), mem(OpLoad, MemWgt, FP32),
		func() Insn { g := loopI(OpGEMM); g.FP32 = true; return g }(),
		func() Insn { a := alu(AluMax, false, 0); a.FP32 = true; return a }(),
		func() Insn { a := alu(AluRelu, false, 0); a.FP32 = true; return a }(),
		func() Insn { a := alu(AluExp, false, 0); a.FP32 = true; return a }(),
		func() Insn { a := alu(AluLog, false, 0); a.FP32, a.PushNext = true, true; return a }(),
		func() Insn { a := alu(AluDiv, false, 0); a.FP32 = true; return a }(),
		func() Insn { a := alu(AluDiv, true, 0x4000); a.FP32 = true; return a }(),
		func() Insn { a := alu(AluLt, false, 0); a.FP32 = true; return a }(),
		func() Insn { a := alu(AluLt, true, -0x4080); a.FP32 = true; return a }(),
		func() Insn { a := alu(AluEq, false, 0); a.FP32 = true; return a }(),
		func() Insn { a := alu(AluEq, true, 0x3f80); a.FP32 = true; return a }(),
		func() Insn { a := alu(AluRound, false, 0); a.FP32 = true; return a }(),
		alu(AluLut, false, 0),
		{Op: OpPool, Pool: PoolAvg, FP32: true, WinH: 3, WinW: 3, StrideH: 2, StrideW: 2, PoolDst: 1, PoolSrc: 100, Channels: 1, InH: 17, InW: 17},
		{Op: OpPool, Pool: PoolMax, WinH: 2, WinW: 3, StrideH: 1, StrideW: 2, PoolDst: 9, PoolSrc: 10, Channels: 4, InH: 4095, InW: 4095},
		{Op: OpPool, Pool: PoolAvg, WinH: 15, WinW: 15, StrideH: 15, StrideW: 15, PoolDst: 65535, PoolSrc: 0, Channels: 4095, InH: 15, InW: 15},
		{Op: OpPool, Pool: PoolDepthwise, FP32: true, DwBias: true, DwClamp: true, WinH: 3, WinW: 3, StrideH: 2, StrideW: 1, PoolDst: 7, PoolSrc: 3, Channels: 2, InH: 4095, InW: 4094, DwWgt: 100},
		{Op: OpPool, Pool: PoolDepthwiseAcc, DwInClamp: true, WinH: 5, WinW: 3, StrideH: 1, StrideW: 2, GapH: 1, GapW: 15, PoolDst: 0, PoolSrc: 1000, Channels: 1, InH: 4095, InW: 4095, DwWgt: 4095},
		{Op: OpFinish, JobID: 0xdeadbeef, PopPrev: true},
		{Op: OpNop, NopQueue: QueueLoad, PushNext: true, PopNext: true},
		{Op: OpNop, NopQueue: QueueCompute, PopPrev: true, PopNext: true, PushPrev: true, PushNext: true},
		{Op: OpNop, NopQueue: QueueStore, PopPrev: true, PushPrev: true},
	}
}

func roundTrip(t *testing.T, i Insn) {
	t.Helper()
	b, err := Encode(i)
	if err != nil {
		t.Fatalf("Encode(%+v): %v", i, err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode(Encode(%+v)) = %x: %v", i, b, err)
	}
	if got != i {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, i)
	}
}

func TestRoundTripSamples(t *testing.T) {
	kinds := map[string]bool{}
	for _, i := range samples() {
		roundTrip(t, i)
		kinds[DisassembleInsn(i)[:strings.IndexAny(DisassembleInsn(i)+" ", " ")]] = true
	}
	// Every mnemonic is covered.
	want := []string{"gemm", "finish"}
	for _, m := range memNames {
		if m != "acc" {
			want = append(want, "load."+m)
		}
	}
	want = append(want, "load.acc", "store.acc")
	for _, a := range aluNames {
		want = append(want, "alu."+a)
	}
	for _, p := range poolNames {
		want = append(want, "pool."+p)
	}
	for _, q := range queueNames {
		want = append(want, "nop."+q)
	}
	for _, m := range want {
		if !kinds[m] {
			t.Errorf("no sample for %s", m)
		}
	}
}

// TestBoundaries sets every field of every sample to 0 and to its maximum
// (and minimum, if signed). The result must either round-trip or be rejected;
// for the maximum, a rejection must name the field, and every field's maximum
// must be accepted by at least one sample or rejected everywhere by name.
// alu_op and alu_op_4 are exempt from naming: alu_op's maximum (round) is
// rejected for round's operand rules (fp32, src, imm), and alu_op_4 set
// makes operations 17–31, illegal by alu_op, or lut, by its operand rules.
func TestBoundaries(t *testing.T) {
	for _, base := range samples() {
		for _, f := range layouts[base.Op] {
			if f.Name == "opcode" {
				continue
			}
			vals := []uint64{0, mask(f.Width)}
			if f.Signed {
				vals = []uint64{0, mask(f.Width - 1), uint64(-int64(1) << (f.Width - 1))}
			}
			for k, v := range vals {
				i := base
				f.set(&i, v)
				if _, err := Encode(i); err != nil {
					var fe *FieldError
					if !errors.As(err, &fe) {
						t.Errorf("%s %s=%d: error %v is not a FieldError", base.Op, f.Name, v, err)
					} else if k > 0 && fe.Field != f.Name && f.Name != "alu_op" && f.Name != "alu_op_4" {
						t.Errorf("%s %s=%#x rejected naming %s: %v", DisassembleInsn(base), f.Name, v, fe.Field, err)
					}
					continue
				}
				roundTrip(t, i)
			}
		}
	}
}

func TestOverflowRejected(t *testing.T) {
	for _, base := range samples() {
		for _, f := range layouts[base.Op] {
			over := []uint64{mask(f.Width) + 1}
			if f.Signed {
				over = []uint64{1 << (f.Width - 1), uint64(-(int64(1) << (f.Width - 1)) - 1)}
			}
			for _, v := range over {
				i := base
				f.set(&i, v)
				if f.get(&i) != v {
					continue // the Go type cannot hold the value (bool, uint32 job_id)
				}
				_, err := Encode(i)
				if err == nil || !strings.Contains(err.Error(), f.Name+"=") {
					t.Errorf("%s %s=%d: err = %v, want overflow naming the field", base.Op, f.Name, int64(v), err)
				}
			}
		}
	}
	if _, err := Encode(Insn{Op: 7}); err == nil || !strings.Contains(err.Error(), "opcode") {
		t.Errorf("opcode 7: err = %v", err)
	}
}

func TestUnusedFieldsRejected(t *testing.T) {
	cases := []struct {
		i     Insn
		field string
	}{
		{Insn{Op: OpFinish, DRAM: 1}, "dram"},
		{Insn{Op: OpNop, NopQueue: QueueCompute, JobID: 1}, "job_id"},
		{Insn{Op: OpGEMM, UopEnd: 1, IterOut: 1, IterIn: 1, Imm: 1}, "imm"},
		{Insn{Op: OpALU, UopEnd: 1, IterOut: 1, IterIn: 1, WgtIn: 1}, "wgt_in"},
		{Insn{Op: OpPool, WinH: 1, WinW: 1, StrideH: 1, StrideW: 1, Channels: 1, InH: 1, InW: 1, Reset: true}, "reset"},
	}
	for _, c := range cases {
		_, err := Encode(c.i)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: err = %v, want one naming %s", c.i, err, c.field)
		}
	}
}

func TestInvalidCombinations(t *testing.T) {
	ld := Insn{Op: OpLoad, Mem: MemInp, DType: Int8, YSize: 1, XSize: 1, XStride: 1}
	st := Insn{Op: OpStore, Mem: MemAcc, DType: Int8, YSize: 1, XSize: 1, XStride: 1}
	g := Insn{Op: OpGEMM, UopEnd: 1, IterOut: 1, IterIn: 1}
	a := Insn{Op: OpALU, UopEnd: 1, IterOut: 1, IterIn: 1}
	mod := func(i Insn, f func(*Insn)) Insn { f(&i); return i }
	cases := []struct {
		i     Insn
		field string
	}{
		{mod(ld, func(i *Insn) { i.PopPrev = true }), "pop_prev"},
		{mod(ld, func(i *Insn) { i.PushPrev = true }), "push_prev"},
		{mod(st, func(i *Insn) { i.PushNext = true }), "push_next"},
		{mod(st, func(i *Insn) { i.PopNext = true }), "pop_next"},
		{mod(st, func(i *Insn) { i.Mem = MemInp }), "mem"},
		{mod(st, func(i *Insn) { i.PadX0 = 1 }), "pad_x0"},
		{mod(ld, func(i *Insn) { i.DType = Int32 }), "dtype"},
		{mod(ld, func(i *Insn) { i.Mem = MemWgt; i.PadY1 = 1 }), "pad_y1"},
		{mod(ld, func(i *Insn) { i.Mem = MemUop; i.DType = FP32 }), "dtype"},
		{mod(ld, func(i *Insn) { i.PadMin = true }), "pad_min"},
		{mod(ld, func(i *Insn) { i.YSize = 0 }), "y_size"},
		{mod(ld, func(i *Insn) { i.XSize = 2 }), "x_stride"},
		{mod(g, func(i *Insn) { i.UopBegin = 1 }), "uop_end"},
		{mod(g, func(i *Insn) { i.IterIn = 0 }), "iter_in"},
		{mod(a, func(i *Insn) { i.Imm = 1 }), "imm"},
		{mod(a, func(i *Insn) { i.Alu = AluClip }), "use_imm"},
		{mod(a, func(i *Insn) { i.Alu = AluClip; i.UseImm = true; i.Imm = -1 }), "imm"},
		{mod(a, func(i *Insn) { i.Alu = AluShr; i.UseImm = true; i.Imm = 32 }), "imm"},
		{mod(a, func(i *Insn) { i.Alu = AluRelu; i.SrcIn = 1 }), "src_in"},
		{mod(a, func(i *Insn) { i.PerChannel = true }), "per_channel"},
		{mod(a, func(i *Insn) { i.Alu = AluRequant; i.Imm = 128 }), "imm"},
		{mod(a, func(i *Insn) { i.Alu = AluRequant; i.UseImm = true }), "use_imm"},
		{mod(a, func(i *Insn) { i.Alu = 17 }), "alu_op"},
		{mod(a, func(i *Insn) { i.Alu = 31 }), "alu_op"},
		{mod(a, func(i *Insn) { i.Alu = AluLut; i.FP32 = true }), "fp32"},
		{mod(a, func(i *Insn) { i.Alu = AluLut; i.UseImm = true }), "use_imm"},
		{mod(a, func(i *Insn) { i.Alu = AluLut; i.Imm = 1 }), "imm"},
		{mod(a, func(i *Insn) { i.Alu = AluLut; i.PerChannel = true }), "per_channel"},
		{mod(a, func(i *Insn) { i.Alu = AluLt }), "fp32"},
		{mod(a, func(i *Insn) { i.Alu = AluEq }), "fp32"},
		{mod(a, func(i *Insn) { i.Alu = AluRound }), "fp32"},
		{mod(a, func(i *Insn) { i.Alu = AluLt; i.FP32 = true; i.Imm = 1 }), "imm"},
		{mod(a, func(i *Insn) { i.Alu = AluEq; i.FP32 = true; i.PerChannel = true }), "per_channel"},
		{mod(a, func(i *Insn) { i.Alu = AluRound; i.FP32 = true; i.UseImm = true }), "use_imm"},
		{mod(a, func(i *Insn) { i.Alu = AluRound; i.FP32 = true; i.SrcIn = 1 }), "src_in"},
		{mod(a, func(i *Insn) { i.Alu = AluDiv }), "fp32"},
		{mod(a, func(i *Insn) { i.Alu = AluDiv; i.FP32 = true; i.Imm = 1 }), "imm"},
		{mod(a, func(i *Insn) { i.Alu = AluDiv; i.FP32 = true; i.PerChannel = true }), "per_channel"},
		{mod(a, func(i *Insn) { i.Alu = 255; i.FP32 = true }), "alu_op_4"},
		{mod(a, func(i *Insn) { i.Alu = AluExp }), "fp32"},
		{mod(a, func(i *Insn) { i.Alu = AluLog }), "fp32"},
		{mod(a, func(i *Insn) { i.Alu = AluExp; i.FP32 = true; i.UseImm = true }), "use_imm"},
		{mod(a, func(i *Insn) { i.Alu = AluLog; i.FP32 = true; i.UseImm = true; i.Imm = 0x3f80 }), "use_imm"},
		{mod(a, func(i *Insn) { i.Alu = AluExp; i.FP32 = true; i.Imm = 1 }), "imm"},
		{mod(a, func(i *Insn) { i.Alu = AluLog; i.FP32 = true; i.SrcOut = 1 }), "src_out"},
		{mod(a, func(i *Insn) { i.Alu = AluExp; i.FP32 = true; i.SrcIn = 1 }), "src_in"},
		{mod(a, func(i *Insn) { i.Alu = AluLog; i.FP32 = true; i.PerChannel = true }), "per_channel"},
		{mod(a, func(i *Insn) { i.Alu = AluShr; i.FP32 = true }), "fp32"},
		{mod(a, func(i *Insn) { i.Alu = AluRequant; i.FP32 = true }), "fp32"},
		{Insn{Op: OpFinish, FP32: true}, "fp32"},
		{Insn{Op: OpPool, WinH: 2, WinW: 1, StrideH: 1, StrideW: 1, Channels: 1, InH: 1, InW: 1}, "in_h"},
		{Insn{Op: OpPool, WinH: 1, WinW: 1, StrideH: 1, StrideW: 0, Channels: 1, InH: 1, InW: 1}, "stride_w"},
		{Insn{Op: OpNop, NopQueue: 3}, "queue"},
		{Insn{Op: OpPool, Pool: 4, WinH: 1, WinW: 1, StrideH: 1, StrideW: 1, Channels: 1, InH: 1, InW: 1}, "pool_kind_1"},
		{Insn{Op: OpPool, DwBias: true, WinH: 1, WinW: 1, StrideH: 1, StrideW: 1, Channels: 1, InH: 1, InW: 1}, "bias"},
		{Insn{Op: OpPool, Pool: PoolAvg, GapW: 1, WinH: 1, WinW: 1, StrideH: 1, StrideW: 1, Channels: 1, InH: 1, InW: 1}, "gap_w"},
		{Insn{Op: OpPool, Pool: PoolMax, DwInClamp: true, WinH: 1, WinW: 1, StrideH: 1, StrideW: 1, Channels: 1, InH: 1, InW: 1}, "in_clamp"},
		{Insn{Op: OpPool, Pool: PoolAvg, DwClamp: true, WinH: 1, WinW: 1, StrideH: 1, StrideW: 1, Channels: 1, InH: 1, InW: 1}, "clamp"},
		{Insn{Op: OpPool, Pool: PoolMax, DwWgt: 1, WinH: 1, WinW: 1, StrideH: 1, StrideW: 1, Channels: 1, InH: 1, InW: 1}, "wgt"},
		// A 3-tap window with one row skipped between taps spans 5 rows.
		{Insn{Op: OpPool, Pool: PoolDepthwise, GapH: 1, WinH: 3, WinW: 1, StrideH: 1, StrideW: 1, Channels: 1, InH: 4, InW: 1}, "in_h"},
		{Insn{Op: OpPool, Pool: PoolDepthwise, GapW: 2, WinH: 1, WinW: 2, StrideH: 1, StrideW: 1, Channels: 1, InH: 1, InW: 3}, "in_w"},
	}
	for _, c := range cases {
		_, err := Encode(c.i)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: err = %v, want one naming %s", DisassembleInsn(c.i), err, c.field)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	valid, err := Encode(Insn{Op: OpFinish, JobID: 1})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		b    [16]byte
		want string
	}{
		{"illegal opcode", [16]byte{7}, "opcode"},
		{"reserved low", func() [16]byte { b := valid; b[5] |= 0x80; return b }(), "reserved"},
		{"reserved high", func() [16]byte { b := valid; b[15] = 1; return b }(), "reserved"},
		{"mem 5", func() [16]byte { w := word{}; w.put(7, 3, 5); return w.bytes() }(), "mem"},
		{"queue 3", func() [16]byte { w := word{uint64(OpNop)}; w.put(7, 2, 3); return w.bytes() }(), "queue"},
		{"gemm empty uop range", [16]byte{byte(OpGEMM)}, "uop_end"},
	}
	for _, c := range cases {
		if _, err := Decode(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one naming %s", c.name, err, c.want)
		}
	}
}

func (w word) bytes() (b [16]byte) {
	for k := range 8 {
		b[k] = byte(w[0] >> (8 * k))
		b[8+k] = byte(w[1] >> (8 * k))
	}
	return b
}

// TestGolden freezes the layout: these bytes must never change.
func TestGolden(t *testing.T) {
	cases := []struct {
		asm string
		hex string
	}{
		// opcode 3 | job_id 42 << 7 = 0x1503.
		{"finish job=42", "03150000000000000000000000000000"},
		// opcode 6 | pop_prev 1<<3 | push_next 1<<6 | queue 1 << 7 = 0xce.
		{"nop.compute ; pop_prev push_next", "ce000000000000000000000000000000"},
		// byte 0: mem=1<<7 | push_next; byte 1: pad_min 1<<12, sram 1<<13;
		// dram 0x1000<<29 = bit 41; bytes 8.. y, x, stride; pads as nibbles.
		{"load.inp int8 sram=1 dram=0x1000 y=4 x=16 stride=16 pad=1,2,3,4 padval=min ; push_next", "c0300000000200000400100010002143"},
		{"store.acc int8 sram=2 dram=0x3ffffffff y=1 x=16 stride=16 ; pop_prev", "894100e0ffffff7f0100100010000000"},
		{"gemm reset uop=0:8 iter=4,16 dst=16,1 src=0,1 wgt=1,0 ; pop_prev pop_next", "9a000001200020001008000002100000"},
		{"alu.requant uop=0:1 iter=1,16 dst=0,1 src=0,1 zp=-3 per_channel", "84130004000100010008000002d0ff0f"},
		{"pool.avg win=3,3 stride=2,2 dst=0 src=64 ch=2 in=7,7", "85332200004000000270000700000000"},
		// byte 7: fp32 bit 56, pool_kind_1 bit 57, bias bit 58, clamp bit
		// 59; wgt 0x123 at bit 100 (bytes 12–13), gap 1,2 at bits 112, 116
		// (byte 14).
		{"pool.dw win=3,3 stride=1,2 dst=0 src=64 ch=1 in=9,9 gap=1,2 wgt=0x123 bias fp32", "05332100004000070190000930122100"},
		{"pool.dwacc win=1,1 stride=1,1 dst=0 src=0 ch=1 in=1,1 wgt=0 clamp", "851111000000000a0110000100000000"},
		// in_clamp: bit 60, byte 7 bit 4.
		{"pool.dw win=1,1 stride=1,1 dst=0 src=0 ch=1 in=1,1 wgt=0 in_clamp", "05111100000000120110000100000000"},
	}
	for _, c := range cases {
		p, err := Assemble(c.asm)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Encode(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(b[:]); got != c.hex {
			t.Errorf("%s:\n got %s\nwant %s", c.asm, got, c.hex)
		}
	}
}

func TestProgram(t *testing.T) {
	p := samples()
	b, err := EncodeProgram(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 16*len(p) {
		t.Fatalf("len = %d", len(b))
	}
	got, err := DecodeProgram(b)
	if err != nil {
		t.Fatal(err)
	}
	for k := range p {
		if got[k] != p[k] {
			t.Fatalf("insn %d: got %+v want %+v", k, got[k], p[k])
		}
	}
	if _, err := DecodeProgram(b[:33]); err == nil || !strings.Contains(err.Error(), "offset 32") {
		t.Errorf("short program: err = %v", err)
	}
	bad := bytes.Clone(b)
	bad[16*3] = 7
	if _, err := DecodeProgram(bad); err == nil || !strings.Contains(err.Error(), "instruction 3 (byte offset 48)") {
		t.Errorf("bad insn: err = %v", err)
	}
	p[2].YSize = 0
	if _, err := EncodeProgram(p); err == nil || !strings.Contains(err.Error(), "instruction 2 (byte offset 32)") ||
		!strings.Contains(err.Error(), "y_size") {
		t.Errorf("bad insn: err = %v", err)
	}
	if got, err := DecodeProgram(nil); err != nil || len(got) != 0 {
		t.Errorf("empty: %v %v", got, err)
	}
}

func TestQueue(t *testing.T) {
	cases := []struct {
		i    Insn
		want Queue
	}{
		{Insn{Op: OpLoad, Mem: MemInp}, QueueLoad},
		{Insn{Op: OpLoad, Mem: MemWgt}, QueueLoad},
		{Insn{Op: OpLoad, Mem: MemUop}, QueueCompute},
		{Insn{Op: OpLoad, Mem: MemAcc}, QueueCompute},
		{Insn{Op: OpLoad, Mem: MemParam}, QueueCompute},
		{Insn{Op: OpStore, Mem: MemAcc}, QueueStore},
		{Insn{Op: OpGEMM}, QueueCompute},
		{Insn{Op: OpALU}, QueueCompute},
		{Insn{Op: OpPool}, QueueCompute},
		{Insn{Op: OpFinish}, QueueCompute},
		{Insn{Op: OpNop, NopQueue: QueueStore}, QueueStore},
		{Insn{Op: OpNop, NopQueue: QueueLoad}, QueueLoad},
	}
	for _, c := range cases {
		if got := c.i.Queue(); got != c.want {
			t.Errorf("%+v: Queue() = %s, want %s", c.i, got, c.want)
		}
	}
}

// TestLayoutTables checks the field tables: inside 128 bits, no overlaps,
// unique names, and the shared header.
func TestLayoutTables(t *testing.T) {
	for op := range Opcode(numOpcodes) {
		l := Layout(op)
		var used word
		names := map[string]bool{}
		for k, f := range l {
			if k < len(header) && f != header[k].Field {
				t.Errorf("%s: field %d is %s, want header %s", op, k, f.Name, header[k].Name)
			}
			if f.Width < 1 || f.Width > 64 || f.Lo < 0 || f.Lo+f.Width > 128 {
				t.Errorf("%s.%s: bits %d+%d outside the word", op, f.Name, f.Lo, f.Width)
			}
			var m word
			m.put(f.Lo, f.Width, ^uint64(0))
			if m[0]&used[0] != 0 || m[1]&used[1] != 0 {
				t.Errorf("%s.%s overlaps another field", op, f.Name)
			}
			used[0] |= m[0]
			used[1] |= m[1]
			if names[f.Name] {
				t.Errorf("%s: duplicate field %s", op, f.Name)
			}
			names[f.Name] = true
		}
	}
	if Layout(7) != nil {
		t.Error("Layout(7) != nil")
	}
	if dram := Layout(OpLoad)[9]; dram.Name != "dram" || dram.Width < 34 {
		t.Errorf("dram field %+v: want at least 34 bits for 16 GiB", dram)
	}
}

// TestReservedBits sets, one at a time, every bit no field of the opcode
// defines, in a valid encoding; Decode must reject each.
func TestReservedBits(t *testing.T) {
	for _, base := range samples() {
		b, err := Encode(base)
		if err != nil {
			t.Fatal(err)
		}
		used := usedMasks[base.Op]
		for bit := range 128 {
			if used[bit/64]>>(bit%64)&1 != 0 {
				continue
			}
			c := b
			c[bit/8] |= 1 << (bit % 8)
			if _, err := Decode(c); err == nil || !strings.Contains(err.Error(), "reserved") {
				t.Errorf("%s with reserved bit %d: err = %v", base.Op, bit, err)
			}
		}
	}
}

// TestWordBits exercises the packer on every position and width, including
// fields that straddle bit 64 (none of today's layouts do).
func TestWordBits(t *testing.T) {
	for width := 1; width <= 64; width++ {
		for lo := 0; lo+width <= 128; lo++ {
			v := uint64(0xa5c3_96f0_1234_5678) & mask(width)
			var w word
			w.put(lo, width, v)
			if got := w.get(lo, width); got != v {
				t.Fatalf("lo %d width %d: got %#x want %#x", lo, width, got, v)
			}
			// Nothing outside the field is touched.
			var m word
			m.put(lo, width, ^uint64(0))
			if w[0]&^m[0] != 0 || w[1]&^m[1] != 0 {
				t.Fatalf("lo %d width %d: bits outside the field set", lo, width)
			}
		}
	}
}

func TestStrings(t *testing.T) {
	for _, s := range []fmt.Stringer{Opcode(7), MemSpace(5), DType(3), AluOp(17), PoolKind(4), Queue(3)} {
		if !strings.Contains(s.String(), "(") {
			t.Errorf("%T out of range prints %q", s, s)
		}
	}
	if OpGEMM.String() != "gemm" || MemParam.String() != "param" || FP32.String() != "fp32" ||
		AluRequant.String() != "requant" || AluExp.String() != "exp" || AluLog.String() != "log" || AluDiv.String() != "div" ||
		AluLt.String() != "lt" || AluEq.String() != "eq" || AluRound.String() != "round" ||
		PoolAvg.String() != "avg" || QueueStore.String() != "store" {
		t.Error("enum names changed")
	}
}
