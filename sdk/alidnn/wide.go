package alidnn

// 64-bit integers as two 32-bit words. The engine's lanes are 32 bits
// wide, so a UINT64 graph input is staged as two int32 device tensors, its
// low and high words (Program.Derived, filled by the runtime from the
// input's bits as it packs a run), and a 64-bit result is read back as two
// and joined by the host. In between, widearith.go computes on the words
// exactly — Add and Sub with their carry, Mul's low 64 bits, the
// comparisons — as ONNX does, modulo 2⁶⁴, and widediv.go Div. Only those operators read a
// 64-bit value; anything else is refused naming it. Their operands are two
// computed 64-bit values of one shape, or one and a constant of its type,
// broadcast to it.

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// wordsOp names the host's joining of a 64-bit output from its words in
// a program's bindings.
const wordsOp = "Words"

// InputWord is the rule of a derived tensor holding one 32-bit word of
// each element of a 64-bit integer input.
type InputWord struct {
	From string // the graph input
	High bool   // the high word, else the low one
}

// wideReaders are the operators that read a 64-bit integer.
var wideReaders = []string{"Add", "Sub", "Mul", "Div", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}

// wideInput makes the value of the UINT64 graph input name: no device
// storage of its own, its words two derived inputs.
func (c *compiler) wideInput(name string, shape []int) error {
	if c.opts.batch > 1 {
		return fmt.Errorf("input %q: element type UINT64 in a program compiled for batch %d: %w", name, c.opts.batch, ErrUnsupported)
	}
	for _, n := range c.consumers(name) {
		if !slices.Contains(wideReaders, n.OpType) {
			return fmt.Errorf("input %q: element type UINT64, read by %s %q: the engine computes 64-bit integers as two 32-bit words, by Add, Sub, Mul, Div and comparisons: %w",
				name, n.OpType, n.Name, ErrUnsupported)
		}
	}
	v := &value{name: name, shape: shape, typ: onnx.Uint64, device: device{input: true, hostOnly: true}}
	var w [2]*value
	for k, suffix := range []string{"/lo", "/hi"} {
		w[k] = &value{name: name + suffix, shape: shape, typ: onnx.Uint32,
			device: device{input: true, elem: i32, word: &InputWord{From: name, High: k == 1}}}
	}
	v.words = &w
	c.vals[name] = v
	c.inputs = append(c.inputs, v, w[0], w[1])
	return nil
}

// wideNode compiles n if it reads a 64-bit integer, reporting whether it
// did.
func (c *compiler) wideNode(n *onnx.Node) (bool, error) {
	wide := false
	for _, in := range n.Inputs {
		if v := c.vals[in]; v != nil && v.words != nil {
			wide = true
		}
	}
	if !wide {
		return false, nil
	}
	if !slices.Contains(wideReaders, n.OpType) || len(n.Inputs) != 2 {
		return true, fmt.Errorf("%s %q of a 64-bit integer: the engine computes 64-bit integers only by Add, Sub, Mul, Div and comparisons: %w", n.OpType, n.Name, ErrUnsupported)
	}
	a, b, err := c.needPair(n)
	if err != nil {
		return true, err
	}
	// Words have their layouts before a constant's words are laid out as
	// the computed operand's.
	for _, v := range []*value{a, b} {
		if v.words == nil {
			continue // a constant, or refused below
		}
		for _, w := range v.words {
			if err := c.materialize(w); err != nil {
				return true, err
			}
		}
	}
	x := a // a computed operand
	if x.words == nil {
		x = b
	}
	o := wideOps{divider{c: c, C: max(x.words[0].root().lay.c(), 1)}}
	if a.isConst {
		a, err = o.constWords(n, a, b)
	} else if b.isConst {
		b, err = o.constWords(n, b, a)
	}
	if err != nil {
		return true, err
	}
	switch {
	case a.words == nil || b.words == nil || a.typ != b.typ:
		return true, fmt.Errorf("%s of %v %s and %v %s: 64-bit integer operators read two 64-bit graph inputs, results or constants of one type: %w", n.OpType, a.typ, a, b.typ, b, ErrUnsupported)
	case !eqInts(a.shape, b.shape):
		return true, fmt.Errorf("%s of %v %s and %s: 64-bit integer operators broadcast only constants: %w", n.OpType, a.typ, a, b, ErrUnsupported)
	case a.typ == onnx.Int64 && n.OpType != "Add" && n.OpType != "Sub" && n.OpType != "Mul" && n.OpType != "Equal":
		return true, fmt.Errorf("%s of INT64 %s and %s: the words compute it as UINT64 only: %w", n.OpType, a, b, ErrUnsupported)
	}
	switch n.OpType {
	case "Add", "Sub", "Mul", "Div":
		y, err := o.arith(n.OpType, a, b)
		if err != nil {
			return true, err
		}
		c.set(n, 0, y)
		return true, nil
	}
	y, err := o.compare(n.OpType, a, b)
	if err != nil {
		return true, err
	}
	c.set(n, 0, y)
	return true, c.typeBool(n.Outputs[0])
}

