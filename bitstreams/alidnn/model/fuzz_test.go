package model

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// FuzzRun runs arbitrary instruction streams (up to 64 instructions, with
// and without a FINISH appended) on a fresh engine: the model must never
// panic, must end every run, and DDR outside the window must not change.
func FuzzRun(f *testing.F) {
	for _, text := range []string{
		"finish job=1",
		`load.uop int32 sram=0 dram=0x40000 y=1 x=8 stride=8
load.param int32 sram=0 dram=0x40100 y=1 x=1 stride=1
load.inp int8 sram=0 dram=0x41000 y=4 x=16 stride=16 pad=1,1,1,1 ; push_next
load.wgt int8 sram=0 dram=0x42000 y=1 x=9 stride=9 ; push_next
gemm reset uop=0:8 iter=4,16 dst=16,1 src=0,1 wgt=1,0 ; pop_prev
alu.requant uop=0:1 iter=1,16 dst=0,1 src=0,0 zp=-3 per_channel
store.acc int8 sram=0 dram=0x43000 y=4 x=16 stride=16 ; pop_prev push_prev
finish job=42`,
		`load.acc fp32 sram=0 dram=0x40000 y=3 x=4 stride=5 pad=1,0,1,0 padval=min
pool.max win=2,2 stride=1,1 dst=100 src=0 ch=1 in=4,5 fp32 ; push_next
alu.add uop=0:1 iter=2,2 dst=1,2 src=0,1
store.acc fp32 sram=100 dram=0x44000 y=2 x=3 stride=3 ; pop_prev
finish job=2`,
		`load.param fp32 sram=0 dram=0x40000 y=1 x=20 stride=20
load.inp fp32 sram=0 dram=0x41000 y=4 x=8 stride=8 pad=1,1,2,2 ; push_next
pool.dw win=3,3 stride=1,1 dst=0 src=0 ch=2 in=6,6 wgt=0 bias fp32 ; pop_prev
load.param int32 sram=0 dram=0x40000 y=1 x=9 stride=9
load.inp int8 sram=0 dram=0x41000 y=5 x=5 stride=5 ; push_next
pool.dwacc win=3,3 stride=2,2 dst=0 src=0 ch=1 in=5,5 wgt=0 in_clamp ; pop_prev
finish job=4`,
		`nop.load ; push_next
gemm fp32 uop=0:3 iter=2,2 dst=1,1 src=1,1 wgt=1,1 ; pop_prev push_prev
nop.load ; pop_next
finish job=3`,
	} {
		f.Add(assemble(f, text))
	}
	finish := assemble(f, "finish job=9")
	f.Fuzz(func(t *testing.T, prog []byte) {
		prog = prog[:min(len(prog), 64*isa.InsnBytes)/isa.InsnBytes*isa.InsnBytes]
		for _, p := range [][]byte{prog, append(prog, finish...)} {
			if len(p) == 0 {
				continue
			}
			var stop atomic.Bool
			e, err := newEngine(alidnn.Default, &stop)
			if err != nil {
				t.Fatal(err)
			}
			d := &memDDR{mem: make([]byte, 1<<19), lo: 1 << 17, hi: 3 << 17}
			for i := range d.mem {
				d.mem[i] = byte(i*7 + 1)
			}
			copy(d.mem[d.lo:], p)
			before := bytes.Clone(d.mem)
			tm := time.AfterFunc(10*time.Millisecond, func() { stop.Store(true) })
			execute(e, d, 0, d.lo, uint32(len(p)/isa.InsnBytes), func(uint32, bool) {})
			tm.Stop()
			if !bytes.Equal(d.mem[:d.lo], before[:d.lo]) || !bytes.Equal(d.mem[d.hi:], before[d.hi:]) {
				t.Fatal("DDR outside the window changed")
			}
		}
	})
}

// FuzzTokenBound checks isa.TokenBound against the model on arbitrary
// token traffic: a program TokenBound accepts never deadlocks on the
// model, and no FIFO ever holds more tokens than its bound (the model's
// schedule is one timing among those the bound covers).
func FuzzTokenBound(f *testing.F) {
	f.Add([]byte{0x11, 0x23, 0x35, 0x42})
	f.Add([]byte("load compute store"))
	f.Fuzz(func(t *testing.T, seed []byte) {
		// Each byte is a NOP: its queue, then which of its valid flags it
		// sets, so most streams are plausible token traffic.
		var prog []isa.Insn
		for _, b := range seed[:min(len(seed), 48)] {
			q := isa.Queue(b % 3)
			in := isa.Insn{Op: isa.OpNop, NopQueue: q}
			in.PopPrev, in.PopNext = b&8 != 0 && q != isa.QueueLoad, b&16 != 0 && q != isa.QueueStore
			in.PushPrev, in.PushNext = b&32 != 0 && q != isa.QueueLoad, b&64 != 0 && q != isa.QueueStore
			prog = append(prog, in)
		}
		prog = append(prog, isa.Insn{Op: isa.OpFinish, JobID: 1})
		bound, err := isa.TokenBound(prog)
		if err != nil {
			return
		}
		raw, err := isa.EncodeProgram(prog)
		if err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		e, err := newEngine(alidnn.Default, &stop)
		if err != nil {
			t.Fatal(err)
		}
		d := &memDDR{mem: make([]byte, 1<<16), lo: 0, hi: 1 << 16}
		copy(d.mem, raw)
		_, pc, fl := execute(e, d, 0, 0, uint32(len(prog)), func(uint32, bool) {})
		switch {
		case fl == nil:
		case fl.cause == alidnn.CauseDeadlock:
			t.Fatalf("TokenBound accepted a program that deadlocks at %d:\n%s", pc, isa.Disassemble(prog))
		case fl.cause == alidnn.CauseIllegal && max(bound[0], bound[1], bound[2], bound[3]) < isa.TokenDepth:
			t.Fatalf("bound %v, but a FIFO overflowed at %d: %v\n%s", bound, pc, fl, isa.Disassemble(prog))
		}
	})
}
