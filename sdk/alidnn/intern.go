package alidnn

// STRING graph inputs, interned at the boundary. The engine computes on
// numbers, and of ONNX's operators on strings it runs Equal only, which
// compares them bytewise:
//
//   - a STRING graph input read only by Equal (of two STRING graph inputs,
//     or of one and a STRING constant) is staged as exact fp32 ids: as the
//     host packs a run it gives every distinct string one integer id, in
//     one dictionary shared by all the program's STRING inputs, so that
//     Equal of two ids is Equal of their strings. It compiles as Equal of
//     two FLOAT tensors (cmpfloat.go), broadcast as that is;
//   - the dictionary starts from the STRING constants Equal reads, whose
//     ids the compiler fixes and the program records (Program.Strings,
//     string k having id k): a constant operand is the FLOAT constant of
//     its ids. Equal of two STRING constants folds;
//   - ids stay below 2²⁴, where fp32 holds every integer: a run with more
//     distinct strings fails with ErrInput;
//   - anything else reading a STRING value (another operator, a graph
//     output) is refused: ids are not strings. Shape and Size, which read
//     only its shape, fold as for any input.
//
// Runs a session coalesces into one job (WithBatch) each have their lane
// and their dictionary; a program compiled ForBatch interns the samples of
// its run together, one dictionary a run as ever.

import (
	"bytes"
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// maxStrings bounds the ids of a dictionary: fp32 holds every integer
// below it exactly.
const maxStrings = 1 << 24

// dict gives strings ids, 0 on, in the order it first sees them.
type dict struct {
	ids map[string]float32
	max int // ids stay below max (maxStrings but in tests)
}

// newDict is a run's dictionary, strings of seed having their indices as
// ids.
func newDict(seed [][]byte) *dict {
	d := &dict{ids: make(map[string]float32, len(seed)), max: maxStrings}
	for k, s := range seed {
		d.ids[string(s)] = float32(k)
	}
	return d
}

// id is s's id, the next one if s has none yet; false if the dictionary
// is full.
func (d *dict) id(s []byte) (float32, bool) {
	if id, ok := d.ids[string(s)]; ok {
		return id, true
	}
	if len(d.ids) >= d.max {
		return 0, false
	}
	id := float32(len(d.ids))
	d.ids[string(s)] = id
	return id, true
}

// stage returns the ids of the STRING tensor t's strings, the values the
// runtime packs for it.
func (d *dict) stage(t *onnx.Tensor) ([]float32, error) {
	ss, err := t.Strings()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	f := make([]float32, len(ss))
	for k, s := range ss {
		id, ok := d.id(s)
		if !ok {
			return nil, fmt.Errorf("%w: input %q: more than %d distinct strings in a run, the ids fp32 holds exactly", ErrInput, t.Name, d.max)
		}
		f[k] = id
	}
	return f, nil
}

// strings lists the dictionary's strings by id.
func (d *dict) strings() [][]byte {
	ss := make([][]byte, len(d.ids))
	for s, id := range d.ids {
		ss[int(id)] = []byte(s)
	}
	return ss
}

// checkStrings checks that n reads STRING values only as Equal of two of
// them, or only their shapes.
func (c *compiler) checkStrings(n *onnx.Node) error {
	var types []onnx.DataType
	for _, in := range n.Inputs {
		v := c.vals[in]
		if v == nil {
			continue
		}
		types = append(types, v.typ)
		if v.typ == onnx.String && n.OpType != "Equal" && !shapeOnly[n.OpType] {
			return fmt.Errorf("STRING %s read by %s: the engine reads strings only as Equal's operands, staged as ids (see intern.go): %w", v, n.OpType, ErrUnsupported)
		}
	}
	if n.OpType == "Equal" && len(types) == 2 && (types[0] == onnx.String) != (types[1] == onnx.String) {
		return fmt.Errorf("Equal of %v and %v: %w", types[0], types[1], ErrUnsupported)
	}
	return nil
}

// equalStrings compiles Equal of STRING a and b, one at least a graph input
// staged as ids, as Equal of their ids.
func (c *compiler) equalStrings(n *onnx.Node, a, b *value) error {
	a, err := c.idsOf(a)
	if err != nil {
		return err
	}
	if b, err = c.idsOf(b); err != nil {
		return err
	}
	if err := c.compareFloat(n, a, b); err != nil {
		return err
	}
	return c.typeBool(n.Outputs[0])
}

// idsOf is v, the STRING constant as the FLOAT constant of its strings'
// ids in the program's dictionary; a STRING graph input is staged as ids
// already.
func (c *compiler) idsOf(v *value) (*value, error) {
	if !v.isConst {
		return v, nil
	}
	if c.strs == nil {
		c.strs = newDict(nil)
	}
	f := make([]float32, len(v.s))
	for k, s := range v.s {
		var ok bool
		if f[k], ok = c.strs.id(s); !ok {
			return nil, fmt.Errorf("STRING constants of more than %d distinct strings, the ids fp32 holds exactly: %w", c.strs.max, ErrUnsupported)
		}
	}
	return constFloat(v.name, v.shape, f), nil
}

// foldEqualStrings is Equal of the STRING constants a and b, broadcast.
func foldEqualStrings(a, b *value) (*value, error) {
	shape, err := foldedShape(a.shape, b.shape)
	if err != nil {
		return nil, err
	}
	ia, ib := broadcastIndex(shape, a.shape), broadcastIndex(shape, b.shape)
	r := make([]int64, len(ia))
	for k := range r {
		r[k] = boolInt(bytes.Equal(a.s[ia[k]], b.s[ib[k]]))
	}
	return constInt("", onnx.Bool, shape, r), nil
}

// checkFileStrings validates the strings of a program read from a file:
// STRING inputs staged as fp32 ids, no STRING output, and a dictionary of
// distinct strings within the ids' bound.
func checkFileStrings(p *Program) error {
	for _, b := range p.Inputs {
		if b.Type == onnx.String && (b.Elem != "fp32" || b.IsConst || b.HostOnly) {
			return fmt.Errorf("STRING input %q not staged as fp32 ids", b.Name)
		}
	}
	for _, b := range p.Outputs {
		if b.Type == onnx.String {
			return fmt.Errorf("STRING output %q", b.Name)
		}
	}
	if len(p.Strings) > maxStrings {
		return fmt.Errorf("%d strings, more than the %d ids fp32 holds exactly", len(p.Strings), maxStrings)
	}
	if d := newDict(p.Strings); len(d.ids) != len(p.Strings) {
		return fmt.Errorf("%d strings, %d of them distinct", len(p.Strings), len(d.ids))
	}
	return nil
}
