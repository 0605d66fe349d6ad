package model

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/shell"
)

func TestStoreSaturates(t *testing.T) {
	l := newLocal(t)
	v := []int32{127, 128, -128, -129, math.MaxInt32, math.MinInt32, 300, -5, 255, 256, 0, 1, -1, 1000, -1000, 42}
	put(t, l, 0x10000, i32s(v))
	run(t, l, `
load.acc int32 sram=0 dram=0x10000 y=1 x=1 stride=1 ; push_next
store.acc int8 sram=0 dram=0x11000 y=1 x=1 stride=1 ; pop_prev push_prev
store.acc int32 sram=0 dram=0x12000 y=1 x=1 stride=1
store.acc fp32 sram=0 dram=0x13000 y=1 x=1 stride=1
nop.compute ; pop_next
finish job=1`)
	// VTA would truncate: 128 -> -128, 300 -> 44, 255 -> -1.
	want := []int8{127, 127, -128, -128, 127, -128, 127, -5, 127, 127, 0, 1, -1, 127, -128, 42}
	if got := asI8(get(t, l, 0x11000, lanes)); !slices.Equal(got, want) {
		t.Errorf("int8 store %v, want %v", got, want)
	}
	for _, a := range []uint64{0x12000, 0x13000} {
		if got := asI32(get(t, l, a, 4*lanes)); !slices.Equal(got, v) {
			t.Errorf("copy store at %#x: %v", a, got)
		}
	}
}

// TestStoreStrided stores rows x_stride apart and leaves the gaps alone.
func TestStoreStrided(t *testing.T) {
	l := newLocal(t)
	put(t, l, 0x10000, i32s(slices.Repeat([]int32{3}, 2*lanes)))
	put(t, l, 0x11000, bytes.Repeat([]byte{0xee}, 64))
	run(t, l, `
load.acc int32 sram=0 dram=0x10000 y=1 x=2 stride=2 ; push_next
store.acc int8 sram=0 dram=0x11000 y=2 x=1 stride=3 ; pop_prev
finish job=1`)
	got := get(t, l, 0x11000, 64)
	want := slices.Concat(bytes.Repeat([]byte{3}, 16), bytes.Repeat([]byte{0xee}, 32), bytes.Repeat([]byte{3}, 16))
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x", got)
	}
}

