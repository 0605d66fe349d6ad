package alidnn

// Integer graph inputs and the embedding Gather.
//
// A transformer's token ids, token type ids and attention mask are INT64
// (or BOOL) graph inputs. The engine computes in int8, int32 and fp32 and
// its LOADs read addresses fixed in the instruction stream: it has no
// indirect load that could fetch a table row chosen by run-time data. So
// the rule is:
//
//   - An INT64 or BOOL graph input is packed by the runtime as fp32 (exact
//     for |x| ≤ 2²⁴; a larger value fails the run), so that a Cast of it to
//     FLOAT is a copy and the mask arithmetic exporters write after the
//     Cast runs on the engine. Its readers are limited to views (Reshape,
//     Unsqueeze…), Cast, comparisons with a constant (see compare.go),
//     Gather's indices, Where's condition or operands (see
//     wheretwo.go), ReduceMax and ReduceMin (see boundary.go's
//     reduceStagedInt); as a graph output it is read back in its own type.
//   - Gather of rows of a constant table (axis 0) by an INT64 or INT32 graph
//     input, the embeddings, runs on the host: the table is kept in the
//     program's constant segment, and the runtime copies the rows the ids
//     name into a device tensor of the output's shape (Program.Derived) as
//     it packs the run. An id outside [−V, V) fails the run with ErrInput,
//     as onnxruntime fails it (negative ids count from the end, as Gather
//     defines).

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// rowGather is a device input the runtime fills with rows of a constant
// table chosen by the graph input from.
type rowGather struct {
	from        string
	table       []float32
	rows, width int
	node        string
	// dq is the DequantizeLinear folded into an integer table (see
	// dequantisedTable), which then passes the rows through.
	dq *onnx.Node
	// data is, for rows of a graph input rather than of a table, that
	// input, of outer × rows × width values (see gatherinput.go).
	data  string
	outer int
}

// GatherRows is the serialised rowGather: the table is Rows × Width fp32
// values at byte offset Table of the program's constant segment.
type GatherRows struct {
	From        string // the graph input holding the ids
	Node        string // the Gather, for errors
	Table       uint64
	Rows, Width int
	// Data names the graph input the rows are of, [Outer, Rows, Width],
	// instead of the table (see gatherinput.go).
	Data  string `json:",omitempty"`
	Outer int    `json:",omitempty"`
}

// hostInt reports whether v is computed from an INT64 or BOOL graph input
// the runtime packs as fp32 (see the rule above).
func hostInt(v *value) bool {
	return v != nil && !v.isConst && stagedInt(v.typ)
}

// maskLayout lays out an integer input not laid out yet with its leading
// axes outer and no rows: a padding mask [N,S], unsqueezed to [N,1,1,S],
// is then stored as it is read broadcast over scores [N,H,S,S] (one
// accumulator row per sequence, see broadcast.go), for any S.
func maskLayout(r *value) {
	if !r.input || r.lay.shape != nil || len(r.shape) < 2 {
		return
	}
	l := layout{shape: r.shape, lane: len(r.shape) - 1}
	for a := range len(r.shape) - 1 {
		l.outer = append(l.outer, a)
	}
	r.lay = l
}

// checkHostInt refuses operators that would read an integer input as
// anything but what it is.
func checkHostInt(n *onnx.Node, k int, v *value) error {
	if !hostInt(v) || shapeOnly[n.OpType] {
		return nil
	}
	switch n.OpType {
	case "Identity", "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Cast", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor":
		return nil
	case "Add", "Sub", "Mul", "Div":
		if fp32Int(v) || int32Int(v) {
			return nil // see intarith.go and intpath.go
		}
	case "Gather":
		if k == 1 {
			return nil
		}
	case "Where":
		return nil // the condition, or an operand (see wheretwo.go's whereInts)
	case "DequantizeLinear":
		if k == 0 && v.typ != onnx.Int64 && v.typ != onnx.Bool {
			return nil // see dequantizeStaged
		}
	case "ReduceMax", "ReduceMin":
		if k == 0 {
			return nil // see reduceStagedInt
		}
	case "Pow":
		if v.typ == onnx.Int64 {
			return nil // see widepow.go
		}
	}
	return fmt.Errorf("input %d (%q) is %v from a graph input, which the engine reads only through a Cast to FLOAT, a comparison with a constant, as Gather's indices or as Where's condition (also as Where's operands, by ReduceMax and ReduceMin, INT64 ones by Pow, INT16, UINT16, 4- and 2-bit ones as DequantizeLinear's input): %w",
		k, v.name, v.typ, ErrUnsupported)
}

