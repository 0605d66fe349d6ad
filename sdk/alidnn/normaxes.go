package alidnn

import (
	"github.com/fpga-faas/faas/sdk/onnx"
)

// normOverAxes compiles LayerNormalization or RMSNormalization n of x over
// the axes from a on, before the last, on x as it is stored rather than
// on a flattened view (see normFromAxis), which the lanes of an input laid
// out as an image do not hold: the sequences of their function bodies,
// each mean a reduction over those axes, kept (see reduceAxes) — folded
// rows and outer axes, the lanes' or channels' sums held broadcast where
// the sequence reads them. LayerNormalization's Mean and InvStdDev, which
// the graph reads as they are declared, are reductions of their own.
func (c *compiler) normOverAxes(n *onnx.Node, x *value, a int) error {
	if _, err := c.needConst(n, 1, "Scale"); err != nil {
		return err
	}
	eps, err := n.Float("epsilon", 1e-5)
	if err != nil {
		return err
	}
	hiddenLayout(x)
	r := len(x.shape)
	axes := make([]int64, 0, r-a)
	for k := a; k < r; k++ {
		axes = append(axes, int64(k))
	}
	mean := func(in, out string) *onnx.Node {
		return &onnx.Node{OpType: "ReduceMean", Inputs: []string{in}, Outputs: []string{out}, Attrs: []*onnx.Attribute{
			{Name: "axes", Type: onnx.AttrInts, Ints: axes}, {Name: "keepdims", Type: onnx.AttrInt, I: 1}}}
	}
	xn, y, p := n.Inputs[0], n.Outputs[0], n.Outputs[0]+"/axes/"
	two, ep := c.constScalar(p+"two", 2), c.constScalar(p+"eps", float64(eps))
	if n.OpType == "RMSNormalization" {
		seq := []*onnx.Node{
			{OpType: "Pow", Inputs: []string{xn, two}, Outputs: []string{p + "x2"}},
			mean(p+"x2", p+"ms"),
			{OpType: "Add", Inputs: []string{p + "ms", ep}, Outputs: []string{p + "mse"}},
			{OpType: "Sqrt", Inputs: []string{p + "mse"}, Outputs: []string{p + "rms"}},
			{OpType: "Div", Inputs: []string{xn, p + "rms"}, Outputs: []string{p + "norm"}},
			{OpType: "Mul", Inputs: []string{p + "norm", n.Inputs[1]}, Outputs: []string{y}},
		}
		return c.runSeq(n, seq, map[string]int{xn: 2, p + "x2": 1, p + "ms": 1, p + "mse": 1, p + "rms": 1, p + "norm": 1})
	}
	seq := []*onnx.Node{
		mean(xn, p+"mean"),
		{OpType: "Sub", Inputs: []string{xn, p + "mean"}, Outputs: []string{p + "d"}},
		{OpType: "Pow", Inputs: []string{p + "d", two}, Outputs: []string{p + "d2"}},
		mean(p+"d2", p+"var"),
		{OpType: "Add", Inputs: []string{p + "var", ep}, Outputs: []string{p + "vare"}},
		{OpType: "Sqrt", Inputs: []string{p + "vare"}, Outputs: []string{p + "std"}},
		{OpType: "Div", Inputs: []string{p + "d", p + "std"}, Outputs: []string{p + "norm"}},
		{OpType: "Mul", Inputs: []string{p + "norm", n.Inputs[1]}, Outputs: []string{p + "scaled"}},
	}
	uses := map[string]int{xn: 2, p + "mean": 1, p + "d": 2, p + "d2": 1, p + "var": 1, p + "vare": 1, p + "std": 1, p + "norm": 1, p + "scaled": 1}
	if len(n.Inputs) > 2 && n.Inputs[2] != "" {
		seq = append(seq, &onnx.Node{OpType: "Add", Inputs: []string{p + "scaled", n.Inputs[2]}, Outputs: []string{y}})
	} else {
		seq[len(seq)-1].Outputs[0] = y
	}
	if len(n.Outputs) > 1 && n.Outputs[1] != "" {
		seq = append(seq, mean(xn, n.Outputs[1]))
		uses[xn]++
	}
	if len(n.Outputs) > 2 && n.Outputs[2] != "" {
		// 1/√(var + ε) from a variance reduced to the shape the graph
		// declares, not held on the lanes as the sequence's is.
		c.reduced[p+"var2"] = true
		seq = append(seq, mean(p+"d2", p+"var2"),
			&onnx.Node{OpType: "Add", Inputs: []string{p + "var2", ep}, Outputs: []string{p + "vare2"}},
			&onnx.Node{OpType: "Sqrt", Inputs: []string{p + "vare2"}, Outputs: []string{p + "std2"}},
			&onnx.Node{OpType: "Div", Inputs: []string{c.constScalar(p+"one", 1), p + "std2"}, Outputs: []string{n.Outputs[2]}})
		uses[p+"d2"]++
		uses[p+"var2"], uses[p+"vare2"], uses[p+"std2"] = 1, 1, 1
	}
	return c.runSeq(n, seq, uses)
}