// constWords is the 64-bit constant k, an operand of n beside the computed
// 64-bit x, as the words of a value of x's shape (k broadcast to it). The
// words are computed as 0·w + k from x's words w, so that they are device
// tensors as every word the operators read is. A UINT64 constant beyond
// 2⁶³ − 1 does not get here: reading it as a graph's constant fails first.
func (o wideOps) constWords(n *onnx.Node, k, x *value) (*value, error) {
	if k.typ != x.typ || k.i == nil {
		return k, nil // refused by the caller, naming both
	}
	if shape, err := broadcastShape(k.shape, x.shape); err != nil || !eqInts(shape, x.shape) {
		return nil, fmt.Errorf("%s of %v %s and the constant %s %v: 64-bit integer operators broadcast only constants, to the computed operand's shape: %w",
			n.OpType, x.typ, x, k, k.shape, ErrUnsupported)
	}
	idx := broadcastIndex(x.shape, k.shape)
	var w [2]*value
	for h, wx := range x.words {
		bits := make([]int64, len(idx))
		for e, i := range idx {
			bits[e] = int64(int32(uint32(uint64(k.i[i]) >> (32 * h))))
		}
		kw := constInt(fmt.Sprintf("%s/%d", k.name, h), onnx.Uint32, x.shape, bits)
		kw.lay, kw.elem = wx.root().lay, i32
		var err error
		if w[h], err = o.layer(wx, onnx.Uint32, false, o.intRow(sMulRow, 0), intT(sAddTensor, kw)); err != nil {
			return nil, err
		}
	}
	return wideValue(x.typ, w[0], w[1]), nil
}

// wideOutput readies the words of the 64-bit graph output v.
func (c *compiler) wideOutput(v *value) error {
	for _, w := range v.words {
		if err := c.settle(w, false); err != nil {
			return err
		}
		if err := c.materialize(w); err != nil {
			return err
		}
	}
	return nil
}

// packWord packs derived tensor b, one word of each element of the 64-bit
// input t.
func packWord(b Binding, t *onnx.Tensor) ([]byte, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: input %q missing", ErrInput, b.Word.From)
	}
	u, err := t.Uint64s()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	if len(u) != size(b.Shape) {
		return nil, fmt.Errorf("%w: input %q has %d elements, want %d", ErrInput, b.Word.From, len(u), size(b.Shape))
	}
	shift := 0
	if b.Word.High {
		shift = 32
	}
	iv := make([]int64, len(u))
	for k, x := range u {
		iv[k] = int64(int32(uint32(x >> shift)))
	}
	return packInt(b.Lay.internal(), i32, iv, nil), nil
}

// joinWords is the 64-bit output b of its words lo and hi, read back as
// UINT32.
func joinWords(b Binding, lo, hi *onnx.Tensor) (*onnx.Tensor, error) {
	l, err := lo.Int64s()
	if err != nil {
		return nil, err
	}
	h, err := hi.Int64s()
	if err != nil {
		return nil, err
	}
	if len(l) != size(b.Shape) || len(h) != len(l) {
		return nil, fmt.Errorf("output %q: words of %d and %d elements for shape %v", b.Name, len(l), len(h), b.Shape)
	}
	raw := make([]byte, 0, 8*len(l))
	for k := range l {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(uint32(l[k]))|uint64(uint32(h[k]))<<32)
	}
	return onnx.NewRaw(b.Name, b.Type, dims64(b.Shape), raw)
}

// checkWords validates an output joined from two words, read from a
// program file.
func checkWords(b *Binding) error {
	if b.Type != onnx.Uint64 && b.Type != onnx.Int64 || b.Src == nil || b.High == nil {
		return fmt.Errorf("%v output %q joined from words %v and %v", b.Type, b.Name, b.Src != nil, b.High != nil)
	}
	for _, w := range []*Binding{b.Src, b.High} {
		if w.Elem != "int32" || w.Type != onnx.Uint32 || w.Host != "" || w.IsConst || !eqInts(w.Shape, b.Shape) {
			return fmt.Errorf("output %q: a word %v %v of %s for shape %v", b.Name, w.Type, w.Shape, w.Elem, b.Shape)
		}
	}
	return nil
}

// checkWord validates a derived word of a 64-bit input, read from a
// program file.
func checkWord(b *Binding, p *Program) error {
	if b.IsConst || b.Host != "" || b.Bcast != nil || b.Elem != "int32" || b.Type != onnx.Uint32 {
		return fmt.Errorf("%q: want int32 words of a 64-bit input", b.Name)
	}
	if err := checkBinding(b, p, 0); err != nil {
		return err
	}
	for _, in := range p.Inputs {
		if in.Name == b.Word.From {
			if !in.HostOnly || in.Type != onnx.Uint64 || !eqInts(in.Shape, b.Shape) {
				return fmt.Errorf("%q: %q is no host-only UINT64 input of shape %v", b.Name, in.Name, b.Shape)
			}
			return nil
		}
	}
	return fmt.Errorf("%q: words of %q, which is no input", b.Name, b.Word.From)
}