// gatherNode compiles a Gather whose indices are computed: rows of a
// constant table by an integer graph input, gathered by the runtime.
func (c *compiler) gatherNode(n *onnx.Node) error {
	data, ids, err := c.needPair(n)
	if err != nil {
		return err
	}
	if !data.isConst && ids.isConst {
		return c.gatherSelect(n, data, ids)
	}
	if !data.isConst && c.gathersInput(data, ids) {
		return c.gatherInput(n, data, ids)
	}
	if !data.isConst {
		return fmt.Errorf("Gather of the computed tensor %s by the computed %s: the engine gathers rows of a constant table only, or of a graph input only a Gather reads: %w", data, ids, ErrUnsupported)
	}
	axis, err := n.Int("axis", 0)
	if err != nil {
		return err
	}
	if axis < 0 {
		axis += int64(len(data.shape))
	}
	var table []float32
	var dq *onnx.Node
	switch data.typ {
	case onnx.Float:
		table = data.floats()
	case onnx.Int8, onnx.Uint8:
		table, dq = c.dequantisedTable(n, data)
	}
	if axis != 0 || len(data.shape) < 1 || table == nil {
		return fmt.Errorf("Gather of %v %v along axis %d: only rows (axis 0) of a FLOAT table, or of an INT8 or UINT8 one that only a per-tensor DequantizeLinear reads: %w", data.typ, data.shape, axis, ErrUnsupported)
	}
	r := ids.root()
	if !r.input || r.packed != nil || r.bcast != nil || r.gather != nil || (r.typ != onnx.Int64 && r.typ != onnx.Int32) {
		return fmt.Errorf("Gather's indices %s must be an INT64 or INT32 graph input, or a view of one: the engine has no indirect load, so the host gathers the rows: %w", ids, ErrUnsupported)
	}
	if c.opts.batch > 1 {
		return fmt.Errorf("Gather of rows by %s in a program compiled for a batch: %w", ids, ErrUnsupported)
	}
	width := 1
	for _, d := range data.shape[1:] {
		width *= d
	}
	shape := append(slices.Clone(ids.shape), data.shape[1:]...)
	// Rows of the table on the lanes, as a MatMul's output lays out the
	// hidden states the embeddings are added to.
	v := &value{shape: shape, typ: onnx.Float, device: device{input: true, elem: f32, lay: matLayout(shape),
		gather: &rowGather{from: r.name, table: table, rows: data.shape[0], width: width, node: n.Name, dq: dq}}}
	c.set(n, 0, v)
	c.inputs = append(c.inputs, v)
	return nil
}

// bindGather places v's table in the constant segment and records the rule.
func (e *emitter) bindGather(b *Binding, g *rowGather) {
	if g.data != "" {
		b.Gather = &GatherRows{From: g.from, Node: g.node, Rows: g.rows, Width: g.width, Data: g.data, Outer: g.outer}
		return
	}
	raw := make([]byte, 4*len(g.table))
	for k, f := range g.table {
		binary.LittleEndian.PutUint32(raw[4*k:], math.Float32bits(f))
	}
	b.Gather = &GatherRows{From: g.from, Node: g.node, Table: e.blob(raw), Rows: g.rows, Width: g.width}
}

