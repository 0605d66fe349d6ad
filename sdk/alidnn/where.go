package alidnn

// Where with a computed operand, and Split of a computed tensor along its
// last axis, compiled as arithmetic the engine already runs.

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// whereNode compiles Where(cond, x, y) with a constant condition and one
// computed operand t, the other a constant k: GPT-2's causal mask,
// Where(mask, scores, finfo.min or −Inf). It is max(min(t, B), K), where B
// is +∞ where t is picked and −∞ elsewhere, and K is −∞ where t is picked
// and k elsewhere, the ALU having no select: exact for every t, infinities
// included, even where t is not picked (a masked −Inf or NaN, which t·0
// would turn into NaN), but a picked NaN, which the ALU's min drops (it
// gives +∞), as in whereTwo. A NaN k is t·S + K' instead (S 1 where t is
// picked, else 0; K' 0 where t is picked, else k), exact for finite t. Two
// computed operands go to whereTwo, a computed condition to whereComputed.
func (c *compiler) whereNode(n *onnx.Node) error {
	cond, err := c.need(n, 0)
	if err != nil {
		return err
	}
	x, y, err := c.needPair(&onnx.Node{Inputs: n.Inputs[1:]})
	if err != nil {
		return err
	}
	if !x.isConst && !y.isConst {
		return c.whereTwo(n, cond, x, y)
	}
	t, k, pickT, tName := x, y, true, n.Inputs[1]
	if t.isConst {
		t, k, pickT, tName = y, x, false, n.Inputs[2]
	}
	if t.typ != onnx.Float || k.typ != onnx.Float {
		return fmt.Errorf("Where of %v and %v: only FLOAT operands: %w", x.typ, y.typ, ErrUnsupported)
	}
	if !cond.isConst {
		if cond.typ != onnx.Bool {
			return fmt.Errorf("Where with the computed condition %v %s: only a BOOL (a view of a BOOL input, or a comparison of an integer input), held as 0 and 1: %w", cond.typ, cond, ErrUnsupported)
		}
		if shape, err := broadcastShape(cond.shape, t.shape); err != nil || !eqInts(shape, t.shape) {
			return fmt.Errorf("Where broadcasts the computed %s to the condition's %v: %w", t, cond.shape, ErrUnsupported)
		}
		return c.whereComputed(n, cond, k, pickT, tName)
	}
	shape, err := broadcastShape(cond.shape, t.shape)
	if err == nil {
		shape, err = broadcastShape(shape, k.shape)
	}
	if err != nil {
		return err
	}
	if !eqInts(shape, t.shape) {
		return fmt.Errorf("Where broadcasts the computed %s to %v: %w", t, shape, ErrUnsupported)
	}
	total := t.len()
	ci, ki := broadcastIndex(shape, cond.shape), broadcastIndex(shape, k.shape)
	cv, kv := cond.ints(), k.floats()
	// Where t is picked, (t op₀ kept[0]) op₁ kept[1] is t; elsewhere
	// (t op₀ dropped) op₁ k is k.
	inf := float32(math.Inf(1))
	ops, kept, dropped := [2]string{"Min", "Max"}, [2]float32{inf, -inf}, -inf
	if slices.ContainsFunc(kv, func(f float32) bool { return f != f }) {
		ops, kept, dropped = [2]string{"Mul", "Add"}, [2]float32{1, 0}, 0
	}
	bound, fill := make([]float32, total), make([]float32, total)
	for i := range total {
		if (cv[pick(i, ci)] != 0) == pickT {
			bound[i], fill[i] = kept[0], kept[1]
		} else {
			bound[i], fill[i] = dropped, kv[pick(i, ki)]
		}
	}
	out := n.Outputs[0]
	boundName, fillName, mid := out+"/where_bound", out+"/where_fill", out+"/where_kept"
	c.vals[boundName] = constFloat(boundName, shape, bound)
	c.vals[fillName] = constFloat(fillName, shape, fill)
	c.uses[mid] = 1
	if err := c.binary(&onnx.Node{OpType: ops[0], Name: n.Name, Inputs: []string{tName, boundName}, Outputs: []string{mid}}); err != nil {
		return err
	}
	return c.binary(&onnx.Node{OpType: ops[1], Name: n.Name, Inputs: []string{mid, fillName}, Outputs: []string{out}})
}

