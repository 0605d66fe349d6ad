package isa_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/bitstreams/alidnn/model"
)

// TestDRAMSpanMatchesModel runs each LOAD and STORE on the functional model
// with the tenant window ending exactly at the end of the span DRAMSpan
// reports (the run must pass) and one byte short of it (the run must fail
// with a window fault): the span is exactly what the engine touches at its
// end. The start is the instruction's dram field by construction.
func TestDRAMSpanMatchesModel(t *testing.T) {
	const at = 0x10000 // data above the program, which sits at 0
	cases := []string{
		"load.uop int32 sram=0 dram=0x10000 y=2 x=3 stride=5",
		"load.inp int8 sram=0 dram=0x10000 y=3 x=2 stride=4 pad=1,1,1,1",
		"load.inp fp32 sram=0 dram=0x10000 y=2 x=2 stride=3",
		"load.wgt int8 sram=0 dram=0x10000 y=2 x=1 stride=2",
		"load.wgt fp32 sram=0 dram=0x10000 y=1 x=2 stride=2",
		"load.acc int32 sram=0 dram=0x10000 y=2 x=2 stride=3",
		"load.acc fp32 sram=0 dram=0x10000 y=1 x=3 stride=3",
		"load.param int32 sram=0 dram=0x10000 y=2 x=1 stride=2",
		"store.acc int8 sram=0 dram=0x10000 y=2 x=3 stride=4",
		"store.acc int32 sram=0 dram=0x10000 y=3 x=1 stride=2",
		"store.acc fp32 sram=0 dram=0x10000 y=1 x=2 stride=2",
	}
	for _, src := range cases {
		t.Run(src, func(t *testing.T) {
			p, err := isa.Assemble(src + "\nfinish job=1\n")
			if err != nil {
				t.Fatal(err)
			}
			addr, n, ok := p[0].DRAMSpan()
			if !ok || addr != at || n == 0 {
				t.Fatalf("DRAMSpan = %#x, %d, %v", addr, n, ok)
			}
			if err := runIn(t, p, addr+n); err != nil {
				t.Errorf("window ending at the span's end: %v", err)
			}
			var ee *alidnn.EngineError
			if err := runIn(t, p, addr+n-1); !errors.As(err, &ee) || ee.Cause != alidnn.CauseWindow || ee.PC != 0 {
				t.Errorf("window one byte short of the span: %v, want a window fault at instruction 0", err)
			}
		})
	}
}

// runIn runs p from address 0 on a fresh engine whose window is [0, limit).
func runIn(t *testing.T, p []isa.Insn, limit uint64) error {
	t.Helper()
	l, err := model.NewLocal(limit)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b, err := isa.EncodeProgram(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WriteAt(context.Background(), b, 0); err != nil {
		t.Fatal(err)
	}
	_, err = alidnn.Exec(context.Background(), l, alidnn.Run{Insns: 0, Count: len(p)})
	return err
}

func TestDRAMSpanOtherOpcodes(t *testing.T) {
	for _, i := range []isa.Insn{{Op: isa.OpFinish}, {Op: isa.OpNop}, {Op: isa.OpGEMM}, {Op: isa.OpLoad, Mem: 7, YSize: 1, XSize: 1}} {
		if _, _, ok := i.DRAMSpan(); ok {
			t.Errorf("%v: DRAMSpan ok", i.Op)
		}
	}
	// The widest tile cannot overflow.
	i := isa.Insn{Op: isa.OpLoad, Mem: isa.MemWgt, DType: isa.FP32, DRAM: 1<<35 - 1, YSize: 1<<16 - 1, XSize: 1<<16 - 1, XStride: 1<<16 - 1}
	if _, n, ok := i.DRAMSpan(); !ok || n != ((1<<16-2)*(1<<16-1)+(1<<16-1))*4*256 {
		t.Errorf("widest tile: %d, %v", n, ok)
	}
}