// packGathered packs the rows of b's table, or of the input data, that
// the ids t name.
func packGathered(b Binding, t *onnx.Tensor, consts []byte, data *onnx.Tensor) ([]byte, error) {
	g := b.Gather
	if b.Elem != "fp32" {
		return nil, fmt.Errorf("Gather %q: rows stored as %s, the runtime writes fp32", g.Node, b.Elem)
	}
	if t.DataType != onnx.Int64 && t.DataType != onnx.Int32 {
		return nil, fmt.Errorf("%w: input %q (Gather %q's indices) is %v, want INT64 or INT32", ErrInput, t.Name, g.Node, t.DataType)
	}
	ids, err := t.Int64s()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	total := 1
	for _, d := range b.Shape {
		total *= d
	}
	if g.Data != "" {
		return packInputRows(b, t.Name, ids, data)
	}
	if g.Width < 1 || len(ids)*g.Width != total {
		return nil, fmt.Errorf("%w: input %q has %d ids, Gather %q's output %v wants %d", ErrInput, t.Name, len(ids), g.Node, b.Shape, total/max(g.Width, 1))
	}
	n := uint64(len(consts))
	if g.Rows < 1 || g.Table > n || uint64(g.Rows) > (n-g.Table)/4/uint64(g.Width) {
		return nil, fmt.Errorf("Gather %q: table beyond the constant segment", g.Node)
	}
	table := consts[g.Table:]
	out := make([]float32, total)
	rows := int64(g.Rows)
	for k, id := range ids {
		if id < -rows || id >= rows {
			return nil, fmt.Errorf("%w: input %q: index %d (element %d) is out of Gather %q's range [%d, %d]", ErrInput, t.Name, id, k, g.Node, -rows, rows-1)
		}
		if id < 0 {
			id += rows
		}
		row := table[4*int(id)*g.Width:]
		for j := range g.Width {
			out[k*g.Width+j] = math.Float32frombits(binary.LittleEndian.Uint32(row[4*j:]))
		}
	}
	return packF32(b.Lay.internal(), out, nil), nil
}

// intAsFloat32 converts an integer input packed as fp32, refusing values
// fp32 does not hold exactly.
func intAsFloat32(t *onnx.Tensor) ([]float32, error) {
	iv, err := t.Int64s()
	if err != nil {
		return nil, err
	}
	f := make([]float32, len(iv))
	for k, x := range iv {
		if x > 1<<24 || x < -(1<<24) {
			return nil, fmt.Errorf("input %q: %d (element %d) is beyond the ±2²⁴ the engine holds exactly", t.Name, x, k)
		}
		f[k] = float32(x)
	}
	return f, nil
}

// checkDerived validates a derived tensor read from a program file: a
// device tensor of fp32 rows, its table inside the constant segment, its
// ids an integer input of as many elements as it has rows.
func checkDerived(b *Binding, p *Program) error {
	if b.Word != nil && b.Gather == nil {
		return checkWord(b, p)
	}
	g := b.Gather
	if g == nil || b.IsConst || b.Host != "" || b.Bcast != nil || b.Elem != "fp32" || b.Type != onnx.Float {
		return fmt.Errorf("%q: want fp32 rows of a Gather", b.Name)
	}
	if p.Batch > 1 {
		return fmt.Errorf("%q in a program of batch %d", b.Name, p.Batch)
	}
	if g.Data != "" {
		return checkInputRows(b, p)
	}
	if err := checkBinding(b, p, 0); err != nil {
		return err
	}
	total, err := checkShape(b.Shape)
	if err != nil {
		return err
	}
	consts := uint64(len(p.Consts))
	if g.Rows < 1 || g.Width < 1 || total%g.Width != 0 || g.Table > consts ||
		uint64(g.Rows) > (consts-g.Table)/4/uint64(g.Width) {
		return fmt.Errorf("%q: table of %d × %d at %d for %d values, in %d bytes of constants", b.Name, g.Rows, g.Width, g.Table, total, consts)
	}
	for _, in := range p.Inputs {
		if in.Name != g.From || in.IsConst {
			continue
		}
		n, err := checkShape(in.Shape)
		if err != nil || n*g.Width != total || (in.Type != onnx.Int64 && in.Type != onnx.Int32) {
			return fmt.Errorf("%q: ids %q are %v %v for %v", b.Name, g.From, in.Type, in.Shape, b.Shape)
		}
		return nil
	}
	return fmt.Errorf("%q: ids %q are no input", b.Name, g.From)
}
