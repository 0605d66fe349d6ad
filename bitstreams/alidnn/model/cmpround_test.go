package model

import (
	"fmt"
	"math"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// TestCompareRound checks lt, eq and round lane by lane, bit for bit (the
// sign of a zero included) on IEEE's special values; a NaN result only has
// to be a NaN, as ISA.md leaves its payload open.
func TestCompareRound(t *testing.T) {
	nan, inf, nz := float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1))
	cases := []struct {
		insn           string
		dst, src, want []float32
	}{
		{"alu.lt fp32 src=0,1", []float32{1, 2, nz, 0, nan, 1, -inf, inf, -1e-45, 3, nan, -inf},
			[]float32{2, 1, 0, nz, 1, nan, -3.4028235e38, inf, 0, 3, nan, inf}, []float32{1, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 1}},
		{"alu.lt fp32 imm=0 src=0,0", []float32{-1, 0, nz, 1, nan, -1e-45, -inf}, nil, []float32{1, 0, 0, 0, 0, 1, 1}},
		{"alu.lt fp32 imm=-16512 src=0,0", []float32{-1, -1.0000001, -2, 0}, nil, []float32{0, 1, 1, 0}}, // 0xbf80 = -1.0
		{"alu.eq fp32 src=0,1", []float32{1, nz, nan, inf, 1, 1.0000001, -inf, 1e-45},
			[]float32{1, 0, nan, inf, 2, 1, inf, 0}, []float32{1, 1, 0, 1, 0, 0, 0, 0}},
		{"alu.eq fp32 imm=0x3f80 src=0,0", []float32{1, 2, nan, 0.99999994}, nil, []float32{1, 0, 0, 0}},
		{"alu.round fp32", []float32{2.5, 3.5, -0.5, -2.5, 0.49999997, nz, 0, inf, -inf, 1.5, 8388609, -1.5, 0.50000006, 1e-45, nan, -8388607.5},
			nil, []float32{2, 4, nz, -2, 0, nz, 0, inf, -inf, 2, 8388609, -2, 1, 0, nan, -8388608}},
		{"alu.round fp32", []float32{-1e-45, -0.49999997, 16777216, -3.4028235e38, 0.5, 1.4999999, 2.4999998, -2.5000002},
			nil, []float32{nz, nz, 16777216, -3.4028235e38, 0, 1, 2, -3}},
	}
	l := newLocal(t)
	put(t, l, 0x10000, uops(aluUop(t, 0, 1)))
	for _, c := range cases {
		t.Run(c.insn, func(t *testing.T) {
			put(t, l, 0x11000, f32s(append(fill16(c.dst), fill16(c.src)...)))
			run(t, l, fmt.Sprintf(`
load.uop int32 sram=0 dram=0x10000 y=1 x=1 stride=1
load.acc fp32 sram=0 dram=0x11000 y=1 x=2 stride=2
%s uop=0:1 iter=1,1 dst=0,0 ; push_next
store.acc fp32 sram=0 dram=0x12000 y=1 x=1 stride=1 ; pop_prev
finish job=1`, c.insn))
			got := asI32(get(t, l, 0x12000, lanes*4))
			for k, w := range fill16(c.want) {
				g := math.Float32frombits(uint32(got[k]))
				if w != w && g == g || w == w && math.Float32bits(g) != math.Float32bits(w) {
					t.Errorf("lane %d: %s on %v, %v = %v, want %v", k, c.insn, fill16(c.dst)[k], fill16(c.src)[k], g, w)
				}
			}
		})
	}
}

// TestCompareRoundReference sweeps fp32 values of every exponent, both signs,
// subnormals and halfway values among them, against float64 references:
// x < y, x == y and math.RoundToEven, each rounded to fp32.
func TestCompareRoundReference(t *testing.T) {
	var in []float32
	for b := uint32(0); b < 1<<32-1<<23; b += 0x03fff1 {
		in = append(in, math.Float32frombits(b))
	}
	for k := -40; k <= 40; k++ { // halfway values and their neighbours
		h := float32(k) + 0.5
		in = append(in, h, math.Nextafter32(h, 0), math.Nextafter32(h, float32(2*k+1)*2), -h)
	}
	in = append(in, make([]float32, (2*lanes-len(in)%(2*lanes))%(2*lanes))...)
	// The second operand of lane k is the value half the sweep away, so
	// equal pairs occur where the sweep repeats a value.
	rows := len(in) / lanes
	l := newLocal(t)
	put(t, l, 0x10000, uops(aluUop(t, 0, uint32(rows/2))))
	put(t, l, 0x100000, f32s(in))
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for _, c := range []struct {
		op  string
		ref func(x, y float64) float64
	}{
		{"lt", func(x, y float64) float64 { return b2f(x < y) }},
		{"eq", func(x, y float64) float64 { return b2f(x == y) }},
		{"round", func(x, _ float64) float64 { return math.RoundToEven(x) }},
	} {
		t.Run(c.op, func(t *testing.T) {
			n := rows / 2
			src := " src=1,0"
			if c.op == "round" {
				src = ""
			}
			run(t, l, fmt.Sprintf(`
load.uop int32 sram=0 dram=0x10000 y=1 x=1 stride=1
load.acc fp32 sram=0 dram=0x100000 y=1 x=%d stride=%d
alu.%s fp32 uop=0:1 iter=%d,1 dst=1,0%s ; push_next
store.acc fp32 sram=0 dram=0x800000 y=1 x=%d stride=%d ; pop_prev
finish job=1`, rows, rows, c.op, n, src, n, n))
			got := asI32(get(t, l, 0x800000, n*lanes*4))
			for k, g := range got {
				x, y := in[k], in[k+n*lanes]
				w := float32(c.ref(float64(x), float64(y)))
				gf := math.Float32frombits(uint32(g))
				if w != w && gf == gf || w == w && uint32(g) != math.Float32bits(w) {
					t.Fatalf("%s(%v, %v) = %v, want %v", c.op, x, y, gf, w)
				}
			}
		})
	}
}

// TestCompareRoundInt32Illegal: lt, eq and round have no int32 form; the
// decoder refuses it at run time too.
func TestCompareRoundInt32Illegal(t *testing.T) {
	for _, op := range []isa.AluOp{isa.AluLt, isa.AluEq, isa.AluRound} {
		b, err := isa.Encode(isa.Insn{Op: isa.OpALU, Alu: op, FP32: true, UopEnd: 1, IterOut: 1, IterIn: 1})
		if err != nil {
			t.Fatal(err)
		}
		b[15] &^= 1 << (124 - 120) // clear fp32
		fin, err := isa.Encode(isa.Insn{Op: isa.OpFinish, JobID: 1})
		if err != nil {
			t.Fatal(err)
		}
		wantFault(t, newLocal(t), append(b[:], fin[:]...), alidnn.CauseIllegal, 0)
	}
}

// TestCompareRoundCycles: one cycle per lane vector, as add.
func TestCompareRoundCycles(t *testing.T) {
	for _, op := range []string{"alu.lt fp32 src=0,0", "alu.eq fp32 imm=0 src=0,0", "alu.round fp32"} {
		st := run(t, newLocal(t), op+" uop=0:2 iter=3,5 dst=0,0\nfinish job=1")
		if st.BusyCompute != 3*5*2+1 {
			t.Errorf("%s: busy %d cycles, want %d", op, st.BusyCompute, 3*5*2+1)
		}
	}
}
