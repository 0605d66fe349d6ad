package alidnn

import "github.com/fpga-faas/faas/sdk/onnx"

// lift1D returns a copy of a 1-D convolution or pooling node whose window
// attributes describe the same window on images one pixel high, so the 2-D
// code compiles it: kernel_shape [k] becomes [1, k], strides and dilations
// [s] become [1, s], and pads [b, e] become [0, b, 0, e].
func lift1D(n *onnx.Node) *onnx.Node {
	m := *n
	m.Attrs = make([]*onnx.Attribute, len(n.Attrs))
	for k, a := range n.Attrs {
		b := *a
		if a.Type == onnx.AttrInts {
			switch {
			case (a.Name == "kernel_shape" || a.Name == "strides" || a.Name == "dilations") && len(a.Ints) == 1:
				b.Ints = []int64{1, a.Ints[0]}
			case a.Name == "pads" && len(a.Ints) == 2:
				b.Ints = []int64{0, a.Ints[0], 0, a.Ints[1]}
			}
		}
		m.Attrs[k] = &b
	}
	return &m
}
