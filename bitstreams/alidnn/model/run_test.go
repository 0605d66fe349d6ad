package model

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
)

func TestLocalExec(t *testing.T) {
	l := newLocal(t)
	st := run(t, l, "finish job=7")
	want := alidnn.Stats{JobID: 7, Insns: 1, Cycles: 64 + 1 + 1, LoadBytes: 16, BusyCompute: 1, ClockMHz: 250}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if base, size, idx := l.Window(); base != 0 || size != windowBytes || idx != 0 {
		t.Fatalf("Window() = %d, %d, %d", base, size, idx)
	}
	// Host DMA at unaligned addresses merges with the bytes around.
	put(t, l, dataAddr, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	put(t, l, dataAddr+3, []byte{0xa, 0xb})
	if got := get(t, l, dataAddr+1, 6); !bytes.Equal(got, []byte{2, 3, 0xa, 0xb, 6, 7}) {
		t.Fatalf("unaligned host DMA: % x", got)
	}
	if v, err := l.RoleRead32(alidnn.RegConfig); err != nil || v != alidnn.Default.ConfigWord() {
		t.Fatalf("CONFIG = %#x, %v", v, err)
	}
}

// TestLoadPaddingAcc loads a 2×1 tile with one element of padding all round
// and stores the padded 4×3 SRAM tile back.
func TestLoadPaddingAcc(t *testing.T) {
	for _, c := range []struct {
		dtype, padval string
		pad           int32
	}{
		{"int32", "zero", 0},
		{"int32", "min", math.MinInt32},
		{"fp32", "zero", 0},
		{"fp32", "min", int32(math.Float32bits(float32(math.Inf(-1))))},
	} {
		t.Run(c.dtype+"/"+c.padval, func(t *testing.T) {
			l := newLocal(t)
			tile := make([]int32, 4*lanes) // rows of 2 elements, 3 elements apart in DRAM
			for i := range tile {
				tile[i] = int32(i + 1)
			}
			put(t, l, dataAddr, i32s(tile))
			put(t, l, dataAddr+0x1000, i32s(slices.Repeat([]int32{-9}, 16*lanes)))
			st := run(t, l, fmt.Sprintf(`
load.acc %s sram=0 dram=0x10000 y=2 x=1 stride=2 pad=1,1,1,1 padval=%s ; push_next
store.acc int32 sram=0 dram=0x11000 y=1 x=9 stride=9 ; pop_prev
finish job=1`, c.dtype, c.padval))
			got := asI32(get(t, l, dataAddr+0x1000, 10*lanes*4))
			// 4×3 SRAM tile: rows 0 and 3 and columns 0 and 2 are padding.
			// Only the first 9 elements were stored.
			for s := range 10 {
				y, x := s/3, s%3
				for k := range lanes {
					want := c.pad
					switch {
					case s == 9:
						want = -9
					case y >= 1 && y <= 2 && x == 1:
						want = tile[(y-1)*2*lanes+k]
					}
					if got[s*lanes+k] != want {
						t.Fatalf("element %d lane %d = %#x, want %#x", s, k, got[s*lanes+k], want)
					}
				}
			}
			if st.LoadBytes != 3*16+2*64 || st.StoreBytes != 9*64 {
				t.Errorf("bytes: load %d store %d", st.LoadBytes, st.StoreBytes)
			}
		})
	}
}

// TestLoadPaddingInp checks inp (int8 and fp32 banks) padding in SRAM, which
// only GEMM can read, so it looks at the engine directly.
func TestLoadPaddingInp(t *testing.T) {
	for _, c := range []struct {
		text    string
		padI8   int8
		padF32  float32
		fp32    bool
		payload []byte
	}{
		{"load.inp int8 sram=1 dram=0x1000 y=1 x=2 stride=2 pad=2,0,0,1", 0, 0, false, nil},
		{"load.inp int8 sram=1 dram=0x1000 y=1 x=2 stride=2 pad=2,0,0,1 padval=min", -128, 0, false, nil},
		{"load.inp fp32 sram=1 dram=0x1000 y=1 x=2 stride=2 pad=2,0,0,1", 0, 0, true, nil},
		{"load.inp fp32 sram=1 dram=0x1000 y=1 x=2 stride=2 pad=2,0,0,1 padval=min", 0, float32(math.Inf(-1)), true, nil},
	} {
		t.Run(c.text, func(t *testing.T) {
			e, d := testEngine(t, 3), newMemDDR()
			src := make([]byte, 2*64)
			for i := range src {
				src[i] = byte(i + 1)
			}
			copy(d.mem[0x1000:], src)
			if _, pc, f := execText(t, e, d, c.text+"\nfinish job=1"); f != nil {
				t.Fatalf("%v at %d", f, pc)
			}
			// 3 rows × 3 columns from element 1: row 0, 1 padding; column 2 padding.
			for s := range 9 {
				y, x := s/3, s%3
				pad := y < 2 || x == 2
				for k := range lanes {
					i := (1+s)*lanes + k
					if c.fp32 {
						want := c.padF32
						if !pad {
							want = math.Float32frombits(leU32(src[(x*lanes+k)*4:]))
						}
						if e.inpF[i] != want {
							t.Fatalf("fp32 element %d lane %d = %v, want %v", s, k, e.inpF[i], want)
						}
						continue
					}
					want := c.padI8
					if !pad {
						want = int8(src[x*lanes+k])
					}
					if e.inp[i] != want {
						t.Fatalf("int8 element %d lane %d = %d, want %d", s, k, e.inp[i], want)
					}
				}
			}
		})
	}
}

func leU32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// matmul builds a blocked GEMM of an M×K by K×N matrix on the engine and
// checks it against a naive Go matmul.
func TestGEMMMatmul(t *testing.T) {
	const M, KB, NB = 5, 2, 3 // K = 32, N = 48
	const K, N = KB * lanes, NB * lanes
	rng := rand.New(rand.NewPCG(5, 5))
	for _, fp32 := range []bool{false, true} {
		t.Run(fmt.Sprintf("fp32=%v", fp32), func(t *testing.T) {
			l := newLocal(t)
			var a, b [][]float64 // values, exact in int8 and fp32
			for range M {
				a = append(a, make([]float64, K))
			}
			for range K {
				b = append(b, make([]float64, N))
			}
			for _, m := range [][][]float64{a, b} {
				for _, row := range m {
					for j := range row {
						if fp32 {
							row[j] = float64(float32(rng.NormFloat64()))
						} else {
							row[j] = float64(rng.IntN(256) - 128)
						}
					}
				}
			}
			// DRAM images: inp rows are A's rows; wgt element nb*KB+kb
			// holds W[o][k] = B[kb*16+k][nb*16+o].
			var inp, wgt []float64
			for m := range M {
				inp = append(inp, a[m]...)
			}
			for nb := range NB {
				for kb := range KB {
					for o := range lanes {
						for k := range lanes {
							wgt = append(wgt, b[kb*lanes+k][nb*lanes+o])
						}
					}
				}
			}
			enc := func(v []float64) []byte {
				if fp32 {
					f := make([]float32, len(v))
					for i, x := range v {
						f[i] = float32(x)
					}
					return f32s(f)
				}
				p := make([]int8, len(v))
				for i, x := range v {
					p[i] = int8(x)
				}
				return i8s(p)
			}
			put(t, l, 0x10000, uops(gemmUop(t, 0, 0, 0), gemmUop(t, 0, 1, 1)))
			put(t, l, 0x20000, enc(inp))
			put(t, l, 0x40000, enc(wgt))
			dt, flag := "int8", ""
			if fp32 {
				dt, flag = "fp32", "fp32"
			}
			st := run(t, l, fmt.Sprintf(`
load.uop int32 sram=0 dram=0x10000 y=1 x=2 stride=2
load.inp %[1]s sram=0 dram=0x20000 y=1 x=%[3]d stride=%[3]d
load.wgt %[1]s sram=0 dram=0x40000 y=1 x=%[4]d stride=%[4]d ; push_next
gemm reset uop=0:1 iter=%[5]d,%[6]d dst=%[6]d,1 src=0,0 wgt=0,0
gemm %[2]s uop=0:2 iter=%[5]d,%[6]d dst=%[6]d,1 src=%[7]d,0 wgt=0,%[7]d ; pop_prev push_next
store.acc %[1]s sram=0 dram=0x80000 y=1 x=%[8]d stride=%[8]d ; pop_prev
finish job=9`, dt, flag, M*KB, NB*KB, M, NB, KB, M*NB))
			// Loads pop no token; the GEMM waits for the loads, the store
			// for the GEMM.
			if st.StallLoad != 0 || st.StallCompute == 0 || st.StallStore == 0 {
				t.Errorf("stalls load %d compute %d store %d, want 0, >0, >0", st.StallLoad, st.StallCompute, st.StallStore)
			}
			if st.MACs != M*NB*KB*lanes*lanes {
				t.Errorf("MACS = %d, want %d", st.MACs, M*NB*KB*lanes*lanes)
			}
			if !fp32 {
				// The int8 store saturates, so store int32 as well to compare.
				st = run(t, l, fmt.Sprintf("store.acc int32 sram=0 dram=0x80000 y=1 x=%d stride=%[1]d\nfinish job=1", M*NB))
			}
			got := asI32(get(t, l, 0x80000, M*N*4))
			for m := range M {
				for n := range N {
					var want int32
					if fp32 {
						c := float32(0)
						for kb := range KB {
							var s float32
							for k := range lanes {
								p := float32(float32(a[m][kb*lanes+k]) * float32(b[kb*lanes+k][n]))
								if k == 0 {
									s = p
								} else {
									s = float32(s + p)
								}
							}
							c = float32(c + s)
						}
						want = int32(math.Float32bits(c))
					} else {
						var s int32
						for k := range K {
							s += int32(a[m][k]) * int32(b[k][n])
						}
						want = s
					}
					if got[m*N+n] != want {
						t.Fatalf("C[%d][%d] = %#x, want %#x", m, n, got[m*N+n], want)
					}
				}
			}
		})
	}
}

func fb(v ...float32) []int32 {
	r := make([]int32, len(v))
	for i, f := range v {
		r[i] = int32(math.Float32bits(f))
	}
	return r
}

// param packs requant parameters M and S.
func rq(m int32, s int8) uint64 { return uint64(uint32(m)) | uint64(uint8(s))<<32 }

// sc packs a quantize/dequantize scale.
func sc(f float32) uint64 { return uint64(math.Float32bits(f)) }

// fill16 extends v to 16 lanes by repeating its first lane.
func fill16[T any](v []T) []T {
	if len(v) == 0 {
		return make([]T, lanes)
	}
	r := append([]T(nil), v...)
	for len(r) < lanes {
		r = append(r, v[0])
	}
	return r
}

func TestALU(t *testing.T) {
	const maxI, minI = math.MaxInt32, math.MinInt32
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		insn  string // operands after the mnemonic come from the harness
		dst   []int32
		src   []int32  // acc[1]
		param []uint64 // param[0]
		want  []int32
	}{
		{"alu.add imm=5", []int32{1, -1, maxI}, nil, nil, []int32{6, 4, minI + 4}},
		{"alu.add", []int32{1, maxI, -3}, []int32{2, 1, -4}, nil, []int32{3, minI, -7}},
		{"alu.mul imm=-3", []int32{3, -4, 0x40000000}, nil, nil, []int32{-9, 12, 0x40000000}},
		{"alu.mul", []int32{7, 65536}, []int32{-6, 65536}, nil, []int32{-42, 0}},
		{"alu.min imm=0", []int32{5, -5, 0}, nil, nil, []int32{0, -5, 0}},
		{"alu.min", []int32{1, 2, minI}, []int32{2, 1, maxI}, nil, []int32{1, 1, minI}},
		{"alu.max imm=-1", []int32{5, -5}, nil, nil, []int32{5, -1}},
		{"alu.max", []int32{1, 2, minI}, []int32{2, 1, maxI}, nil, []int32{2, 2, maxI}},
		{"alu.shr imm=2", []int32{5, 6, -5, -6, 7, -7, maxI}, nil, nil, []int32{1, 2, -1, -1, 2, -2, 536870912}},
		{"alu.shr imm=0", []int32{5, -5}, nil, nil, []int32{5, -5}},
		{"alu.shr", []int32{16, 16, 16, -16, 3, 1 << 30}, []int32{1, 40, -3, 2, 1, 31}, nil, []int32{8, 1 << 30 >> 31, 16, -4, 2, 1}},
		{"alu.clip imm=100", []int32{150, -150, 50, -100, maxI}, nil, nil, []int32{100, -100, 50, -100, 100}},
		{"alu.relu", []int32{-1, 0, 5, minI}, nil, nil, []int32{0, 0, 5, 0}},
		// requant: M = 2³⁰ is 0.5 in Q31.
		{"alu.requant zp=-3", []int32{4, 5, -5, 300, -300, 3}, nil, []uint64{rq(1<<30, 0)}, []int32{-1, 0, -5, 127, -128, -1}},
		{"alu.requant", []int32{10, -10}, nil, []uint64{rq(1<<30, -1)}, []int32{10, -10}},
		{"alu.requant", []int32{12, -12, 4, -4}, nil, []uint64{rq(1<<30, 2)}, []int32{2, -1, 1, 0}},
		{"alu.requant zp=1 per_channel", []int32{9, 9, 9}, nil, []uint64{rq(1<<30, 0), rq(1<<30, 1), rq(-1<<30, 0)}, []int32{6, 3, -3}},
		{"alu.requant", []int32{1 << 20}, nil, []uint64{rq(maxI, 31)}, []int32{0}},
		{"alu.quantize", fb(1.25, 1.75, -1.25, 0.25, 100, -100, nan, -inf), nil, []uint64{sc(0.5)}, []int32{2, 4, -2, 0, 127, -128, 0, -128}},
		{"alu.quantize zp=10", fb(1.25, 1.75, -1.25, 0.25, 100), nil, []uint64{sc(0.5)}, []int32{12, 14, 8, 10, 127}},
		{"alu.quantize per_channel", fb(3, 3, 3), nil, []uint64{sc(1), sc(2), sc(4)}, []int32{3, 2, 1}},
		{"alu.dequantize zp=-3", []int32{1, -3, 7}, nil, []uint64{sc(0.5)}, fb(2, 0, 5)},
		{"alu.dequantize per_channel", []int32{8, 8}, nil, []uint64{sc(1), sc(0.25)}, fb(8, 2)},
		{"alu.add fp32 imm=0x3f80", fb(1.5, -2), nil, nil, fb(2.5, -1)},
		{"alu.add fp32 imm=-16512", fb(1.5), nil, nil, fb(0.5)}, // 0xbf80 = -1.0
		{"alu.add fp32", fb(1.5, inf), fb(2.25, 1), nil, fb(3.75, inf)},
		{"alu.mul fp32 imm=0x4000", fb(1.5, -3), nil, nil, fb(3, -6)},
		{"alu.mul fp32", fb(1.5, -3), fb(0.5, 3), nil, fb(0.75, -9)},
		{"alu.min fp32", fb(nan, 1, 2), fb(5, nan, 1), nil, fb(5, 1, 1)},
		{"alu.min fp32 imm=0", fb(-1, 3), nil, nil, fb(-1, 0)},
		{"alu.max fp32 imm=0", fb(-1, 3, nan), nil, nil, fb(0, 3, 0)},
		{"alu.max fp32", fb(nan, 1, 2), fb(5, nan, 1), nil, fb(5, 1, 2)},
		{"alu.relu fp32", fb(-1.5, 2.5, nan), nil, nil, fb(0, 2.5, 0)},
		// exp and log: exact in float64, rounded once to fp32.
		{"alu.exp fp32", fb(0, -0, 1, -1, 0.5, inf, -inf), nil, nil, fb(1, 1, 2.7182817, 0.36787945, 1.6487212, inf, 0)},
		{"alu.exp fp32", fb(88.72, 88.73, -103.9, -104, 1e-8), nil, nil, fb(3.3931806e38, inf, 1.1e-45, 0, 1)},
		{"alu.log fp32", fb(1, 2.7182817, 0.5, 1e30, inf, 0, -0), nil, nil, fb(0, 0.99999994, -0.6931472, 69.07755, inf, -inf, -inf)},
		{"alu.log fp32", fb(1.4e-45, 3.4028235e38), nil, nil, fb(-103.27893, 88.72284)},
		// div: IEEE division, rounded to nearest even.
		{"alu.div fp32", fb(1, -1, 0, 6, 1e-30, inf, 1, -7.5), fb(0, 0, 5, 3, 1e30, 2, 3, -2.5), nil, fb(inf, -inf, 0, 2, 0, inf, 0.33333334, 3)},
		{"alu.div fp32 imm=0x4000", fb(3, -1, inf), nil, nil, fb(1.5, -0.5, inf)},
	}
	l := newLocal(t)
	for _, c := range cases {
		t.Run(c.insn, func(t *testing.T) {
			quant := len(c.param) > 0
			src, srcAcc := "src=0,0", 1
			if c.src == nil || quant {
				srcAcc = 0
			}
			if strings.HasPrefix(c.insn, "alu.relu") || strings.HasPrefix(c.insn, "alu.exp") || strings.HasPrefix(c.insn, "alu.log") {
				src = ""
			}
			put(t, l, 0x10000, uops(aluUop(t, 0, uint32(srcAcc))))
			put(t, l, 0x11000, i32s(append(fill16(c.dst), fill16(c.src)...)))
			put(t, l, 0x12000, u64s(fill16(c.param)))
			run(t, l, fmt.Sprintf(`
load.uop int32 sram=0 dram=0x10000 y=1 x=1 stride=1
load.acc int32 sram=0 dram=0x11000 y=1 x=2 stride=2
load.param int32 sram=0 dram=0x12000 y=1 x=1 stride=1
%s uop=0:1 iter=1,1 dst=0,0 %s ; push_next
store.acc int32 sram=0 dram=0x13000 y=1 x=1 stride=1 ; pop_prev
finish job=1`, c.insn, src))
			got := asI32(get(t, l, 0x13000, lanes*4))
			if want := fill16(c.want); !slices.Equal(got, want) {
				t.Fatalf("got  %v\nwant %v", got, want)
			}
		})
	}
}

