package alidnn

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// Sums and means over the channels of a tensor laid out as an image
// [N,C,…], which its lanes hold. The engine moves values across lanes
// only in the GEMM array, so the reduction is a 1×1 convolution: by the
// C×C matrix of ones (or 1/C) when only element-wise operators meeting a
// tensor of C channels read it — every channel then holds the sum, as
// laneReduce holds a row's sum on every lane — and by a row of them, the
// one channel the graph declares, for any other reader. Maxima and minima
// would need rotations across channels and are refused.

// chanReduce reduces cur, [N,C,…] laid out as an image, over its axis 1
// as n's operator into out, held on all C channels when held is set.
func (c *compiler) chanReduce(n *onnx.Node, cur, out string, held bool) error {
	x := c.vals[cur]
	if n.OpType != "ReduceSum" && n.OpType != "ReduceMean" {
		return fmt.Errorf("%s over axis 1 of %s, which its layout holds on the lanes (as an image's channels): only sums and means of channels run on the engine (a 1×1 convolution): %w", n.OpType, x, ErrUnsupported)
	}
	if r := len(x.shape); r != 3 && r != 4 {
		return fmt.Errorf("%s over axis 1 of %s, which its layout holds on the lanes: only of rank-3 and rank-4 tensors (a 1×1 convolution): %w", n.OpType, x, ErrUnsupported)
	}
	C := x.shape[1]
	v := float32(1)
	if n.OpType == "ReduceMean" {
		v = 1 / float32(C)
	}
	O := 1
	if held {
		O = C
	}
	wshape := make([]int, len(x.shape))
	for k := range wshape {
		wshape[k] = 1
	}
	wshape[0], wshape[1] = O, C
	w := out + "/chan/w"
	c.vals[w] = constFloat(w, wshape, fill(O*C, v))
	keep := c.keepFP32
	c.keepFP32 = true // as laneReduce: the sum of small values stays fp32
	err := c.node(&onnx.Node{OpType: "Conv", Name: n.Name, Inputs: []string{cur, w}, Outputs: []string{out}})
	c.keepFP32 = keep
	if err != nil {
		return err
	}
	y := c.vals[out]
	if l := y.layer; held && l != nil && l.out == y && y.lay.lane == 1 {
		// Padding channels 1, as laneReduce's padding lanes, so a quotient
		// by the sum stays finite there.
		pad := make([]float32, y.lay.cb()*lanes)
		for k := C; k < len(pad); k++ {
			pad[k] = 1
		}
		l.steps = append(l.steps, step{kind: sAddRow, fp: true, rowF: pad})
	} else if held {
		return fmt.Errorf("%s %q of %s: the 1×1 convolution does not hold the channels on the lanes: %w", n.OpType, n.Name, x, ErrUnsupported)
	}
	return nil
}

// chanHeld reports whether the reduction n of x over its channels, kept,
// may leave its result held on all C channels: only element-wise
// operators read it whose results meet a tensor of C channels at that
// axis, counted from the end (see broadcastsSafelyAt).
func (c *compiler) chanHeld(n *onnx.Node, x *value, keep bool) bool {
	r := len(x.shape)
	return keep && c.broadcastsSafelyAt(n.Outputs[0], r-1, x.shape[1])
}

// reduceChanStep finishes reduceAxes when the channels of an image are
// among the reduced axes: cur, the folded tensor of shape, is reduced over
// axis 1 into n's output (held, see chanHeld) or into the tensor the graph
// declares before the final Reshape. It returns the name and shape of
// what is left to alias, or "" when n's output is written.
func (c *compiler) reduceChanStep(n *onnx.Node, x *value, cur string, shape []int, keep bool) (string, []int, error) {
	if c.chanHeld(n, x, keep) {
		return "", nil, c.chanReduce(n, cur, n.Outputs[0], true)
	}
	out := n.Outputs[0] + "/reduce/chan"
	c.uses[out] = 1
	if err := c.chanReduce(n, cur, out, false); err != nil {
		return "", nil, err
	}
	shape = slices.Clone(shape)
	shape[1] = 1
	return out, shape, nil
}
