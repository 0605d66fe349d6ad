package alidnn

// Conversions to int8 and uint8 by parameters known only at run time:
// DynamicQuantizeLinear's function body computes its scale and zero point
// from the tensor's minimum and maximum, and casts the zero point to
// UINT8.

import (
	"fmt"
	"strings"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// castToInt8 compiles Cast of a computed FLOAT x to INT8 or UINT8: x
// truncated toward zero, as C's conversion does, ⌊|x|⌋·(1 − 2·(x < 0)) on
// the ALU's floor and lt, then saturated to the type's range by the
// quantisation at scale 1. Inside the range that is Cast's value exactly;
// outside it ONNX leaves the result to the implementation (numpy wraps),
// and the engine saturates.
func (c *compiler) castToInt8(n *onnx.Node, x *value, to onnx.DataType) error {
	out := n.Outputs[0]
	p := out + "/cast_"
	k := func(name string, v float64) string { return c.constScalar(p+name, v) }
	X := n.Inputs[0]
	seq := []*onnx.Node{
		{OpType: "Abs", Inputs: []string{X}, Outputs: []string{p + "a"}},
		{OpType: "Floor", Inputs: []string{p + "a"}, Outputs: []string{p + "f"}},
		{OpType: "Less", Inputs: []string{X, k("zero", 0)}, Outputs: []string{p + "nb"}},
		{OpType: "Cast", Inputs: []string{p + "nb"}, Outputs: []string{p + "n"}, Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}}},
		{OpType: "Mul", Inputs: []string{p + "n", k("m2", -2)}, Outputs: []string{p + "n2"}},
		{OpType: "Add", Inputs: []string{p + "n2", k("one", 1)}, Outputs: []string{p + "s"}},
		{OpType: "Mul", Inputs: []string{p + "f", p + "s"}, Outputs: []string{p + "t"}},
	}
	if err := c.runSeq(n, seq, seqUses(seq, p, X)); err != nil {
		return err
	}
	return c.saturate(n, c.vals[p+"t"], to)
}

// saturate ends the layer computing the integer-valued FLOAT v with the
// quantisation at scale 1 and zero point 0 to typ (int8 or uint8), and
// sets it as n's output.
func (c *compiler) saturate(n *onnx.Node, v *value, typ onnx.DataType) error {
	l, err := c.open(v)
	if err != nil {
		return err
	}
	if !l.accFP {
		return fmt.Errorf("%s of %s: accumulator not fp32: %w", n.OpType, v, ErrUnsupported)
	}
	c.set(n, 0, c.quantizeStep(l, fill(max(l.out.lay.c(), 1), 1), devZP(0, typ), typ))
	return nil
}

// quantizeComputed compiles QuantizeLinear of x by a per-tensor scale or
// zero point computed at run time: sat(round(x / scale) + zp), ONNX's
// arithmetic: the ALU's div (exact), round half to even, the zero point
// (an INT8 or UINT8 tensor, read as FLOAT) added, the quantisation at
// scale 1 saturating.
func (c *compiler) quantizeComputed(n *onnx.Node, x, scale, zp *value) error {
	if scale.len() != 1 || zp != nil && zp.len() != 1 {
		return fmt.Errorf("QuantizeLinear of %s by the computed scale %s: per-tensor only: %w", x, scale, ErrUnsupported)
	}
	typ := onnx.Uint8
	if zp != nil {
		typ = zp.typ
	}
	if typ != onnx.Uint8 && typ != onnx.Int8 {
		return fmt.Errorf("QuantizeLinear to %v: %w", typ, ErrUnsupported)
	}
	out := n.Outputs[0]
	p := out + "/qc_"
	X := n.Inputs[0]
	// The scalars are reshaped to x's rank, all ones, and spread over its
	// C lanes by a MatMul with ones [1, C] (s·1, exact), which then
	// broadcast over x's rows as a row does.
	if len(x.shape) == 0 {
		return fmt.Errorf("QuantizeLinear of the scalar %s by a computed scale: %w", x, ErrUnsupported)
	}
	ones := make([]int64, len(x.shape))
	for k := range ones {
		ones[k] = 1
	}
	C := x.shape[len(x.shape)-1]
	c.vals[p+"rank"] = constInt(p+"rank", onnx.Int64, []int{len(ones)}, ones)
	c.vals[p+"ones"] = constFloat(p+"ones", []int{1, C}, fill(C, 1))
	var seq []*onnx.Node
	widen := func(name, o string) string {
		seq = append(seq,
			&onnx.Node{OpType: "Reshape", Inputs: []string{name, p + "rank"}, Outputs: []string{p + o + "1"}},
			&onnx.Node{OpType: "MatMul", Inputs: []string{p + o + "1", p + "ones"}, Outputs: []string{p + o}})
		return p + o
	}
	seq = append(seq,
		&onnx.Node{OpType: "Div", Inputs: []string{X, widen(n.Inputs[1], "s")}, Outputs: []string{p + "d"}},
		&onnx.Node{OpType: "Round", Inputs: []string{p + "d"}, Outputs: []string{p + "r"}})
	last := p + "r"
	if zp != nil {
		seq = append(seq,
			&onnx.Node{OpType: "Cast", Inputs: []string{n.Inputs[2]}, Outputs: []string{p + "zf"}, Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}}})
		seq = append(seq, &onnx.Node{OpType: "Add", Inputs: []string{p + "r", widen(p+"zf", "z")}, Outputs: []string{p + "q"}})
		last = p + "q"
	}
	ins := []string{X, n.Inputs[1]}
	if zp != nil {
		ins = append(ins, n.Inputs[2])
	}
	if err := c.runSeq(n, seq, seqUses(seq, p, ins...)); err != nil {
		return err
	}
	return c.saturate(n, c.vals[last], typ)
}

// seqUses counts the reads of seq's temporaries (named with prefix p) and
// of the values ins, for runSeq.
func seqUses(seq []*onnx.Node, p string, ins ...string) map[string]int {
	uses := map[string]int{}
	for _, s := range seq {
		for _, in := range s.Inputs {
			if strings.HasPrefix(in, p) {
				uses[in]++
				continue
			}
			for _, v := range ins {
				if in == v {
					uses[in]++
					break
				}
			}
		}
	}
	return uses
}
