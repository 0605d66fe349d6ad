package alidnn

// Element-wise arithmetic fused into a layer's steps: Add, Sub, Mul and Div
// with tensors or constants, Sum, Concat, BatchNormalization and Cast.

import (
	"fmt"
	"math"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// binary compiles Add, Sub, Mul, Div, Max, Min and Sum of two operands into
// the steps of the layer computing one of them; one operand may be a
// constant. Sum, Max and Min of one input are aliases of it.
func (c *compiler) binary(n *onnx.Node) error {
	if len(n.Inputs) != 2 {
		if (n.OpType == "Sum" || n.OpType == "Max" || n.OpType == "Min") && len(n.Inputs) == 1 {
			x, err := c.need(n, 0)
			if err != nil {
				return err
			}
			c.set(n, 0, &value{shape: x.shape, typ: x.typ, derived: derived{alias: x.root()}})
			return nil
		}
		return fmt.Errorf("%s with %d inputs: %w", n.OpType, len(n.Inputs), ErrUnsupported)
	}
	a, err := c.need(n, 0)
	if err != nil {
		return err
	}
	b, err := c.need(n, 1)
	if err != nil {
		return err
	}
	shape, err := broadcastShape(a.shape, b.shape)
	if err != nil {
		return err
	}
	if n.OpType == "Div" && (int32Int(a) || int32Int(b) || intDivInput(a) && intDivInput(b)) {
		return c.intDiv(n, a, b) // see intdiv.go
	}
	if int32Int(a) || int32Int(b) {
		return c.int32Arith(n, a, b)
	}
	if err := int32Div(n, a, b); err != nil {
		return err
	}
	if fp32Int(a) || fp32Int(b) {
		if err := c.intArith(n, a, b); err != nil {
			return err
		}
	}
	op := n.OpType
	if op == "Sum" {
		op = "Add"
	}
	// Constant operand: one row per channel, or a full tensor.
	commutes := op == "Add" || op == "Mul" || op == "Max" || op == "Min"
	if a.isConst && !b.isConst && commutes {
		a, b = b, a
	}
	if op == "Div" && !b.isConst {
		if a.isConst {
			return c.divideInto(n, a, b)
		}
		return c.tensorOperands(n, op, a, b, shape)
	}
	if !commutes && !b.isConst {
		// a − b is −b + a, either broadcast as an Add's operands may be.
		if a.isConst {
			return c.subtractFrom(n, a, b)
		}
		if !eqInts(b.shape, shape) && eqInts(a.shape, shape) {
			return c.subtractBroadcast(n, a, b, shape)
		}
		nb, err := c.negate(b)
		if err != nil {
			return err
		}
		a, b, op = nb, a, "Add"
	}
	if b.isConst {
		return c.constantOperand(n, op, a, b, shape)
	}
	return c.tensorOperands(n, op, a, b, shape)
}

// constantOperand compiles a op b for a computed tensor a and a constant b:
// a step with one value per channel, or a full-size constant. Subtraction
// adds the negation and division multiplies by the reciprocal.
func (c *compiler) constantOperand(n *onnx.Node, op string, a, b *value, shape []int) error {
	if !eqInts(shape, a.shape) {
		return fmt.Errorf("%s broadcasts the tensor %v to %v: %w", op, a.shape, shape, ErrUnsupported)
	}
	vals := b.floats()
	switch op {
	case "Sub":
		vals = mapF(vals, func(x float32) float32 { return -x })
		op = "Add"
	case "Div":
		vals = mapF(vals, func(x float32) float32 { return 1 / x })
		op = "Mul"
	}
	if a.isConst {
		return fmt.Errorf("%s on constants was not folded: %w", op, ErrUnsupported)
	}
	l, err := c.open(a)
	if err != nil {
		return err
	}
	kind, tkind := rowKinds[op][0], rowKinds[op][1]
	if row, ok := perLane(l.out.lay, b.shape, vals); ok {
		if err := c.rowStep(l, kind, row); err != nil {
			return err
		}
	} else {
		if !l.accFP {
			return fmt.Errorf("%s with a full-size constant on an integer tensor: %w", op, ErrUnsupported)
		}
		t, err := expand(l.out.lay, constFloat(b.name, b.shape, vals))
		if err != nil {
			return err
		}
		l.steps = append(l.steps, step{kind: tkind, fp: true, t: t})
	}
	c.set(n, 0, c.rename(l, a.typ))
	return nil
}

// tensorOperands compiles a op b of two computed tensors: of the same
// shape, or b broadcast (a graph input on upload, see broadcastOperand
// otherwise); a commuting operator swaps them as suits. The operator joins
// a's layer, which reads b.
func (c *compiler) tensorOperands(n *onnx.Node, op string, a, b *value, shape []int) error {
	swapped, commutes := swapOp[op]
	if commutes && !eqInts(a.shape, shape) {
		a, b, op = b, a, swapped
	}
	if !eqInts(a.shape, shape) {
		return fmt.Errorf("%s broadcasts %s to %v (only its second operand may broadcast): %w", op, a, shape, ErrUnsupported)
	}
	var err error
	if a, err = c.floatOperand(a); err != nil {
		return err
	}
	if b, err = c.floatOperand(b); err != nil {
		return err
	}
	// The operator joins a's layer, which reads b as it runs: that must be
	// after b's layer (exporters write a residual block's shortcut after
	// its main path).
	if commutes && eqInts(b.shape, shape) && c.writtenAt(b) > c.writtenAt(a) {
		a, b, op = b, a, swapped
	}
	if spreadsLanes(a, b, shape) {
		C := shape[len(shape)-1]
		if C > lanes && c.spreadFits(a) {
			// One block of lanes, which the ALU reads for each of a's.
			if b, err = c.spreadLanes(n, b, lanes); err != nil {
				return err
			}
			return c.laneOperand(n, op, a, b)
		}
		if b, err = c.spreadLanes(n, b, C); err != nil {
			return err
		}
	}
	if !eqInts(b.shape, shape) && (!b.input || b.lay.shape != nil || b.packed != nil) {
		if !c.repeatsRows(a, b) {
			return c.broadcastOperand(n, op, a, b)
		}
		if b, err = c.repeatOperand(n, b, shape); err != nil {
			return err
		}
	}
	if !eqInts(b.shape, shape) {
		b.bcast = b.shape
		b.shape = shape
	}
	if b, err = c.relaid(b, a); err != nil {
		return err
	}
	l, err := c.openAfter(a, b)
	if err != nil {
		return err
	}
	if !l.accFP {
		return fmt.Errorf("%s of integer tensors: %w", op, ErrUnsupported)
	}
	b = b.root()
	if b.lay.shape == nil {
		b.lay = l.out.lay
	}
	if !b.lay.equal(l.out.lay) && !sameStorage(b.lay, l.out.lay) {
		return fmt.Errorf("%s: operands %s and %s are laid out differently on the device: %w", op, a, b, ErrUnsupported)
	}
	if b.el() != f32 {
		return fmt.Errorf("%s: operand %s is %v on the device, want fp32: %w", op, b, b.el(), ErrUnsupported)
	}
	l.steps = append(l.steps, step{kind: rowKinds[op][1], fp: true, t: b})
	c.set(n, 0, c.rename(l, a.typ))
	return nil
}

// negate returns −x, computed by a layer that only the caller reads.
func (c *compiler) negate(x *value) (*value, error) {
	x, err := c.floatOperand(x)
	if err != nil {
		return nil, err
	}
	l, err := c.open(x)
	if err != nil {
		return nil, err
	}
	if err := c.rowStep(l, sMulRow, fill(l.out.lay.c(), -1)); err != nil {
		return nil, err
	}
	v := c.rename(l, x.typ)
	v.uses = 1
	return v, nil
}

// subtractBroadcast compiles a − b, b broadcast to a's shape, as
// −(−a + b): b stays an Add operand that broadcasts as Add's do (a graph
// input the runtime packs broadcast, a row per image), which its negation,
// a tensor of b's shape, would not. Both negations are exact.
func (c *compiler) subtractBroadcast(n *onnx.Node, a, b *value, shape []int) error {
	na, err := c.negate(a)
	if err != nil {
		return err
	}
	if err := c.tensorOperands(n, "Add", na, b, shape); err != nil {
		return err
	}
	l, err := c.open(c.vals[n.Outputs[0]])
	if err != nil {
		return err
	}
	if err := c.rowStep(l, sMulRow, fill(l.out.lay.c(), -1)); err != nil {
		return err
	}
	c.set(n, 0, c.rename(l, a.typ))
	return nil
}

// subtractFrom compiles the constant k minus the tensor x as −x + k.
func (c *compiler) subtractFrom(n *onnx.Node, k, x *value) error {
	shape, err := broadcastShape(x.shape, k.shape)
	if err != nil {
		return err
	}
	if !eqInts(shape, x.shape) {
		return fmt.Errorf("Sub broadcasts the tensor %v to %v: %w", x.shape, shape, ErrUnsupported)
	}
	nx, err := c.negate(x)
	if err != nil {
		return err
	}
	l := nx.layer
	if row, ok := perLane(l.out.lay, k.shape, k.floats()); ok {
		if err := c.rowStep(l, sAddRow, row); err != nil {
			return err
		}
	} else {
		t, err := expand(l.out.lay, k)
		if err != nil {
			return err
		}
		l.steps = append(l.steps, step{kind: sAddTensor, fp: true, t: t})
	}
	c.set(n, 0, c.rename(l, x.typ))
	return nil
}

// rowKinds are the steps of a binary operator with a per-channel constant
// and with a tensor (a constant divisor multiplies by its reciprocal). Lt,
// Gt and Eq are the engine's comparisons (see cmpfloat.go); Gt has no row
// form.
var rowKinds = map[string][2]stepKind{
	"Add": {sAddRow, sAddTensor}, "Mul": {sMulRow, sMulTensor}, "Max": {sMaxRow, sMaxTensor}, "Min": {sMinRow, sMinTensor},
	"Div": {sMulRow, sDivTensor}, "Lt": {sLtRow, sLtTensor}, "Eq": {sEqRow, sEqTensor}, "Gt": {sLtRow, sGtTensor},
}

// swapOp is, for the operators whose operands may trade places, the
// operator of b op a that equals a op b.
var swapOp = map[string]string{"Add": "Add", "Mul": "Mul", "Max": "Max", "Min": "Min", "Eq": "Eq", "Lt": "Gt", "Gt": "Lt"}

// sum compiles Sum, Max and Min as a chain of binary operators (constant
// pairs folded), fused into one layer when the operands allow.
func (c *compiler) sum(n *onnx.Node) error {
	if len(n.Inputs) <= 2 {
		return c.binary(n)
	}
	acc := n.Inputs[0]
	for k := 1; k < len(n.Inputs); k++ {
		out := n.Outputs[0]
		if k < len(n.Inputs)-1 {
			out = fmt.Sprintf("%s/sum%d", n.Outputs[0], k)
			c.uses[out] = 1
		}
		op := n.OpType
		if op == "Sum" {
			op = "Add"
		}
		if err := c.node(&onnx.Node{Name: n.Name, OpType: op, Inputs: []string{acc, n.Inputs[k]}, Outputs: []string{out}}); err != nil {
			return err
		}
		acc = out
	}
	return nil
}

func mapF(v []float32, f func(float32) float32) []float32 {
	out := make([]float32, len(v))
	for k, x := range v {
		out[k] = f(x)
	}
	return out
}

// rowStep appends a per-channel constant add or multiply, in the
// accumulator's domain.
func (c *compiler) rowStep(l *layer, kind stepKind, row []float32) error {
	if !l.accFP && l.ptq && (kind == sMulRow || !fitsAcc(row, l.accScale)) {
		// A post-training-quantised layer's scales are per channel and
		// positive: it multiplies in fp32, and adds there what the int32
		// accumulator cannot hold (the bias of a channel whose weights
		// are all but zero, whose scale is as small).
		if err := c.settle(l.out, false); err != nil {
			return err
		}
		if d := &l.steps[len(l.steps)-1]; kind == sMulRow && d.kind == sDequantize && len(d.rowF) == len(row) {
			// The dequantisation just appended scales by the factors
			// too (attention's 1/√d): one pass over the tile fewer.
			d.rowF = mapIdx(d.rowF, func(k int, s float32) float32 { return s * row[k] })
			return nil
		}
	}
	if l.accFP {
		l.steps = append(l.steps, step{kind: kind, fp: true, rowF: row})
		return nil
	}
	if l.acc8 || l.accScale == nil || kind == sMulRow {
		return fmt.Errorf("%s by a float constant on an integer tensor: %w", map[stepKind]string{sAddRow: "add", sMulRow: "multiply", sMinRow: "min", sMaxRow: "max"}[kind], ErrUnsupported)
	}
	ints := make([]int64, len(row))
	for k, x := range row {
		ints[k] = int64(math.Round(float64(x) / float64(l.accScale[k])))
	}
	l.steps = append(l.steps, step{kind: kind, rowI: ints})
	return nil
}

// fitsAcc reports whether every value of row, in accumulator units of
// scale, fits well inside an int32 accumulator: below 2³⁰, leaving the
// sums it is added to room.
func fitsAcc(row, scale []float32) bool {
	for k, x := range row {
		if k >= len(scale) || math.Abs(float64(x)/float64(scale[k])) >= 1<<30 {
			return false
		}
	}
	return true
}

// floatOperand returns a post-training-quantised operand of a sum of
// tensors in fp32, where sums run: an unsettled layer dequantises its
// accumulator, an int8 tensor (already settled for another consumer) is
// dequantised by its layer or, when others use it too, by a move.
func (c *compiler) floatOperand(v *value) (*value, error) {
	if err := c.settle(v, false); err != nil {
		return nil, err
	}
	if !v.isFloat() || v.root().el() != i8 {
		return v, nil
	}
	l, err := c.open(v)
	if err != nil {
		return nil, err
	}
	l.steps = append(l.steps, step{kind: sDequantize, rowF: fill(l.out.lay.c(), v.q.scale), zp: v.q.zp})
	l.accFP, l.acc8 = true, false
	out := c.rename(l, v.typ)
	out.uses = 1 // the sum's alone
	return out, nil
}

// writtenAt is the position in c.layers of the last layer that writes v,
// −1 for values no layer writes (graph inputs). A tensor several layers
// write — an upsampling's phases (see phaseLayers) — has no layer of its
// own: its writers are the layers whose output it is.
func (c *compiler) writtenAt(v *value) int {
	r := v.root()
	if r.layer != nil {
		return slices.Index(c.layers, r.layer)
	}
	for k := len(c.layers) - 1; k >= 0; k-- {
		if c.layers[k].out == r {
			return k
		}
	}
	return -1
}

func mapIdx(v []float32, f func(int, float32) float32) []float32 {
	out := make([]float32, len(v))
	for k, x := range v {
		out[k] = f(k, x)
	}
	return out
}

func (c *compiler) cast(n *onnx.Node) error {
	x, err := c.need(n, 0)
	if err != nil {
		return err
	}
	to, err := n.Int("to", 0)
	if err != nil {
		return err
	}
	t := onnx.DataType(to)
	switch {
	case x.typ == onnx.Double && x.root().input && t != onnx.Float:
		// Not through the fp32 staging, if any: see hostcast.go.
		return c.hostCast(n, x, t)
	case t == x.typ:
		c.set(n, 0, &value{shape: x.shape, typ: x.typ, derived: derived{alias: x.root()}})
		return nil
	case hostInt(x) && x.typ == onnx.Bool && t == onnx.Int64:
		// 0 and 1 stay 0 and 1.
		c.set(n, 0, &value{shape: x.shape, typ: t, derived: derived{alias: x.root()}})
		return nil
	case (hostInt(x) || stagedFloat(x)) && t == onnx.Float:
		// A DOUBLE input was rounded to fp32 as it was staged: that is the
		// Cast (see boundary.go).
		// Packed as fp32 already (see embed.go): a layer that only moves
		// the values, so that the FLOAT result has storage of its own (an
		// alias would read as its integer root), and the mask arithmetic
		// after it joins that layer.
		maskLayout(x.root())
		l, err := c.open(x)
		if err != nil {
			return err
		}
		if !l.accFP {
			return fmt.Errorf("cast of %s: accumulator not fp32", x)
		}
		c.set(n, 0, c.rename(l, onnx.Float))
		return nil
	case (t == onnx.Uint8 || t == onnx.Int8) && x.typ == onnx.Float:
		return c.castToInt8(n, x, t)
	case t == onnx.Float && (x.typ == onnx.Int32 || x.typ == onnx.Int8 || x.typ == onnx.Uint8):
		l, err := c.open(x)
		if err != nil {
			return err
		}
		if l.accFP {
			return fmt.Errorf("cast of %s: accumulator already fp32", x)
		}
		zp := int32(0)
		if x.typ == onnx.Uint8 {
			zp = -128 // the device holds uint8 values shifted by −128
		}
		l.steps = append(l.steps, step{kind: sDequantize, rowF: fill(l.out.lay.c(), 1), zp: zp})
		l.accFP, l.acc8 = true, false
		c.set(n, 0, c.rename(l, onnx.Float))
		return nil
	case t != onnx.Float && (x.typ == onnx.Float || x.root().el() == f32 && (stagedFloat(x) || hostInt(x))):
		// A FLOAT x held as int8 is read dequantised (see graphOutput).
		return c.readBackCast(n, x, t)
	}
	return fmt.Errorf("Cast from %v to %v: %w", x.typ, t, ErrUnsupported)
}

func fill(n int, v float32) []float32 {
	out := make([]float32, n)
	for k := range out {
		out[k] = v
	}
	return out
}
