package sessions

import (
	"math/rand/v2"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
)

// TestScrubPlanCovers checks that the scrub's LOADs overwrite exactly the
// dirty elements of each bank, read only the zero area, and encode.
func TestScrubPlanCovers(t *testing.T) {
	c := alidnn.Default
	const zero = 1 << 20
	sets := []sramSet{fullSRAM(&c)}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var d sramSet
		for b := range numBanks {
			if r.IntN(2) == 0 {
				n := bankSize(&c, b)
				lo := r.Uint64N(n)
				d[b] = extent{lo, lo + 1 + r.Uint64N(n-lo)}
			}
		}
		sets = append(sets, d)
	}
	for _, d := range sets {
		insns := scrubPlan(&d, zero, &c)
		if _, err := isa.EncodeProgram(insns); err != nil {
			t.Fatalf("%v: %v", d, err)
		}
		if len(insns)*isa.InsnBytes > scrubProgBytes {
			t.Fatalf("%v: %d instructions do not fit the agent area", d, len(insns))
		}
		var got [numBanks][]extent
		for _, in := range insns[:len(insns)-1] {
			esz := isa.ElemBytes(in.Mem, in.DType, false)
			if in.Op != isa.OpLoad || in.DRAM != zero || uint64(in.YSize)*uint64(in.XSize)*esz > scrubZeroBytes {
				t.Fatalf("%v: %+v", d, in)
			}
			n := (uint64(in.PadY0) + uint64(in.YSize) + uint64(in.PadY1)) * (uint64(in.PadX0) + uint64(in.XSize) + uint64(in.PadX1))
			b := bankOf(in.Mem, in.DType)
			got[b] = append(got[b], extent{uint64(in.SRAM), uint64(in.SRAM) + n})
		}
		for b := range numBanks {
			at := d[b].base
			for _, x := range got[b] {
				if x.base != at {
					t.Fatalf("%v: bank %d: LOADs %v", d, b, got[b])
				}
				at = x.end
			}
			if d[b].end > d[b].base && at != d[b].end {
				t.Fatalf("%v: bank %d: LOADs %v end at %d", d, b, got[b], at)
			}
		}
	}
	full := fullSRAM(&c)
	t.Logf("full scrub: %d instructions", len(scrubPlan(&full, zero, &c)))
}
