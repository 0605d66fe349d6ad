package alidnn

import (
	"math"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// laneExtreme compiles ReduceMax (ReduceMin as −ReduceMax(−x)) of x over
// its last axis, kept, into every lane of the row: the maximum steps of
// laneMaxSeq over x clamped to ±MaxFloat32 (the permutation MatMul's
// products by 0 would make infinities NaN), then the infinities put back,
// exact for every value but NaN, which the ALU's min and max drop:
//
//	m₁ = max(m, (min(#+∞, 1) − ½)·∞)    +∞ if the row holds one
//	m₂ = min(m₁, (C − ½ − #−∞)·∞)        −∞ if the row holds only −∞
//
// the counts #±∞ lane sums (see laneReduce) of the flags
// clamp(x − MaxFloat32, 0, 1) and clamp(−MaxFloat32 − x, 0, 1), exactly 0
// and 1. The padding lanes, whose row constants are 0, stay finite.
func (c *compiler) laneExtreme(n *onnx.Node, x *value) error {
	C := x.shape[len(x.shape)-1]
	y, p := n.Outputs[0], n.Outputs[0]+"/extreme/"
	hiddenLayout(x)
	k := func(name string, v float64) string { return c.constScalar(p+name, v) }
	node := func(op, out string, ins ...string) *onnx.Node {
		return &onnx.Node{OpType: op, Inputs: ins, Outputs: []string{out}}
	}
	uses := map[string]int{}
	var seq []*onnx.Node
	in := n.Inputs[0]
	if n.OpType == "ReduceMin" {
		seq = append(seq, node("Neg", p+"neg", in))
		in = p + "neg"
	}
	uses[in] = 3
	lo, hi, zero, one, inf := k("lo", -math.MaxFloat32), k("hi", math.MaxFloat32), k("zero", 0), k("one", 1), k("inf", math.Inf(1))
	seq = append(seq, node("Max", p+"xl", in, lo), node("Min", p+"xc", p+"xl", hi))
	rots, m := c.laneMaxSeq(p, p+"xc", C, uses)
	seq = append(seq, rots...)
	out := y
	if n.OpType == "ReduceMin" {
		out = p + "max"
	}
	seq = append(seq,
		node("Sub", p+"pd", in, hi), node("Max", p+"pl", p+"pd", zero), node("Min", p+"pf", p+"pl", one),
		node("ReduceSum", p+"pc", p+"pf"), node("Min", p+"p1", p+"pc", one), node("Add", p+"ph", p+"p1", k("mhalf", -0.5)),
		node("Mul", p+"gp", p+"ph", inf), node("Max", p+"m1", m, p+"gp"),
		node("Sub", p+"nd", lo, in), node("Max", p+"nl", p+"nd", zero), node("Min", p+"nf", p+"nl", one),
		node("ReduceSum", p+"nc", p+"nf"), node("Sub", p+"nh", k("cmhalf", float64(C)-0.5), p+"nc"),
		node("Mul", p+"gn", p+"nh", inf), node("Min", out, p+"m1", p+"gn"))
	if n.OpType == "ReduceMin" {
		seq = append(seq, node("Neg", y, out))
		uses[out] = 1
	}
	for _, v := range []string{"xl", "xc", "pd", "pl", "pf", "pc", "p1", "ph", "gp", "m1", "nd", "nl", "nf", "nc", "nh", "gn"} {
		if _, ok := uses[p+v]; !ok {
			uses[p+v] = 1
		}
	}
	uses[m] = 1
	return c.runSeq(n, seq, uses)
}