func TestPool(t *testing.T) {
	// A 3×4 pixel, 2-channel tile: lane l of pixel (y,x) channel c is
	// v = 10y + x + 100c - l.
	const inH, inW, ch = 3, 4, 2
	var tile []int32
	for y := range inH {
		for x := range inW {
			for c := range ch {
				for l := range lanes {
					tile = append(tile, int32(10*y+x+100*c-l))
				}
			}
		}
	}
	at := func(y, x, c, l int) int32 { return tile[((y*inW+x)*ch+c)*lanes+l] }
	for _, c := range []struct {
		kind string
		fp32 bool
		red  func(vs []int32) int32
	}{
		{"max", false, func(vs []int32) int32 { return slices.Max(vs) }},
		{"avg", false, func(vs []int32) int32 {
			s := 0.0
			for _, v := range vs {
				s += float64(v)
			}
			return int32(math.Round(s / float64(len(vs)))) // half away from zero
		}},
		{"max", true, func(vs []int32) int32 { return slices.Max(vs) }},
		{"avg", true, func(vs []int32) int32 {
			var s float32
			for _, v := range vs {
				s += float32(v)
			}
			return int32(s / float32(len(vs)))
		}},
	} {
		t.Run(fmt.Sprintf("%s/fp32=%v", c.kind, c.fp32), func(t *testing.T) {
			l := newLocal(t)
			img := tile
			if c.fp32 {
				img = make([]int32, len(tile))
				for i, v := range tile {
					img[i] = int32(math.Float32bits(float32(v)))
				}
			}
			put(t, l, 0x10000, i32s(img))
			flag, dt := "", "int32"
			if c.fp32 {
				flag, dt = "fp32", "fp32"
			}
			// 2×2 window, stride 1×2: out 2×2.
			run(t, l, fmt.Sprintf(`
load.acc %[2]s sram=0 dram=0x10000 y=1 x=%[3]d stride=%[3]d
pool.%[1]s win=2,2 stride=1,2 dst=100 src=0 ch=2 in=3,4 %[4]s ; push_next
store.acc %[2]s sram=100 dram=0x20000 y=1 x=8 stride=8 ; pop_prev
finish job=1`, c.kind, dt, len(tile)/lanes, flag))
			got := asI32(get(t, l, 0x20000, 8*lanes*4))
			for oy := range 2 {
				for ox := range 2 {
					for cc := range ch {
						for ln := range lanes {
							var vs []int32
							for wy := range 2 {
								for wx := range 2 {
									vs = append(vs, at(oy+wy, 2*ox+wx, cc, ln))
								}
							}
							want := c.red(vs)
							g := got[((oy*2+ox)*ch+cc)*lanes+ln]
							if c.fp32 {
								g = int32(math.Float32frombits(uint32(g)))
							}
							if g != want {
								t.Fatalf("out (%d,%d) c%d lane %d = %d, want %d (window %v)", oy, ox, cc, ln, g, want, vs)
							}
						}
					}
				}
			}
		})
	}
	// Average rounds half away from zero: (1+2)/2 = 1.5 -> 2, -1.5 -> -2.
	l := newLocal(t)
	put(t, l, 0x10000, i32s(slices.Concat(slices.Repeat([]int32{1}, 8), slices.Repeat([]int32{-1}, 8),
		slices.Repeat([]int32{2}, 8), slices.Repeat([]int32{-2}, 8))))
	run(t, l, `
load.acc int32 sram=0 dram=0x10000 y=1 x=2 stride=2
pool.avg win=1,2 stride=1,1 dst=10 src=0 ch=1 in=1,2 ; push_next
store.acc int32 sram=10 dram=0x20000 y=1 x=1 stride=1 ; pop_prev
finish job=1`)
	want := slices.Concat(slices.Repeat([]int32{2}, 8), slices.Repeat([]int32{-2}, 8))
	if got := asI32(get(t, l, 0x20000, 64)); !slices.Equal(got, want) {
		t.Fatalf("avg rounding: %v", got)
	}
}

// TestTokens runs a program whose result depends on its tokens: GEMM must
// wait for the input LOAD, which the load queue runs after a long weight
// LOAD. Without the tokens the GEMM reads the input buffer before it is
// loaded (a hazard), and the store may run before the GEMM.
func TestTokens(t *testing.T) {
	prog := func(tokens bool) string {
		push, pop, popS := "", "", ""
		if tokens {
			push, pop, popS = "; push_next", "; pop_prev push_next", "; pop_prev"
		}
		return fmt.Sprintf(`
load.uop int32 sram=0 dram=0x10000 y=1 x=1 stride=1
load.wgt int8 sram=0 dram=0x20000 y=1 x=16 stride=16
load.inp int8 sram=0 dram=0x30000 y=1 x=1 stride=1 %s
gemm reset uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0
gemm uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 %s
store.acc int32 sram=0 dram=0x40000 y=1 x=1 stride=1 %s
finish job=1`, push, pop, popS)
	}
	result := func(tokens bool) []int32 {
		l := newLocal(t)
		put(t, l, 0x10000, uops(gemmUop(t, 0, 0, 0)))
		w := make([]int8, wgtSize) // identity
		for o := range lanes {
			w[o*lanes+o] = 1
		}
		put(t, l, 0x20000, i8s(w))
		put(t, l, 0x30000, i8s([]int8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}))
		put(t, l, 0x40000, i32s(slices.Repeat([]int32{-7}, lanes)))
		run(t, l, prog(tokens))
		return asI32(get(t, l, 0x40000, 64))
	}
	want := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	if got := result(true); !slices.Equal(got, want) {
		t.Fatalf("with tokens: %v, want %v", got, want)
	}
	if got := result(false); slices.Equal(got, want) {
		t.Fatalf("without tokens the result is still right (%v): the model does not run queues concurrently", got)
	}
}

