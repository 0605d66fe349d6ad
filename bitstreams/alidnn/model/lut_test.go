package model

import (
	"fmt"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// lutTables packs 256-entry int8 tables, one a lane, into the isa.LutRows
// param rows of ISA.md's layout: entry e of lane l is byte e mod 8 of lane
// l of row e/8.
func lutTables(table func(lane, e int) int8) []uint64 {
	rows := make([]uint64, isa.LutRows*lanes)
	for l := range lanes {
		for e := range 256 {
			rows[(e/8)*lanes+l] |= uint64(uint8(table(l, e))) << (8 * (e % 8))
		}
	}
	return rows
}

// TestLut looks up every int8 input in every lane, through tables that
// differ by lane and by entry, and values beyond int8 that saturate; the
// second table (at row 32) is the first
// negated, so a wrong row or byte order or a lane reading another's table
// shows.
func TestLut(t *testing.T) {
	f := func(l, e int) int8 { return int8(e*7 + l*13 - 100) }
	tabs := append(lutTables(f), lutTables(func(l, e int) int8 { return -f(l, e) - 1 })...)
	// 16 rows of inputs: row r lane l holds -128 + 16r + l (all 256 int8
	// values), then a row of saturating values.
	var in []int32
	for k := range 256 {
		in = append(in, int32(k-128))
	}
	in = append(in, -1<<31, -129, 128, 1<<31-1, 1000, -1000, 127, -128, 0, 1, -1, 5, 6, 7, 8, 9)
	rows := len(in) / lanes
	l := newLocal(t)
	put(t, l, 0x11000, u64s(tabs))
	for table := range 2 {
		put(t, l, 0x10000, uops(aluUop(t, 0, uint32(isa.LutRows*table))))
		put(t, l, 0x20000, i32s(in))
		run(t, l, fmt.Sprintf(`
load.uop int32 sram=0 dram=0x10000 y=1 x=1 stride=1
load.param int32 sram=0 dram=0x11000 y=1 x=64 stride=64
load.acc int32 sram=0 dram=0x20000 y=1 x=17 stride=17
alu.lut uop=0:1 iter=%d,1 dst=1,0 src=0,0 ; push_next
store.acc int32 sram=0 dram=0x30000 y=1 x=17 stride=17 ; pop_prev
finish job=1`, rows))
		got := asI32(get(t, l, 0x30000, len(in)*4))
		for k, v := range in {
			lane := k % lanes
			want := int32(f(lane, int(max(-128, min(127, v)))+128))
			if table == 1 {
				want = -want - 1
			}
			if got[k] != want {
				t.Errorf("table %d, lane %d, input %d: got %d, want %d", table, lane, v, got[k], want)
			}
		}
	}
}

// TestLutParamRange fails a lut whose table runs past the param SRAM.
func TestLutParamRange(t *testing.T) {
	l := newLocal(t)
	put(t, l, 0x10000, uops(aluUop(t, 0, uint32(alidnn.Default.ParamSize-isa.LutRows+1))))
	wantFault(t, l, assemble(t, `
load.uop int32 sram=0 dram=0x10000 y=1 x=1 stride=1
alu.lut uop=0:1 iter=1,1 dst=0,0 src=0,0
finish job=1`), alidnn.CauseSRAM, 1)
}
