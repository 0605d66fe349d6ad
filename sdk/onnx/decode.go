package onnx

import (
	"math"
	"strconv"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// Limits on inputs.
const (
	// MaxModelSize is the largest model or tensor decoded: 2 GiB, the limit
	// of protobuf messages, beyond which onnx stores weights as external data.
	MaxModelSize = 2 << 30
	// MaxDepth bounds the nesting of graphs (the main graph is at depth 1;
	// the body of an If or Loop node is one deeper).
	MaxDepth = 16
)

// Decode decodes a serialized ModelProto, the content of an .onnx file.
// Errors wrap ErrFormat and are of type *Error.
func Decode(b []byte) (*Model, error) {
	d, err := newDecoder(b)
	if err != nil {
		return nil, err
	}
	return d.model(reader{b: b})
}

// DecodeTensor decodes a serialized TensorProto, such as the input_0.pb and
// output_0.pb files of onnx's test data. Errors wrap ErrFormat and are of
// type *Error.
func DecodeTensor(b []byte) (*Tensor, error) {
	d, err := newDecoder(b)
	if err != nil {
		return nil, err
	}
	t, err := d.tensor(reader{b: b})
	if err != nil {
		return nil, within(named("tensor", -1, t.Name), err)
	}
	return t, nil
}

// decoder holds the state of one Decode or DecodeTensor call.
type decoder struct {
	// budget is how many more bytes the decoded model may take in memory.
	// Every length in the input is checked against the bytes that follow,
	// but a few bytes of input can still describe a large Go value (an empty
	// node message is two bytes); the budget keeps the total proportional to
	// the input.
	budget int64
}

func newDecoder(b []byte) (*decoder, error) {
	if len(b) > MaxModelSize {
		return nil, errorf("", "%d bytes, more than the protobuf limit of %d", len(b), MaxModelSize)
	}
	return &decoder{budget: 16*int64(len(b)) + 1<<20}, nil
}

// charge accounts for n bytes of decoded data.
func (d *decoder) charge(n int) error {
	d.budget -= int64(n)
	if d.budget < 0 {
		return errorf("", "decoding takes more than 16 times the input's size in memory")
	}
	return nil
}

// named returns the path element of the i-th (if i >= 0) value of field,
// with its name if it has one: initializer[3] "conv1.weight".
func named(field string, i int, name string) string {
	if i >= 0 {
		field += "[" + strconv.Itoa(i) + "]"
	}
	if name != "" {
		field += " " + strconv.Quote(name)
	}
	return field
}

// msg returns a reader of the message in f.
func (f field) msg() (reader, error) {
	if err := f.want(protowire.BytesType); err != nil {
		return reader{}, err
	}
	return reader{b: f.b, off: f.off}, nil
}

func (d *decoder) model(r reader) (*Model, error) {
	m := &Model{}
	for {
		f, ok, err := r.next()
		if !ok {
			if err == nil && m.Graph == nil {
				err = errorf("graph", "missing")
			}
			if err != nil {
				return nil, err
			}
			return m, nil
		}
		switch f.num {
		case 1:
			m.IRVersion, err = f.int64()
			err = within("ir_version", err)
		case 2:
			m.ProducerName, err = f.str()
			err = within("producer_name", err)
		case 3:
			m.ProducerVersion, err = f.str()
			err = within("producer_version", err)
		case 4:
			m.Domain, err = f.str()
			err = within("domain", err)
		case 5:
			m.ModelVersion, err = f.int64()
			err = within("model_version", err)
		case 7:
			if m.Graph != nil {
				return nil, errorf("graph", "given twice")
			}
			m.Graph, err = d.graph(f, 1)
			err = within("graph", err)
		case 8:
			var o Opset
			o, err = d.opset(f)
			err = within(named("opset_import", len(m.Opsets), ""), err)
			m.Opsets = append(m.Opsets, o)
		}
		if err != nil {
			return nil, err
		}
	}
}

func (d *decoder) opset(f field) (Opset, error) {
	var o Opset
	r, err := f.msg()
	for err == nil {
		var ok bool
		if f, ok, err = r.next(); !ok {
			break
		}
		switch f.num {
		case 1:
			o.Domain, err = f.str()
			err = within("domain", err)
		case 2:
			o.Version, err = f.int64()
			err = within("version", err)
		}
	}
	return o, err
}

func (d *decoder) graph(f field, depth int) (*Graph, error) {
	if depth > MaxDepth {
		return nil, errorf("", "graphs nested more than %d deep", MaxDepth)
	}
	r, err := f.msg()
	if err == nil {
		err = d.charge(int(unsafe.Sizeof(Graph{})))
	}
	if err != nil {
		return nil, err
	}
	g := &Graph{}
	for {
		f, ok, err := r.next()
		if !ok {
			return g, err
		}
		switch f.num {
		case 1:
			var n *Node
			n, err = d.node(f, depth)
			name := named("node", len(g.Nodes), "")
			if n.OpType != "" || n.Name != "" {
				name += " (" + n.describe() + ")"
			}
			err = within(name, err)
			g.Nodes = append(g.Nodes, n)
		case 2:
			g.Name, err = f.str()
			err = within("name", err)
		case 5:
			var t *Tensor
			t, err = d.tensorField(f)
			err = within(named("initializer", len(g.Initializers), t.Name), err)
			g.Initializers = append(g.Initializers, t)
		case 11, 12, 13:
			var v ValueInfo
			v, err = d.valueInfo(f)
			list, field := &g.Inputs, "input"
			if f.num == 12 {
				list, field = &g.Outputs, "output"
			} else if f.num == 13 {
				list, field = &g.ValueInfo, "value_info"
			}
			err = within(named(field, len(*list), v.Name), err)
			*list = append(*list, v)
		case 15:
			err = errorf(named("sparse_initializer", 0, ""), "sparse initializers are not supported")
		}
		if err != nil {
			return nil, err
		}
	}
}

// node decodes a NodeProto. It returns what it decoded even on error, so
// that the caller can name the node.
func (d *decoder) node(f field, depth int) (*Node, error) {
	n := &Node{}
	r, err := f.msg()
	if err == nil {
		err = d.charge(int(unsafe.Sizeof(Node{})) + 8)
	}
	for err == nil {
		var ok bool
		if f, ok, err = r.next(); !ok {
			break
		}
		var s string
		switch f.num {
		case 1:
			s, err = f.str()
			err = within(named("input", len(n.Inputs), ""), err)
			n.Inputs = append(n.Inputs, s)
			err = d.chargeIf(err, 16+len(s))
		case 2:
			s, err = f.str()
			err = within(named("output", len(n.Outputs), ""), err)
			n.Outputs = append(n.Outputs, s)
			err = d.chargeIf(err, 16+len(s))
		case 3:
			n.Name, err = f.str()
			err = within("name", err)
		case 4:
			n.OpType, err = f.str()
			err = within("op_type", err)
		case 5:
			var a *Attribute
			a, err = d.attribute(f, depth)
			err = within(named("attribute", len(n.Attrs), a.Name), err)
			n.Attrs = append(n.Attrs, a)
		case 7:
			n.Domain, err = f.str()
			err = within("domain", err)
		}
	}
	if err == nil && n.OpType == "" {
		err = errorf("op_type", "missing")
	}
	return n, err
}

func (d *decoder) chargeIf(err error, n int) error {
	if err != nil {
		return err
	}
	return d.charge(n)
}

// attribute decodes an AttributeProto. It returns what it decoded even on
// error, so that the caller can name the attribute.
func (d *decoder) attribute(f field, depth int) (*Attribute, error) {
	a := &Attribute{}
	r, err := f.msg()
	if err == nil {
		err = d.charge(int(unsafe.Sizeof(Attribute{})) + 8)
	}
	var first AttrType // the type of the first value field, for IR version 1
	seen := func(t AttrType) {
		if first == AttrUndefined {
			first = t
		}
	}
	for err == nil {
		var ok bool
		if f, ok, err = r.next(); !ok {
			break
		}
		switch f.num {
		case 1:
			a.Name, err = f.str()
			err = within("name", err)
		case 20:
			var v int32
			v, err = f.int32()
			a.Type = AttrType(v)
			err = within("type", err)
		case 21:
			err = errorf("ref_attr_name", "references to function attributes are not supported")
		case 2:
			a.F, err = f.float32()
			err = within("f", err)
			seen(AttrFloat)
		case 3:
			a.I, err = f.int64()
			err = within("i", err)
			seen(AttrInt)
		case 4:
			err = within("s", f.want(protowire.BytesType))
			a.S = append([]byte{}, f.b...)
			err = d.chargeIf(err, len(f.b))
			seen(AttrString)
		case 5:
			a.T, err = d.tensorField(f)
			err = within(named("t", -1, a.T.Name), err)
			seen(AttrTensor)
		case 6:
			a.G, err = d.graph(f, depth+1)
			err = within("g", err)
			seen(AttrGraph)
		case 7:
			var u []uint32
			u, err = f.appendFixed32s(nil)
			err = d.chargeIf(within("floats", err), 4*len(u))
			for _, v := range u {
				a.Floats = append(a.Floats, math.Float32frombits(v))
			}
			seen(AttrFloats)
		case 8:
			var u []uint64
			u, err = f.appendVarints(nil)
			err = d.chargeIf(within("ints", err), 8*len(u))
			for _, v := range u {
				a.Ints = append(a.Ints, int64(v))
			}
			seen(AttrInts)
		case 9:
			err = within(named("strings", len(a.Strings), ""), f.want(protowire.BytesType))
			a.Strings = append(a.Strings, append([]byte{}, f.b...))
			err = d.chargeIf(err, 24+len(f.b))
			seen(AttrStrings)
		case 10:
			var t *Tensor
			t, err = d.tensorField(f)
			err = within(named("tensors", len(a.Tensors), t.Name), err)
			a.Tensors = append(a.Tensors, t)
			seen(AttrTensors)
		case 11:
			var g *Graph
			g, err = d.graph(f, depth+1)
			err = within(named("graphs", len(a.Graphs), ""), err)
			a.Graphs = append(a.Graphs, g)
			seen(AttrGraphs)
		case 22, 23:
			err = errorf("sparse_tensor", "sparse tensors are not supported")
		case 14:
			seen(AttrTypeProto)
		case 15:
			seen(AttrTypeProtos)
		}
	}
	if a.Type == AttrUndefined {
		a.Type = first
	}
	return a, err
}

func (d *decoder) valueInfo(f field) (ValueInfo, error) {
	var v ValueInfo
	r, err := f.msg()
	if err == nil {
		err = d.charge(int(unsafe.Sizeof(v)))
	}
	for err == nil {
		var ok bool
		if f, ok, err = r.next(); !ok {
			break
		}
		switch f.num {
		case 1:
			v.Name, err = f.str()
			err = within("name", err)
		case 2:
			err = within("type", d.typeProto(f, &v))
		}
	}
	return v, err
}

// typeProto decodes the tensor_type of a TypeProto into v; the other kinds
// of values (sequences, maps, optionals, sparse tensors) leave v.ElemType 0.
func (d *decoder) typeProto(f field, v *ValueInfo) error {
	r, err := f.msg()
	for err == nil {
		var ok bool
		if f, ok, err = r.next(); !ok {
			break
		}
		if f.num == 1 {
			err = within("tensor_type", d.tensorType(f, v))
		}
	}
	return err
}

func (d *decoder) tensorType(f field, v *ValueInfo) error {
	r, err := f.msg()
	for err == nil {
		var ok bool
		if f, ok, err = r.next(); !ok {
			break
		}
		switch f.num {
		case 1:
			var t int32
			t, err = f.int32()
			v.ElemType = DataType(t)
			err = within("elem_type", err)
		case 2:
			err = within("shape", d.shape(f, v))
		}
	}
	return err
}

func (d *decoder) shape(f field, v *ValueInfo) error {
	r, err := f.msg()
	v.Dims = []Dim{}
	for err == nil {
		var ok bool
		if f, ok, err = r.next(); !ok {
			break
		}
		if f.num == 1 {
			var dim Dim
			dim, err = d.dim(f)
			err = d.chargeIf(within(named("dim", len(v.Dims), ""), err), int(unsafe.Sizeof(dim)))
			v.Dims = append(v.Dims, dim)
		}
	}
	return err
}

func (d *decoder) dim(f field) (Dim, error) {
	var dim Dim
	r, err := f.msg()
	for err == nil {
		var ok bool
		if f, ok, err = r.next(); !ok {
			break
		}
		switch f.num {
		case 1:
			dim.Value, err = f.int64()
			if err == nil && dim.Value < 0 {
				err = errorf("", "%d is negative", dim.Value)
			}
			err = within("dim_value", err)
		case 2:
			dim.Param, err = f.str()
			err = within("dim_param", err)
		}
	}
	return dim, err
}

// tensorField decodes the TensorProto in f. It returns a non-nil tensor even
// on error, so that the caller can name it.
func (d *decoder) tensorField(f field) (*Tensor, error) {
	r, err := f.msg()
	if err != nil {
		return &Tensor{}, err
	}
	return d.tensor(r)
}
