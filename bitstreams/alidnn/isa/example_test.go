package isa_test

import (
	"fmt"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

func Example() {
	prog, err := isa.Assemble(`
load.inp int8 sram=0 dram=0x1000 y=4 x=16 stride=16 pad=1,1,1,1 ; push_next
gemm reset uop=0:8 iter=4,16 dst=16,1 src=0,1 wgt=1,0 ; pop_prev
finish job=42   # done
`)
	if err != nil {
		panic(err)
	}
	bin, err := isa.EncodeProgram(prog)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d instructions, %d bytes, first in queue %s\n", len(prog), len(bin), prog[0].Queue())
	back, _ := isa.DecodeProgram(bin)
	fmt.Print(isa.Disassemble(back))
	// Output:
	// 3 instructions, 48 bytes, first in queue load
	// load.inp int8 sram=0 dram=0x1000 y=4 x=16 stride=16 pad=1,1,1,1 ; push_next
	// gemm reset uop=0:8 iter=4,16 dst=16,1 src=0,1 wgt=1,0 ; pop_prev
	// finish job=42
}