// TestALUFold runs ALU operations whose destination factors are 0: each
// iteration reads what the one before wrote, so four rows fold into one
// (sum, then maximum), as ISA.md specifies.
func TestALUFold(t *testing.T) {
	rows := []float32{1.5, -4, 2.25, 8}
	var src []float32
	for _, v := range rows {
		src = append(src, fill16([]float32{v, -v})...)
	}
	l := newLocal(t)
	put(t, l, 0x10000, uops(aluUop(t, 4, 0)))
	put(t, l, 0x11000, f32s(append(src, make([]float32, lanes)...)))
	for _, c := range []struct {
		op   string
		want []float32
	}{{"add", []float32{7.75, -7.75}}, {"max", []float32{8, 4}}} {
		run(t, l, `
load.uop int32 sram=0 dram=0x10000 y=1 x=1 stride=1
load.acc fp32 sram=0 dram=0x11000 y=1 x=5 stride=5
alu.`+c.op+` fp32 uop=0:1 iter=1,4 dst=0,0 src=0,1 ; push_next
store.acc fp32 sram=4 dram=0x12000 y=1 x=1 stride=1 ; pop_prev
finish job=1`)
		got := asI32(get(t, l, 0x12000, lanes*4))
		if want := fb(fill16(c.want)...); !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", c.op, got, want)
		}
	}
}
