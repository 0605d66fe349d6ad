package model

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// testEngine returns an engine with random int8 and fp32 inp and wgt.
func testEngine(t testing.TB, seed uint64) *engine {
	t.Helper()
	e, err := newEngine(alidnn.Default, new(atomic.Bool))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range e.inp {
		e.inp[i] = int8(rng.IntN(256) - 128)
		e.inpF[i] = float32(rng.NormFloat64())
	}
	for i := range e.wgt {
		e.wgt[i] = int8(rng.IntN(256) - 128)
		e.wgtF[i] = float32(rng.NormFloat64())
	}
	for s := range uint64(e.cfg.WgtSize) {
		e.pairWeights(s)
	}
	for i := range e.acc {
		e.acc[i] = int32(rng.IntN(1<<20) - 1<<19)
	}
	return e
}

// convGEMM is a 3×3 convolution's GEMM: 9 micro-ops (one per tap) over a
// 16×16 output tile, as a compiler would emit it.
func convGEMM(t testing.TB, e *engine, fp32 bool) isa.Insn {
	t.Helper()
	for tap := range 9 {
		w, err := isa.GemmUop{Acc: 0, Inp: uint32(tap/3*18 + tap%3), Wgt: uint32(tap)}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		e.uop[tap] = w
	}
	return isa.Insn{Op: isa.OpGEMM, FP32: fp32, UopBegin: 0, UopEnd: 9, IterOut: 16, IterIn: 16,
		DstOut: 16, DstIn: 1, SrcOut: 18, SrcIn: 1}
}

// naiveGEMM is the ISA.md loop nest written plainly.
func naiveGEMM(e *engine, in *isa.Insn, acc []int32) {
	for i0 := range in.IterOut {
		for i1 := range in.IterIn {
			for _, w := range e.uop[in.UopBegin:in.UopEnd] {
				u := isa.DecodeGemmUop(w)
				a := u.Acc + i0*in.DstOut + i1*in.DstIn
				x := u.Inp + i0*in.SrcOut + i1*in.SrcIn
				g := u.Wgt + i0*in.WgtOut + i1*in.WgtIn
				for o := range uint32(lanes) {
					if in.Reset {
						acc[a*lanes+o] = 0
						continue
					}
					if in.FP32 {
						var s float32
						for k := range uint32(lanes) {
							p := float32(e.inpF[x*lanes+k] * e.wgtF[g*wgtSize+o*lanes+k])
							if k == 0 {
								s = p
							} else {
								s = float32(s + p)
							}
						}
						acc[a*lanes+o] = int32(math.Float32bits(math.Float32frombits(uint32(acc[a*lanes+o])) + s))
						continue
					}
					var s int32
					for k := range uint32(lanes) {
						s += int32(e.inp[x*lanes+k]) * int32(e.wgt[g*wgtSize+o*lanes+k])
					}
					acc[a*lanes+o] += s
				}
			}
		}
	}
}

func TestGEMMKernels(t *testing.T) {
	for _, fp32 := range []bool{false, true} {
		e := testEngine(t, 7)
		if !fp32 { // extremes: every product ±2¹⁴
			for i := range 18 * 18 * lanes {
				e.inp[i] = -128
			}
			for i := range 9 * wgtSize {
				e.wgt[i] = int8(-128 + 255*(i%2))
			}
			for s := range uint64(9) {
				e.pairWeights(s)
			}
		}
		in := convGEMM(t, e, fp32)
		want := append([]int32(nil), e.acc...)
		naiveGEMM(e, &in, want)
		if f := e.gemm(&in); f != nil {
			t.Fatal(f)
		}
		for i := range want {
			if e.acc[i] != want[i] {
				t.Fatalf("fp32=%v: acc[%d][%d] = %#x, want %#x", fp32, i/lanes, i%lanes, e.acc[i], want[i])
			}
		}
	}
}

func benchGEMM(b *testing.B, fp32 bool) {
	e := testEngine(b, 1)
	in := convGEMM(b, e, fp32)
	macs := loopCount(&in) * lanes * lanes
	b.ResetTimer()
	for b.Loop() {
		if f := e.gemm(&in); f != nil {
			b.Fatal(f)
		}
	}
	b.ReportMetric(float64(macs)*float64(b.N)/b.Elapsed().Seconds(), "MAC/s")
}

func BenchmarkGEMMInt8(b *testing.B) { benchGEMM(b, false) }
func BenchmarkGEMMFP32(b *testing.B) { benchGEMM(b, true) }

// BenchmarkRunGEMMInt8 runs 3×3 convolution GEMMs end to end: through
// alidnn.Exec on a simulated board, fetch, loads and the scheduler included.
func BenchmarkRunGEMMInt8(b *testing.B) {
	l := newLocal(b)
	var w []uint32
	for tap := range 9 {
		w = append(w, gemmUop(b, 0, uint32(tap/3*18+tap%3), uint32(tap)))
	}
	put(b, l, 0x10000, uops(w...))
	const gemms = 64
	text := `load.uop int32 sram=0 dram=0x10000 y=1 x=9 stride=9
load.inp int8 sram=0 dram=0x20000 y=18 x=18 stride=18
load.wgt int8 sram=0 dram=0x30000 y=1 x=9 stride=9 ; push_next
nop.compute ; pop_prev
`
	for range gemms {
		text += "gemm uop=0:9 iter=16,16 dst=16,1 src=18,1 wgt=0,0\n"
	}
	prog := assemble(b, text+"finish job=1")
	put(b, l, progAddr, prog)
	var macs uint64
	for b.Loop() {
		st, err := runBytes(b, l, prog)
		if err != nil {
			b.Fatal(err)
		}
		macs += st.MACs
	}
	b.ReportMetric(float64(macs)/b.Elapsed().Seconds(), "MAC/s")
}

// BenchmarkGEMMNaiveInt8 is the baseline of BenchmarkGEMMInt8: the same
// GEMM instruction through the straightforward reference loop (naiveGEMM),
// which indexes the SRAMs lane by lane.
func BenchmarkGEMMNaiveInt8(b *testing.B) {
	e := testEngine(b, 1)
	in := convGEMM(b, e, false)
	macs := loopCount(&in) * lanes * lanes
	acc := append([]int32(nil), e.acc...)
	b.ResetTimer()
	for b.Loop() {
		naiveGEMM(e, &in, acc)
	}
	b.ReportMetric(float64(macs)*float64(b.N)/b.Elapsed().Seconds(), "MAC/s")
}