// whereComputed compiles Where(cond, t, k) (or (cond, k, t): pickT false)
// whose condition is a computed BOOL — a view of a BOOL graph input or a
// comparison's result, both 0 and 1 in fp32 (see embed.go, compare.go) — a padding mask [N,1,1,S] over scores [N,H,S,S] — and k
// a constant scalar. With p the 0/1 tensor that picks t and b = (2p − 1)·∞
// (±1 times ∞, never 0·∞), it is max(min(t, b), min(−b, k)) for a finite
// k, min(t, b) for k = −∞ and max(t, −b) for +∞: exact for every t, also
// where t is not picked (a NaN or infinity there, which t·0 would make
// NaN), but a picked NaN, which the ALU's min and max drop (see whereTwo).
// p, b and min(−b, k) are of the mask's shape; they broadcast over t as an
// attention mask does (see broadcast.go).
func (c *compiler) whereComputed(n *onnx.Node, cond, k *value, pickT bool, tName string) error {
	if k.len() != 1 {
		return fmt.Errorf("Where of a computed condition with the constant %s: only a scalar: %w", k, ErrUnsupported)
	}
	kv := k.floats()[0]
	if math.IsNaN(float64(kv)) {
		return fmt.Errorf("Where with a NaN operand: %w", ErrUnsupported)
	}
	out := n.Outputs[0]
	tmp := func(s string) string { return out + "/where_" + s }
	konst := func(name string, v float32) string {
		c.vals[tmp(name)] = constFloat(tmp(name), nil, []float32{v})
		return tmp(name)
	}
	ops := []*onnx.Node{{OpType: "Cast", Inputs: []string{n.Inputs[0]}, Outputs: []string{tmp("p")}, Attrs: []*onnx.Attribute{{Name: "to", Type: onnx.AttrInt, I: int64(onnx.Float)}}}}
	p := tmp("p")
	if !pickT {
		ops = append(ops, &onnx.Node{OpType: "Sub", Inputs: []string{konst("one", 1), p}, Outputs: []string{tmp("q")}})
		p = tmp("q")
	}
	inf := float32(math.Inf(1))
	node := func(op, a, b, out string) *onnx.Node {
		return &onnx.Node{OpType: op, Inputs: []string{a, b}, Outputs: []string{out}}
	}
	ops = append(ops, node("Mul", p, konst("two", 2), tmp("2p")), node("Add", tmp("2p"), konst("m1", -1), tmp("pm")))
	switch {
	case kv < 0 && math.IsInf(float64(kv), 0):
		ops = append(ops, node("Mul", tmp("pm"), konst("inf", inf), tmp("b")), node("Min", tName, tmp("b"), out))
	case math.IsInf(float64(kv), 0):
		ops = append(ops, node("Mul", tmp("pm"), konst("ninf", -inf), tmp("nb")), node("Max", tName, tmp("nb"), out))
	default:
		ops = append(ops,
			node("Mul", tmp("pm"), konst("inf", inf), tmp("b")),
			node("Mul", tmp("pm"), konst("ninf", -inf), tmp("nb")),
			node("Min", tmp("nb"), konst("k", kv), tmp("kb")),
			node("Min", tName, tmp("b"), tmp("tb")),
			node("Max", tmp("tb"), tmp("kb"), out))
	}
	return c.lowered(n, ops, tmp(""), c.run)
}

// lowered compiles ops, the nodes standing for n, one by one with step (a
// node's whole compilation, or only its run): each named after n, and the
// temporaries, named with prefix, counted as the ops read them — the
// graph's own values keep their count.
func (c *compiler) lowered(n *onnx.Node, ops []*onnx.Node, prefix string, step func(*onnx.Node) error) error {
	for _, m := range ops {
		m.Name = n.Name
		for _, in := range m.Inputs {
			if strings.HasPrefix(in, prefix) {
				c.uses[in]++
			}
		}
	}
	for _, m := range ops {
		if err := step(m); err != nil {
			return err
		}
	}
	return nil
}

// splitNode compiles Split of a computed tensor along its last axis (the
// lanes) as one MatMul per part by a constant 0/1 selection matrix: GPT-2's
// fused QKV projection split into query, key and value. Each output is a
// sum of one product by 1 and products by 0, exact for finite inputs.
func (c *compiler) splitNode(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	if x.isConst {
		return c.foldSplit(n, x)
	}
	r := len(x.shape)
	axis, err := n.Int("axis", 0)
	if err != nil {
		return err
	}
	if axis < 0 {
		axis += int64(r)
	}
	if r == 0 || axis < 0 || axis >= int64(r) || x.typ != onnx.Float {
		return fmt.Errorf("Split of the computed %v %s along axis %d: only of a FLOAT tensor: %w", x.typ, x, axis, ErrUnsupported)
	}
	if axis != int64(r-1) {
		return c.splitSelect(n, x, int(axis))
	}
	C := x.shape[r-1]
	sizes, err := c.splitSizes(n, C)
	if err != nil {
		return err
	}
	at := 0
	for k, m := range sizes {
		if k >= len(n.Outputs) || n.Outputs[k] == "" {
			at += m
			continue
		}
		if m == 0 {
			shape := slices.Clone(x.shape)
			shape[r-1] = 0
			c.set(n, k, emptyValue(x.typ, shape))
			continue
		}
		w := make([]float32, C*m)
		for j := range m {
			w[(at+j)*m+j] = 1
		}
		at += m
		wn := fmt.Sprintf("%s/split_%d", n.Outputs[k], k)
		c.vals[wn] = constFloat(wn, []int{C, m}, w)
		if err := c.matmulNode(&onnx.Node{OpType: "MatMul", Name: n.Name, Inputs: []string{x.name, wn}, Outputs: []string{n.Outputs[k]}}); err != nil {
			return err
		}
	}
	return nil
}

