package alidnn

// Comparisons of an integer input with a constant, and Not of a computed
// BOOL, as fp32 arithmetic that gives exactly 0 and 1: a padding mask
// exporters compute from the token ids (input_ids != pad), or invert.
// Comparisons of FLOAT tensors are cmpfloat.go's, Equal of INT32 and
// UINT32 ones cmpint.go's, the others of UINT32 ones cmpuint32.go's.

import (
	"fmt"
	"math"
	"strings"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// compareNode compiles Equal, Less, LessOrEqual, Greater and
// GreaterOrEqual of an INT64 or BOOL input (or a view of one, its values
// integers held exactly in fp32, see embed.go) with a constant scalar k,
// and Not of a computed BOOL. For integer x:
//
//	x = k   1 − min(|x − k|, 1)      (k an integer; refused otherwise)
//	x < k   clamp(⌈k⌉ − x, 0, 1)     x ≤ k  clamp(⌊k⌋ + 1 − x, 0, 1)
//	x > k   clamp(x − ⌊k⌋, 0, 1)     x ≥ k  clamp(x − ⌈k⌉ + 1, 0, 1)
//	not b   1 − b
//
// each exact, as every intermediate is a small integer. The result is a
// computed BOOL: 0 and 1 in fp32, which Cast and Where read as such.
func (c *compiler) compareNode(n *onnx.Node) error {
	out := n.Outputs[0]
	tmp := func(s string) string { return out + "/cmp_" + s }
	konst := func(name string, v float32) string {
		c.vals[tmp(name)] = constFloat(tmp(name), nil, []float32{v})
		return tmp(name)
	}
	node := func(op string, out string, ins ...string) *onnx.Node {
		return &onnx.Node{OpType: op, Name: n.Name, Inputs: ins, Outputs: []string{out}}
	}
	var ops []*onnx.Node
	if n.OpType == "Not" {
		x, err := c.need(n, 0)
		if err != nil {
			return err
		}
		if x.typ != onnx.Bool || x.isConst {
			return fmt.Errorf("Not of %v %s: %w", x.typ, x, ErrUnsupported)
		}
		ops = append(ops, node("Sub", out, konst("one", 1), n.Inputs[0]))
	} else {
		a, b, err := c.needPair(n)
		if err != nil {
			return err
		}
		if a.typ == onnx.String {
			return c.equalStrings(n, a, b) // see intern.go
		}
		if n.OpType == "Equal" && (a.typ == onnx.Int32 || a.typ == onnx.Uint32) && a.typ == b.typ && !(a.isConst && b.isConst) {
			if err := c.equalInt32(n, a, b); err != nil {
				return err
			}
			return c.typeBool(out)
		}
		if n.OpType != "Equal" && a.typ == onnx.Uint32 && b.typ == onnx.Uint32 {
			return c.orderUint32(n, a, b) // see cmpuint32.go
		}
		if floatCompare(a, b) {
			if err := c.compareFloat(n, a, b); err != nil {
				return err
			}
			return c.typeBool(out)
		}
		op, xName, x, k := n.OpType, n.Inputs[0], a, b
		if a.isConst {
			// k op x is x op' k.
			op = map[string]string{"Equal": "Equal", "Less": "Greater", "LessOrEqual": "GreaterOrEqual", "Greater": "Less", "GreaterOrEqual": "LessOrEqual"}[op]
			xName, x, k = n.Inputs[1], b, a
		}
		if !hostInt(x) || !k.isConst || k.len() != 1 {
			return fmt.Errorf("%s of %v %s and %s: the engine compares FLOAT tensors (INT32 ones by Equal), and integers only as an INT64 or BOOL input with a constant scalar: %w", n.OpType, x.typ, x, k, ErrUnsupported)
		}
		maskLayout(x.root())
		kv := float64(k.floats()[0])
		if math.IsNaN(kv) || math.Abs(kv) > 1<<24 || op == "Equal" && kv != math.Trunc(kv) {
			return fmt.Errorf("%s with the constant %v: %w", n.OpType, kv, ErrUnsupported)
		}
		clip := func(from string) *onnx.Node { return node("Clip", out, from, konst("lo", 0), konst("hi", 1)) }
		switch op {
		case "Equal":
			ops = append(ops, node("Sub", tmp("d"), xName, konst("k", float32(kv))), node("Abs", tmp("a"), tmp("d")),
				node("Min", tmp("m"), tmp("a"), konst("one", 1)), node("Sub", out, konst("one", 1), tmp("m")))
		case "Less":
			ops = append(ops, node("Sub", tmp("d"), konst("k", float32(math.Ceil(kv))), xName), clip(tmp("d")))
		case "LessOrEqual":
			ops = append(ops, node("Sub", tmp("d"), konst("k", float32(math.Floor(kv)+1)), xName), clip(tmp("d")))
		case "Greater":
			ops = append(ops, node("Sub", tmp("d"), xName, konst("k", float32(math.Floor(kv)))), clip(tmp("d")))
		default: // GreaterOrEqual
			ops = append(ops, node("Sub", tmp("d"), xName, konst("k", float32(math.Ceil(kv)-1))), clip(tmp("d")))
		}
	}
	for _, m := range ops {
		for _, in := range m.Inputs {
			if strings.HasPrefix(in, tmp("")) {
				c.uses[in]++
			}
		}
	}
	for _, m := range ops {
		if err := c.run(m); err != nil {
			return err
		}
	}
	return c.typeBool(out)
}

// typeBool makes the computed out, 0 and 1 in fp32, a BOOL, which Cast,
// Where and the graph's outputs read as such.
func (c *compiler) typeBool(out string) error {
	y := c.vals[out]
	c.vals[out] = &value{name: out, shape: y.shape, typ: onnx.Bool, uses: c.uses[out], derived: derived{alias: y}}
	return nil
}
