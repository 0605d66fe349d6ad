package alidnn

// Gather of a graph input by graph-input indices. The engine has no
// indirect load, but when the data is a graph input the runtime holds it
// on the host as it stages a run: it builds the gathered tensor there from
// the indices, the copies a DMA descriptor list would make, and uploads
// that instead of the data (Program.Derived, as embed.go gathers rows of a
// constant table). Along any axis: the output is data's leading axes, the
// indices' shape, data's trailing axes. An index outside [−n, n) fails the
// run with ErrInput naming it (negative ones count from the end, as Gather
// defines). The data must be FLOAT and read by nothing else (it is not
// uploaded); a Gather of an engine-computed tensor by run-time indices
// stays refused.

import (
	"fmt"
	"slices"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// gathersInput reports whether Gather of data by ids is of a FLOAT graph
// input that only it reads, by an INT64 or INT32 graph input.
func (c *compiler) gathersInput(data, ids *value) bool {
	r, ir := data.root(), ids.root()
	return r == data && r.input && r.layer == nil && r.gather == nil && r.packed == nil && r.bcast == nil &&
		r.typ == onnx.Float && c.dataReaders(r.name) == 1 && !c.outputs[r.name] &&
		!ids.isConst && ir.input && ir.gather == nil && ir.packed == nil && ir.bcast == nil &&
		(ir.typ == onnx.Int64 || ir.typ == onnx.Int32) && c.opts.batch <= 1
}

// gatherInput compiles Gather n of the graph input data by the graph input
// ids as a tensor the runtime derives from both.
func (c *compiler) gatherInput(n *onnx.Node, data, ids *value) error {
	axis, err := n.Int("axis", 0)
	if err != nil {
		return err
	}
	a, err := normAxis(int(axis), len(data.shape))
	if err != nil || len(data.shape) == 0 {
		return fmt.Errorf("Gather of %s along axis %d: %w", data, axis, ErrUnsupported)
	}
	shape := slices.Concat(data.shape[:a], ids.shape, data.shape[a+1:])
	if size(shape) == 0 {
		c.set(n, 0, emptyValue(onnx.Float, shape))
		return nil
	}
	data.hostOnly = true
	v := &value{shape: shape, typ: onnx.Float, device: device{input: true, elem: f32, lay: matLayout(shape),
		gather: &rowGather{from: ids.root().name, rows: data.shape[a], width: size(data.shape[a+1:]), node: n.Name,
			data: data.name, outer: size(data.shape[:a])}}}
	c.set(n, 0, v)
	c.inputs = append(c.inputs, v)
	return nil
}

// packInputRows packs b, the rows of the input data the ids (of input
// idsName) pick.
func packInputRows(b Binding, idsName string, ids []int64, data *onnx.Tensor) ([]byte, error) {
	g := b.Gather
	if data == nil || data.DataType != onnx.Float {
		return nil, fmt.Errorf("%w: input %q (Gather %q's data) is missing or not FLOAT", ErrInput, g.Data, g.Node)
	}
	f, err := data.Float32s()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInput, err)
	}
	total := size(b.Shape)
	if g.Outer < 1 || g.Rows < 1 || g.Width < 1 || len(f) != g.Outer*g.Rows*g.Width || g.Outer*len(ids)*g.Width != total {
		return nil, fmt.Errorf("%w: Gather %q of %q (%d values) by %q (%d ids) into %v", ErrInput, g.Node, g.Data, len(f), idsName, len(ids), b.Shape)
	}
	out := make([]float32, 0, total)
	rows := int64(g.Rows)
	for o := range g.Outer {
		for k, id := range ids {
			if id < -rows || id >= rows {
				return nil, fmt.Errorf("%w: input %q: index %d (element %d) is out of Gather %q's range [%d, %d]", ErrInput, idsName, id, k, g.Node, -rows, rows-1)
			}
			if id < 0 {
				id += rows
			}
			at := (o*g.Rows + int(id)) * g.Width
			out = append(out, f[at:at+g.Width]...)
		}
	}
	return packF32(b.Lay.internal(), out, nil), nil
}

// checkInputRows validates a derived tensor gathered from an input, read
// from a program file: its data a host-only FLOAT input of Outer × Rows ×
// Width values, its ids an integer input of as many elements as it has
// rows per outer index.
func checkInputRows(b *Binding, p *Program) error {
	g := b.Gather
	total, err := checkShape(b.Shape)
	if err != nil {
		return err
	}
	if g.Outer < 1 || g.Rows < 1 || g.Width < 1 || total%(g.Outer*g.Width) != 0 {
		return fmt.Errorf("%q: %d × %d × %d rows for %v", b.Name, g.Outer, g.Rows, g.Width, b.Shape)
	}
	var data, ids *Binding
	for k := range p.Inputs {
		switch p.Inputs[k].Name {
		case g.Data:
			data = &p.Inputs[k]
		case g.From:
			ids = &p.Inputs[k]
		}
	}
	if data == nil || !data.HostOnly || data.Type != onnx.Float || size(data.Shape) != g.Outer*g.Rows*g.Width {
		return fmt.Errorf("%q: data %q is no host-only input of %d values", b.Name, g.Data, g.Outer*g.Rows*g.Width)
	}
	if ids == nil || ids.IsConst || ids.HostOnly || (ids.Type != onnx.Int64 && ids.Type != onnx.Int32) || size(ids.Shape)*g.Outer*g.Width != total {
		return fmt.Errorf("%q: ids %q are no integer input of %d values", b.Name, g.From, total/(g.Outer*g.Width))
	}
	return nil
}