func TestDeadlock(t *testing.T) {
	for _, c := range []struct {
		text string
		pc   uint32
	}{
		{"nop.load\ngemm uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 ; pop_prev\nfinish job=1", 1},
		{"store.acc int8 sram=0 dram=0x1000 y=1 x=1 stride=1 ; pop_prev\nfinish job=1 ; pop_next", 0},
		{"nop.compute\nfinish job=1 ; pop_next\nnop.store ; pop_prev\nfinish job=2", 1},
		// the first pop is satisfied, the second is not
		{"nop.load ; push_next\nnop.compute ; pop_prev\nnop.compute ; pop_prev\nfinish job=1", 2},
	} {
		t.Run(c.text, func(t *testing.T) {
			wantFault(t, newLocal(t), assemble(t, c.text), alidnn.CauseDeadlock, c.pc)
		})
	}
}

// TestTokenDepth checks that a FIFO takes isa.TokenDepth tokens and that
// the push of one more fails at the pushing instruction, in each of the
// four directions. The consumer starts with a long instruction, so every
// push lands before the first pop.
func TestTokenDepth(t *testing.T) {
	const (
		slowLoad    = "load.inp int8 sram=0 dram=0x1000 y=1 x=2048 stride=2048\n"
		slowCompute = "gemm reset uop=0:1 iter=2000,2000 dst=0,0 src=0,0 wgt=0,0\n"
		slowStore   = "store.acc int32 sram=0 dram=0x1000 y=1 x=2048 stride=2048\n"
	)
	for _, c := range []struct{ name, push, slow, pop string }{
		{"load to compute", "nop.load ; push_next", slowCompute, "nop.compute ; pop_prev"},
		{"compute to load", "nop.compute ; push_prev", slowLoad, "nop.load ; pop_next"},
		{"compute to store", "nop.compute ; push_next", slowStore, "nop.store ; pop_prev"},
		{"store to compute", "nop.store ; push_prev", slowCompute, "nop.compute ; pop_next"},
	} {
		prog := func(n int) string {
			return c.slow + strings.Repeat(c.push+"\n", n) + strings.Repeat(c.pop+"\n", n) + "finish job=1"
		}
		t.Run(c.name, func(t *testing.T) {
			if _, err := runBytes(t, newLocal(t), assemble(t, prog(isa.TokenDepth))); err != nil {
				t.Fatalf("%d tokens: %v", isa.TokenDepth, err)
			}
			wantFault(t, newLocal(t), assemble(t, prog(isa.TokenDepth+1)), alidnn.CauseIllegal, isa.TokenDepth+1)
		})
	}
}

func TestWindow(t *testing.T) {
	const out = windowBytes // first byte past the window
	for _, c := range []struct {
		name string
		text string
		pc   uint32
	}{
		{"load", "nop.compute\nload.inp int8 sram=0 dram=0x1000000 y=1 x=1 stride=1\nfinish job=1", 1},
		{"load straddles", "load.acc int32 sram=0 dram=0xffffe0 y=1 x=1 stride=1\nfinish job=1", 0},
		{"load later row", "load.inp int8 sram=0 dram=0xfffff0 y=2 x=1 stride=1\nfinish job=1", 0},
		{"store", "store.acc int32 sram=0 dram=0x1000000 y=1 x=1 stride=1\nfinish job=1", 0},
		{"store straddles", "store.acc int32 sram=0 dram=0xffffe0 y=1 x=1 stride=1\nfinish job=1", 0},
		{"store strided", "store.acc int8 sram=0 dram=0xffffe0 y=3 x=1 stride=1\nfinish job=1", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLocal(t)
			pattern := bytes.Repeat([]byte{0x5a}, 256)
			put(t, l, out-128, pattern)
			put(t, l, 0x10000, i32s(slices.Repeat([]int32{1}, lanes)))
			wantFault(t, l, assemble(t, c.text), alidnn.CauseWindow, c.pc)
			if got := get(t, l, out-128, 256); !bytes.Equal(got[128:], pattern[128:]) {
				t.Fatalf("DDR outside the window changed: % x", got[128:])
			}
			if c.name == "store straddles" {
				if got := get(t, l, out-128, 128); !bytes.Equal(got, pattern[:128]) {
					t.Fatalf("a refused store wrote inside the window: % x", got)
				}
			}
		})
	}
	t.Run("fetch", func(t *testing.T) {
		l := newLocal(t)
		put(t, l, out, assemble(t, "finish job=1"))
		_, err := alidnn.Exec(context.Background(), l, alidnn.Run{Insns: out, Count: 1})
		var ee *alidnn.EngineError
		if !errors.As(err, &ee) || ee.Cause != alidnn.CauseWindow || ee.PC != 0 {
			t.Fatalf("fetch outside the window: %v", err)
		}
		// a stream that runs off the end of the window
		put(t, l, out-16, assemble(t, "finish job=1"))
		_, err = alidnn.Exec(context.Background(), l, alidnn.Run{Insns: out - 16, Count: 2})
		if !errors.As(err, &ee) || ee.Cause != alidnn.CauseWindow {
			t.Fatalf("fetch across the window's end: %v", err)
		}
	})
	t.Run("disabled window", func(t *testing.T) {
		l := newLocal(t)
		put(t, l, 0, assemble(t, "finish job=1"))
		_, err := alidnn.Exec(context.Background(), l, alidnn.Run{Count: 1, Window: 3})
		var ee *alidnn.EngineError
		if !errors.As(err, &ee) || ee.Cause != alidnn.CauseWindow {
			t.Fatalf("run through a disabled window: %v", err)
		}
	})
}

