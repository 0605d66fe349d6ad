package isa

import (
	"strings"
	"testing"
)

func TestTokenBound(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       [4]int
	}{
		{"single-buffered", `
load.inp int8 sram=0 dram=0x0 y=1 x=1 stride=1 ; push_next
gemm uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 ; pop_prev push_prev
load.inp int8 sram=0 dram=0x0 y=1 x=1 stride=1 ; pop_next push_next
gemm uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 ; pop_prev push_prev
nop.load ; pop_next
finish job=1`, [4]int{1, 1, 0, 0}},
		// Two buffers: the second load waits for nothing, so two loads may
		// be ahead of the array, and both releases outstanding.
		{"double-buffered", `
load.inp int8 sram=0 dram=0x0 y=1 x=1 stride=1 ; push_next
load.inp int8 sram=8 dram=0x0 y=1 x=1 stride=1 ; push_next
gemm uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 ; pop_prev push_prev
load.inp int8 sram=0 dram=0x0 y=1 x=1 stride=1 ; pop_next push_next
gemm uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 ; pop_prev push_prev
gemm uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 ; pop_prev push_prev
nop.load ; pop_next
nop.load ; pop_next
finish job=1`, [4]int{2, 2, 0, 0}},
		// Nothing holds the producer back: every push may be waiting.
		{"unthrottled", strings.Repeat("nop.store ; push_prev\n", 9) + strings.Repeat("nop.compute ; pop_next\n", 9) + "finish job=1", [4]int{0, 0, 0, 9}},
		{"store behind compute", `
gemm uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 ; push_next
store.acc int8 sram=0 dram=0x0 y=1 x=1 stride=1 ; pop_prev push_prev
gemm uop=0:1 iter=1,1 dst=0,0 src=0,0 wgt=0,0 ; pop_next push_next
store.acc int8 sram=0 dram=0x0 y=1 x=1 stride=1 ; pop_prev push_prev
finish job=1 ; pop_next`, [4]int{0, 0, 1, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Assemble(c.text)
			if err != nil {
				t.Fatal(err)
			}
			got, err := TokenBound(p)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("bound %v, want %v", got, c.want)
			}
		})
	}
	p, err := Assemble("nop.compute ; pop_prev\nfinish job=1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TokenBound(p); err == nil || !strings.Contains(err.Error(), "instruction 0") {
		t.Errorf("TokenBound of a program that deadlocks: %v, want an error naming instruction 0", err)
	}
}