// splitSelect compiles Split of x along axis, not its last, as one pick
// of each part's indices (see select.go).
func (c *compiler) splitSelect(n *onnx.Node, x *value, axis int) error {
	sizes, err := c.splitSizes(n, x.shape[axis])
	if err != nil {
		return err
	}
	at := 0
	for k, m := range sizes {
		if k >= len(n.Outputs) || n.Outputs[k] == "" {
			at += m
			continue
		}
		if m == 0 {
			shape := slices.Clone(x.shape)
			shape[axis] = 0
			c.set(n, k, emptyValue(x.typ, shape))
			continue
		}
		idx := make([]int, m)
		for j := range idx {
			idx[j] = at + j
		}
		at += m
		shape := slices.Clone(x.shape)
		shape[axis] = m
		y, err := c.selectAxis(fmt.Sprintf("Split %q", n.Name), x, axis, idx, shape)
		if err != nil {
			return err
		}
		c.set(n, k, y)
	}
	return nil
}

// splitSizes is the size of each of Split's parts of C: the split input
// (opset 13) or attribute, or equal parts.
func (c *compiler) splitSizes(n *onnx.Node, C int) ([]int, error) {
	var sizes []int64
	if len(n.Inputs) > 1 && n.Inputs[1] != "" {
		s, err := c.needConst(n, 1, "Split's sizes")
		if err != nil {
			return nil, err
		}
		sizes = s.ints()
	} else if a := n.Attr("split"); a != nil {
		sizes = a.Ints
	} else {
		parts := len(n.Outputs)
		if p, err := n.Int("num_outputs", 0); err == nil && p > 0 {
			parts = int(p)
		}
		if parts < 1 {
			return nil, fmt.Errorf("Split into %d parts", parts)
		}
		each := (C + parts - 1) / parts
		for left := C; left > 0; left -= each {
			sizes = append(sizes, int64(min(each, left)))
		}
	}
	out, sum := make([]int, len(sizes)), int64(0)
	for k, s := range sizes {
		if s < 0 || s > math.MaxInt32 {
			return nil, fmt.Errorf("Split size %d", s)
		}
		out[k], sum = int(s), sum+s
	}
	if sum != int64(C) || len(out) < len(n.Outputs) {
		return nil, fmt.Errorf("Split sizes %v of an axis of %d into %d outputs", sizes, C, len(n.Outputs))
	}
	return out, nil
}

// gemmFlattened compiles a Gemm whose A is a computed [..., S, K] flattened
// to [M, K] (Conv1D's x.view(-1, x.size(-1)) before its addmm) as a MatMul
// of the unflattened tensor and an Add of the bias, viewed as [M, N]: the
// rows stay where the tensor's layout has them, and the Reshape back to
// [..., S, N] that follows is free. done is false for other Gemms.
func (c *compiler) gemmFlattened(n *onnx.Node) (done bool, err error) {
	a, err := c.need(n, 0)
	if err != nil {
		return false, err
	}
	r := a.root()
	if r == a || a.isConst || len(a.shape) != 2 || len(r.shape) < 3 || r.shape[len(r.shape)-1] != a.shape[1] || a.view != nil || a.cols != nil ||
		r.lay.shape != nil && !r.lay.equal(matLayout(r.shape)) {
		return false, nil
	}
	transA, transB, alpha, beta, err := gemmAttrs(n)
	if err != nil || transA != 0 {
		return false, err
	}
	bv, err := c.needConst(n, 1, "B")
	if err != nil || len(bv.shape) != 2 {
		return false, err
	}
	K, N := bv.shape[0], bv.shape[1]
	if transB != 0 {
		K, N = N, K
	}
	if K != a.shape[1] {
		return false, fmt.Errorf("Gemm of %v and %v: inner dimensions differ", a.shape, bv.shape)
	}
	bf, w := bv.floats(), make([]float32, K*N)
	for i := range K {
		for j := range N {
			if transB != 0 {
				w[i*N+j] = alpha * bf[j*K+i]
			} else {
				w[i*N+j] = alpha * bf[i*N+j]
			}
		}
	}
	cv, err := c.in(n, 2)
	if err != nil {
		return false, err
	}
	if cv != nil && (!cv.isConst || cv.len() != N && cv.len() != 1) {
		return false, nil
	}
	out := n.Outputs[0]
	an, wn, mm := out+"/gemm_a", out+"/gemm_b", out+"/gemm_mm"
	c.vals[an], c.vals[wn] = r, constFloat(wn, []int{K, N}, w)
	c.uses[mm] = 1
	if err := c.matmulNode(&onnx.Node{OpType: "MatMul", Name: n.Name, Inputs: []string{an, wn}, Outputs: []string{mm}}); err != nil {
		return true, err
	}
	y := c.vals[mm]
	if cv != nil {
		cn, yn := out+"/gemm_c", out+"/gemm_y"
		c.vals[cn] = constFloat(cn, []int{cv.len()}, mapF(cv.floats(), func(x float32) float32 { return beta * x }))
		c.uses[yn] = c.uses[out]
		if err := c.binary(&onnx.Node{OpType: "Add", Name: n.Name, Inputs: []string{mm, cn}, Outputs: []string{yn}}); err != nil {
			return true, err
		}
		y = c.vals[yn]
	}
	c.set(n, 0, &value{shape: []int{a.shape[0], N}, typ: y.typ, derived: derived{alias: y}})
	return true, nil
}