func TestIllegal(t *testing.T) {
	prog := assemble(t, "nop.load\nnop.compute\nnop.store\nfinish job=1")
	bad := slices.Clone(prog)
	copy(bad[2*16:], bytes.Repeat([]byte{0x07}, 16)) // opcode 7
	l := newLocal(t)
	wantFault(t, l, bad, alidnn.CauseIllegal, 2)
	bad = slices.Clone(prog)
	bad[16+15] = 0x80 // reserved bit of a NOP
	wantFault(t, l, bad, alidnn.CauseIllegal, 1)

	// Run-time rules: a requant shift outside 1..62, reserved micro-op bits
	// under an ALU, overlapping pool tiles.
	put(t, l, 0x10000, uops(aluUop(t, 0, 0), 1<<22))
	for _, c := range []struct {
		text  string
		param uint64
		pc    uint32
	}{
		{"alu.requant uop=0:1 iter=1,1 dst=0,0 src=0,0", rq(1<<30, 32), 2},
		{"alu.requant uop=0:1 iter=1,1 dst=0,0 src=0,0", rq(1<<30, -31), 2},
		{"alu.add uop=1:2 iter=1,1 dst=0,0 src=0,0", 0, 2},
		{"pool.max win=2,2 stride=1,1 dst=8 src=0 ch=1 in=3,3", 0, 2},
	} {
		t.Run(c.text, func(t *testing.T) {
			put(t, l, 0x11000, u64s(fill16([]uint64{c.param})))
			wantFault(t, l, assemble(t, `
load.uop int32 sram=0 dram=0x10000 y=1 x=2 stride=2
load.param int32 sram=0 dram=0x11000 y=1 x=1 stride=1
`+c.text+"\nfinish job=1"), alidnn.CauseIllegal, c.pc)
		})
	}
}

