package model

import (
	"fmt"
	"math"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// TestExpLogSpecial checks the IEEE special values of exp and log that
// TestALU cannot: NaN results, whose payload ISA.md leaves open.
func TestExpLogSpecial(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		op       string
		in, want []float32
	}{
		{"exp", []float32{nan, -nan, 1}, []float32{nan, nan, 2.7182817}},
		{"log", []float32{-1, -inf, -1e-45, nan, 1}, []float32{nan, nan, nan, nan, 0}},
	}
	l := newLocal(t)
	put(t, l, 0x10000, uops(aluUop(t, 0, 0)))
	for _, c := range cases {
		t.Run(c.op, func(t *testing.T) {
			put(t, l, 0x11000, i32s(fill16(fb(c.in...))))
			run(t, l, `
load.uop int32 sram=0 dram=0x10000 y=1 x=1 stride=1
load.acc fp32 sram=0 dram=0x11000 y=1 x=1 stride=1
alu.`+c.op+` fp32 uop=0:1 iter=1,1 dst=0,0 ; push_next
store.acc fp32 sram=0 dram=0x12000 y=1 x=1 stride=1 ; pop_prev
finish job=1`)
			got := asI32(get(t, l, 0x12000, lanes*4))
			for k, w := range fill16(c.want) {
				g := math.Float32frombits(uint32(got[k]))
				if w != w && g == g || w == w && math.Float32bits(g) != math.Float32bits(w) {
					t.Errorf("lane %d: %s(%v) = %v, want %v", k, c.op, fill16(c.in)[k], g, w)
				}
			}
		})
	}
}

// TestExpLogReference sweeps fp32 inputs across the range, subnormals and
// the overflow edges included, against the definition in ISA.md: the
// float64 result rounded once to fp32.
func TestExpLogReference(t *testing.T) {
	var in []float32
	for b := uint32(0); b < 1<<32-1<<23; b += 0x00fff1 { // every exponent, both signs
		if f := math.Float32frombits(b); f == f {
			in = append(in, f)
		}
	}
	in = append(in, 88.72283, 88.72284, -103.27893, -103.97208, -103.97209)
	in = append(in, make([]float32, (lanes-len(in)%lanes)%lanes)...)
	rows := len(in) / lanes
	l := newLocal(t)
	put(t, l, 0x10000, uops(aluUop(t, 0, 0)))
	put(t, l, 0x100000, f32s(in))
	for _, c := range []struct {
		op  string
		ref func(float64) float64
	}{{"exp", math.Exp}, {"log", math.Log}} {
		t.Run(c.op, func(t *testing.T) {
			for r := 0; r < rows; r += 1024 {
				n := min(1024, rows-r)
				run(t, l, fmt.Sprintf(`
load.uop int32 sram=0 dram=0x10000 y=1 x=1 stride=1
load.acc fp32 sram=0 dram=%#x y=1 x=%d stride=%d
alu.%s fp32 uop=0:1 iter=%d,1 dst=1,0 ; push_next
store.acc fp32 sram=0 dram=0x800000 y=1 x=%d stride=%d ; pop_prev
finish job=1`, 0x100000+r*lanes*4, n, n, c.op, n, n, n))
				got := asI32(get(t, l, 0x800000, n*lanes*4))
				for k, g := range got {
					x := in[r*lanes+k]
					w := float32(c.ref(float64(x)))
					gf := math.Float32frombits(uint32(g))
					if w != w && gf == gf || w == w && uint32(g) != math.Float32bits(w) {
						t.Fatalf("%s(%v) = %v, want %v", c.op, x, gf, w)
					}
				}
			}
		})
	}
}

// TestExpLogInt32Illegal: the int32 form of exp and log is an illegal
// instruction at run time too.
func TestExpLogInt32Illegal(t *testing.T) {
	for _, op := range []isa.AluOp{isa.AluExp, isa.AluLog} {
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

// TestExpLogCycles: exp and log take one cycle per element, as add does.
func TestExpLogCycles(t *testing.T) {
	for _, op := range []string{"alu.add fp32 src=0,0", "alu.exp fp32", "alu.log fp32"} {
		st := run(t, newLocal(t), op+" uop=0:2 iter=3,5 dst=0,0\nfinish job=1")
		if st.BusyCompute != 3*5*2+1 {
			t.Errorf("%s: busy %d cycles, want %d", op, st.BusyCompute, 3*5*2+1)
		}
	}
}
