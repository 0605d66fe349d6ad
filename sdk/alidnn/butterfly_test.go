package alidnn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
)

// TestButterfly applies the row maximum's steps as the engine does — each
// lane the maximum of itself and the MatMul by the step's matrix — to
// rows of every width up to 300 and checks that every lane ends holding
// the row's maximum, and that each matrix column has exactly one 1 (the
// product is then exact).
func TestButterfly(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for C := 1; C <= 300; C++ {
		x := make([]float64, C)
		want := -1.0
		for k := range x {
			x[k] = r.Float64()
			want = max(want, x[k])
		}
		for s := 1; s < C; s *= 2 {
			w := alidnn.Butterfly(C, s)
			y := make([]float64, C)
			for j := range C {
				ones := 0
				for i := range C {
					if w[i*C+j] != 0 {
						if w[i*C+j] != 1 {
							t.Fatalf("C %d step %d: w[%d][%d] = %v", C, s, i, j, w[i*C+j])
						}
						ones++
						y[j] = x[i]
					}
				}
				if ones != 1 {
					t.Fatalf("C %d step %d: column %d has %d ones", C, s, j, ones)
				}
			}
			for j := range x {
				x[j] = max(x[j], y[j])
			}
		}
		for j, v := range x {
			if v != want {
				t.Fatalf("C %d: lane %d holds %v, the row's maximum is %v", C, j, v, want)
			}
		}
	}
}