func TestSRAMRange(t *testing.T) {
	l := newLocal(t)
	put(t, l, 0x10000, uops(gemmUop(t, 2047, 2047, 1023), aluUop(t, 2047, 255), aluUop(t, 0, 2047)))
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{"load.inp int8 sram=2040 dram=0x20000 y=1 x=8 stride=8", true},  // fits
		{"load.inp int8 sram=2040 dram=0x20000 y=1 x=9 stride=9", false}, // does not
		{"load.inp int8 sram=2040 dram=0x20000 y=1 x=8 stride=8 pad=0,0,0,1", false},
		{"load.acc int32 sram=2047 dram=0x20000 y=2 x=1 stride=1", false},
		{"load.uop int32 sram=8191 dram=0x20000 y=1 x=2 stride=2", false},
		{"load.wgt int8 sram=1024 dram=0x20000 y=1 x=1 stride=1", false},
		{"load.param int32 sram=255 dram=0x20000 y=1 x=2 stride=2", false},
		{"gemm uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0", true},
		{"gemm uop=0:1 iter=2,1 dst=1,0 src=0,0 wgt=0,0", false},
		{"gemm uop=0:1 iter=1,2 dst=0,0 src=0,1 wgt=0,0", false},
		{"gemm uop=0:1 iter=1,2 dst=0,0 src=0,0 wgt=0,1", false},
		{"gemm reset uop=0:1 iter=1,2 dst=0,0 src=0,5 wgt=0,5", true}, // reset reads no inp/wgt
		{"gemm uop=8191:8193 iter=1,1 dst=0,0 src=0,0 wgt=0,0", false},
		{"alu.add uop=1:2 iter=1,1 dst=0,0 src=0,0", true},
		{"alu.add uop=1:2 iter=1,2 dst=0,1 src=0,0", false},
		{"alu.requant uop=1:2 iter=1,1 dst=0,0 src=0,0", true},
		{"alu.requant uop=1:2 iter=1,2 dst=0,0 src=0,1", false},
		{"alu.add uop=2:3 iter=1,1 dst=0,0 src=0,0", true},
		{"alu.requant uop=2:3 iter=1,1 dst=0,0 src=0,0", false}, // src 2047 is past param
		{"pool.max win=1,1 stride=1,1 dst=2047 src=0 ch=1 in=1,1", true},
		{"pool.max win=1,1 stride=1,1 dst=2047 src=0 ch=2 in=1,1", false},
		{"pool.max win=1,1 stride=1,1 dst=0 src=2040 ch=1 in=3,3", false},
		{"store.acc int8 sram=2047 dram=0x20000 y=2 x=1 stride=1", false},
	} {
		t.Run(c.text, func(t *testing.T) {
			prog := assemble(t, "load.uop int32 sram=0 dram=0x10000 y=1 x=3 stride=3\n"+c.text+"\nfinish job=1")
			if c.ok {
				if _, err := runBytes(t, l, prog); err != nil {
					t.Fatalf("in-range instruction failed: %v", err)
				}
				return
			}
			wantFault(t, l, prog, alidnn.CauseSRAM, 1)
		})
	}
}

func TestStream(t *testing.T) {
	l := newLocal(t)
	wantFault(t, l, assemble(t, "nop.compute"), alidnn.CauseStream, 0)
	wantFault(t, l, assemble(t, "finish job=1\nnop.store"), alidnn.CauseStream, 1)
	// INSN_COUNT 0 and too large: Exec refuses them, so go through the registers.
	for _, n := range []uint32{0, alidnn.MaxInsns + 1} {
		st := startRaw(t, l, 0, n)
		waitIdle(t, l)
		if st = rd(t, l, alidnn.RegStatus); st != alidnn.StatusError|uint32(alidnn.CauseStream)<<8 {
			t.Errorf("count %d: STATUS %#x", n, st)
		}
	}
}

func rd(t testing.TB, l *Local, off uint32) uint32 {
	t.Helper()
	v, err := l.RoleRead32(off)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func wr(t testing.TB, l *Local, off, v uint32) {
	t.Helper()
	if err := l.RoleWrite32(off, v); err != nil {
		t.Fatal(err)
	}
}

// startRaw starts a run through the registers and returns STATUS after.
func startRaw(t testing.TB, l *Local, addr uint64, count uint32) uint32 {
	t.Helper()
	wr(t, l, alidnn.RegInsnAddr, uint32(addr))
	wr(t, l, alidnn.RegInsnAddr+4, uint32(addr>>32))
	wr(t, l, alidnn.RegInsnCount, count)
	wr(t, l, alidnn.RegWindow, 0)
	wr(t, l, alidnn.RegControl, alidnn.Start)
	return rd(t, l, alidnn.RegStatus)
}

// waitIdle waits until STATUS.busy clears.
func waitIdle(t testing.TB, l *Local) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for rd(t, l, alidnn.RegStatus)&alidnn.StatusBusy != 0 {
		if err := l.WaitIRQ(ctx, shell.IRQRole0); err != nil {
			t.Fatalf("engine still busy: %v", err)
		}
	}
}

