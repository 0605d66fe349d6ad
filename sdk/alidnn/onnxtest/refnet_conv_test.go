package onnxtest_test

import (
	"math"
	"testing"
)

// TestReferenceGroupedConv checks the reference's grouped convolution,
// which the depthwise layers use, against fused_test.go's plain 3×3
// convolution run on each group's channels alone, as ONNX defines groups.
func TestReferenceGroupedConv(t *testing.T) {
	const c, h, w = 4, 5, 6
	for _, group := range []int{1, 2, c} {
		l := &layer{kind: opConv, out: shape{c, h, w}, k: 3, stride: 1, pad: 1, group: group,
			w: from32(data([]int64{c, int64(c / group), 3, 3}, float64(group)))}
		x := data([]int64{c, h, w}, 9)
		got := l.conv(shape{c, h, w}, from32(x))
		cg := c / group
		for g := range group {
			xg := x[g*cg*h*w : (g+1)*cg*h*w]
			wg := to32(l.w[g*cg*cg*9 : (g+1)*cg*cg*9])
			want := conv3x3(xg, wg, make([]float32, cg), cg, h, w, cg)
			for k, v := range want {
				if d := math.Abs(got[g*cg*h*w+k] - float64(v)); d > 1e-4 {
					t.Fatalf("group %d: output %d of group %d is %g, want %g", group, k, g, got[g*cg*h*w+k], v)
				}
			}
		}
	}
}