// gatherSelect compiles a Gather of a computed [..., S, C] by constant
// indices along its last two axes — BERT's pooler taking the first token,
// hidden[:, 0] — as a MatMul by a 0/1 selection matrix: E [n, S] · x
// picks rows, x · E [C, n] lanes, each output a sum of one product by 1
// and products by 0, exact for finite x. A scalar index drops the axis.
func (c *compiler) gatherSelect(n *onnx.Node, x, ids *value) error {
	r := len(x.shape)
	axis, err := n.Int("axis", 0)
	if err != nil {
		return err
	}
	if axis < 0 {
		axis += int64(r)
	}
	if r < 1 || axis < 0 || axis >= int64(r) || x.typ != onnx.Float || len(ids.shape) > 1 {
		return fmt.Errorf("Gather of the computed %v %s along axis %d by %v: only of a FLOAT tensor, by a scalar or a list: %w", x.typ, x, axis, ids.shape, ErrUnsupported)
	}
	d := x.shape[axis]
	idx := ids.ints()
	sel := make([]int, len(idx))
	for k, i := range idx {
		if i < int64(-d) || i >= int64(d) {
			return fmt.Errorf("Gather index %d out of [%d, %d]", i, -d, d-1)
		}
		if i < 0 {
			i += int64(d)
		}
		sel[k] = int(i)
	}
	m := len(sel)
	if r < 2 || axis < int64(r-2) {
		// A leading axis: whole elements picked (see select.go).
		shape := slices.Clone(x.shape)
		shape[axis] = m
		if len(ids.shape) == 0 {
			shape = slices.Delete(shape, int(axis), int(axis)+1)
		}
		y, err := c.selectAxis(fmt.Sprintf("Gather %q", n.Name), x, int(axis), sel, shape)
		if err != nil {
			return err
		}
		c.set(n, 0, y)
		return nil
	}
	out := n.Outputs[0]
	en, mm := out+"/select", out+"/selected"
	e := make([]float32, d*m)
	mn := &onnx.Node{OpType: "MatMul", Name: n.Name, Outputs: []string{mm}}
	shape := slices.Clone(x.shape)
	shape[axis] = m
	if axis == int64(r-1) {
		for k, i := range sel {
			e[i*m+k] = 1
		}
		c.vals[en] = constFloat(en, []int{d, m}, e)
		mn.Inputs = []string{n.Inputs[0], en}
	} else {
		for k, i := range sel {
			e[k*d+i] = 1
		}
		// A MatMul's A is read from device memory: the constant segment.
		ev := constFloat(en, []int{m, d}, e)
		ev.lay, ev.elem = matLayout(ev.shape), f32
		c.vals[en] = ev
		mn.Inputs = []string{en, n.Inputs[0]}
	}
	c.uses[mm] = 1
	if err := c.matmulNode(mn); err != nil {
		return err
	}
	y := c.vals[mm]
	if len(ids.shape) == 0 {
		shape = slices.Delete(shape, int(axis), int(axis)+1)
	}
	if eqInts(shape, y.shape) {
		c.set(n, 0, y)
		return nil
	}
	c.set(n, 0, &value{shape: shape, typ: y.typ, derived: derived{alias: y}})
	return nil
}