func TestMultipleFinish(t *testing.T) {
	l := newLocal(t)
	st := run(t, l, "finish job=1\nnop.store\nfinish job=2\nfinish job=3")
	if st.JobID != 3 || st.Insns != 4 {
		t.Fatalf("stats %+v", st)
	}
	// Every FINISH is reported, in order; "last" only when nothing of the
	// run completes after it. In the second program the store, released by
	// the NOP, ends after the final FINISH.
	type fin struct {
		job  uint32
		last bool
	}
	for _, c := range []struct {
		text string
		want []fin
	}{
		{"finish job=1\nfinish job=2\nnop.compute ; push_next\nstore.acc int8 sram=0 dram=0x1000 y=1 x=1 stride=1 ; pop_prev push_prev\nfinish job=3 ; pop_next",
			[]fin{{1, false}, {2, false}, {3, true}}},
		{"finish job=1\nfinish job=2\nstore.acc int8 sram=0 dram=0x1000 y=1 x=1 stride=1 ; pop_prev\nnop.compute ; push_next\nfinish job=3",
			[]fin{{1, false}, {2, false}, {3, false}}},
	} {
		e, d := testEngine(t, 1), newMemDDR()
		prog := assemble(t, c.text)
		copy(d.mem, prog)
		var got []fin
		if _, _, f := execute(e, d, 0, 0, uint32(len(prog)/16), func(j uint32, last bool) { got = append(got, fin{j, last}) }); f != nil {
			t.Fatal(f)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s:\nfinishes %v, want %v", c.text, got, c.want)
		}
		if st := run(t, l, c.text); st.JobID != 3 {
			t.Errorf("JOB_ID %d", st.JobID)
		}
	}
}

func TestCounters(t *testing.T) {
	l := newLocal(t)
	put(t, l, 0x10000, uops(gemmUop(t, 0, 0, 0), gemmUop(t, 1, 1, 1)))
	st := run(t, l, `
load.uop int32 sram=0 dram=0x10000 y=1 x=2 stride=2
gemm uop=0:2 iter=4,8 dst=0,0 src=0,0 wgt=0,0
finish job=5`)
	// fetch 64+⌈48/64⌉ = 65; load.uop 64+⌈8/64⌉ = 65; gemm 4·8·2 = 64; finish 1.
	want := alidnn.Stats{JobID: 5, Cycles: 65 + 65 + 64 + 1, Insns: 3, MACs: 64 * 256, LoadBytes: 48 + 8,
		BusyCompute: 65 + 64 + 1, ClockMHz: 250}
	if st != want {
		t.Fatalf("stats %+v\nwant  %+v", st, want)
	}
	if ns := st.DeviceNS(); ns != 195*4 {
		t.Errorf("DeviceNS %d", ns)
	}
	// A port without the block-read capability reads the same counters
	// one register at a time.
	ctx := context.Background()
	st, err := alidnn.Exec(ctx, regByReg{l}, alidnn.Run{Insns: progAddr, Count: 3})
	if err != nil || st != want {
		t.Fatalf("register by register: stats %+v, %v\nwant  %+v", st, err, want)
	}
	// fp32 takes FP32Rate times longer; the load queue overlaps compute.
	st = run(t, l, `
load.inp int8 sram=0 dram=0x20000 y=1 x=128 stride=128
gemm fp32 uop=0:2 iter=4,8 dst=0,0 src=0,0 wgt=0,0
store.acc int8 sram=0 dram=0x30000 y=1 x=64 stride=64
finish job=6`)
	if c := uint64(64 + 1); st.Cycles != c+max(64+2048/64, 64*4+1, 64+1024/64) || st.BusyLoad != 64+32 || st.BusyStore != 64+16 || st.BusyCompute != 256+1 {
		t.Fatalf("overlapped stats %+v", st)
	}
}

// regByReg hides Local's alidnn.BlockReader.
type regByReg struct{ l *Local }

func (p regByReg) RoleRead32(off uint32) (uint32, error) { return p.l.RoleRead32(off) }
func (p regByReg) RoleWrite32(off, v uint32) error       { return p.l.RoleWrite32(off, v) }
func (p regByReg) WaitIRQ(ctx context.Context, line int) error {
	return p.l.WaitIRQ(ctx, line)
}

// TestTokenTiming: a popped token delays its consumer to the producer's end.
func TestTokenTiming(t *testing.T) {
	l := newLocal(t)
	st := run(t, l, `
load.inp int8 sram=0 dram=0x20000 y=1 x=128 stride=128 ; push_next
gemm reset uop=0:1 iter=1,10 dst=0,1 src=0,0 wgt=0,0 ; pop_prev
finish job=1`)
	// fetch 65; load 64+2048/64 = 96; then gemm 10 and finish 1.
	if st.Cycles != 65+96+10+1 || st.BusyLoad != 96 || st.BusyCompute != 11 {
		t.Fatalf("stats %+v", st)
	}
}

// TestFinalInterrupt: the interrupt of a run's last FINISH comes with
// STATUS.done already set.
func TestFinalInterrupt(t *testing.T) {
	l := newLocal(t)
	for job := range uint32(50) {
		put(t, l, progAddr, assemble(t, fmt.Sprintf("finish job=%d", job)))
		startRaw(t, l, progAddr, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := l.WaitIRQ(ctx, shell.IRQRole0)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if st, id := rd(t, l, alidnn.RegStatus), rd(t, l, alidnn.RegJobID); st != alidnn.StatusDone || id != job {
			t.Fatalf("run %d: STATUS %#x JOB_ID %d at the interrupt", job, st, id)
		}
	}
}

// longRun starts a GEMM that takes minutes.
func longRun(t testing.TB, l *Local) {
	t.Helper()
	put(t, l, 0x10000, uops(gemmUop(t, 0, 0, 0)))
	put(t, l, progAddr, assemble(t, `
load.uop int32 sram=0 dram=0x10000 y=1 x=1 stride=1
gemm uop=0:1 iter=16383,16383 dst=0,0 src=0,0 wgt=0,0
finish job=1`))
	if st := startRaw(t, l, progAddr, 3); st != alidnn.StatusBusy {
		t.Fatalf("STATUS after START %#x", st)
	}
}

func TestBusyAndAbort(t *testing.T) {
	l := newLocal(t)
	longRun(t, l)
	wr(t, l, alidnn.RegControl, alidnn.Start)
	if st := rd(t, l, alidnn.RegStatus); st != alidnn.StatusBusy|alidnn.StatusError|uint32(alidnn.CauseBusy)<<8 {
		t.Fatalf("STATUS after START while busy %#x", st)
	}
	wr(t, l, alidnn.RegControl, alidnn.Abort)
	waitIdle(t, l)
	if st := rd(t, l, alidnn.RegStatus); st != alidnn.StatusError|uint32(alidnn.CauseAborted)<<8 {
		t.Fatalf("STATUS after ABORT %#x", st)
	}
	if pc := rd(t, l, alidnn.RegErrorPC); pc > 1 { // the load or the GEMM
		t.Errorf("ERROR_PC %d, want 0 or 1", pc)
	}
	// Exec aborts when its context ends; the engine is usable after.
	longRun(t, l)
	wr(t, l, alidnn.RegControl, alidnn.Abort)
	waitIdle(t, l)
	put(t, l, progAddr, assemble(t, "finish job=77"))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	put(t, l, progAddr, assemble(t, "load.uop int32 sram=0 dram=0x10000 y=1 x=1 stride=1\ngemm uop=0:1 iter=16383,16383 dst=0,0 src=0,0 wgt=0,0\nfinish job=1"))
	if _, err := alidnn.Exec(ctx, l, alidnn.Run{Insns: progAddr, Count: 3}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Exec past its deadline: %v", err)
	}
	waitIdle(t, l)
	if st := rd(t, l, alidnn.RegStatus); st>>8 != uint32(alidnn.CauseAborted) {
		t.Fatalf("STATUS after Exec's abort %#x", st)
	}
	if st := run(t, l, "finish job=77"); st.JobID != 77 {
		t.Fatalf("run after abort: %+v", st)
	}
	// Exec refuses to start while another run is in progress, rather than
	// reporting that run's end as its own.
	longRun(t, l)
	put(t, l, progAddr+0x1000, assemble(t, "finish job=78"))
	if _, err := alidnn.Exec(context.Background(), l, alidnn.Run{Insns: progAddr + 0x1000, Count: 1}); !errors.Is(err, alidnn.ErrBusy) {
		t.Fatalf("Exec while busy: %v, want ErrBusy", err)
	}
	wr(t, l, alidnn.RegControl, alidnn.Abort)
	waitIdle(t, l)
}

func TestCloseDuringRun(t *testing.T) {
	l, err := NewLocal(windowBytes)
	if err != nil {
		t.Fatal(err)
	}
	longRun(t, l)
	done := make(chan error)
	go func() { done <- l.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not stop the run")
	}
}
