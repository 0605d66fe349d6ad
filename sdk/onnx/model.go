package onnx

import (
	"fmt"
	"strconv"
)

// Model is a decoded ModelProto.
type Model struct {
	IRVersion       int64
	Opsets          []Opset
	ProducerName    string
	ProducerVersion string
	Domain          string
	ModelVersion    int64
	Graph           *Graph // never nil in a decoded model
}

// Opset is an operator set the model imports (OperatorSetIdProto).
type Opset struct {
	Domain  string // "" or "ai.onnx" for the default operator set
	Version int64
}

// Opset returns the version of the operator set of domain the model imports,
// or 0 if it imports none. The default domain may be named "" or "ai.onnx".
func (m *Model) Opset(domain string) int64 {
	for _, o := range m.Opsets {
		if o.Domain == domain || defaultDomain(o.Domain) && defaultDomain(domain) {
			return o.Version
		}
	}
	return 0
}

func defaultDomain(d string) bool { return d == "" || d == "ai.onnx" }

// Graph is a decoded GraphProto.
type Graph struct {
	Name         string
	Nodes        []*Node // in the file's order, which onnx requires to be topological
	Initializers []*Tensor
	Inputs       []ValueInfo // may include initializers, in models of IR version < 4
	Outputs      []ValueInfo
	ValueInfo    []ValueInfo // shapes of intermediate values, when the producer recorded them
}

// Initializer returns the initializer called name, or nil.
func (g *Graph) Initializer(name string) *Tensor {
	for _, t := range g.Initializers {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// ValueInfo describes a value of a graph: its name, and its element type and
// shape if it is a tensor (ElemType 0 otherwise).
type ValueInfo struct {
	Name     string
	ElemType DataType
	Dims     []Dim // nil if the shape is unknown; empty for a scalar
}

// Dim is one dimension of a ValueInfo: a size, or a symbolic name (such as
// "N" for the batch), or neither if unknown.
type Dim struct {
	Value int64
	Param string
}

// Node is a decoded NodeProto: one operator applied to named values.
type Node struct {
	Name    string
	OpType  string
	Domain  string   // "" or "ai.onnx" for the default operator set
	Inputs  []string // an empty name is an omitted optional input
	Outputs []string
	Attrs   []*Attribute
}

// describe returns a short description of n for messages, e.g. Conv "conv1".
func (n *Node) describe() string { return n.OpType + " " + strconv.Quote(n.Name) }

// Attr returns the attribute called name, or nil.
func (n *Node) Attr(name string) *Attribute {
	for _, a := range n.Attrs {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// attr returns the attribute called name, nil if absent, or an error if it
// does not have type want.
func (n *Node) attr(name string, want AttrType) (*Attribute, error) {
	a := n.Attr(name)
	if a != nil && a.Type != want {
		return nil, fmt.Errorf("onnx: node %s: attribute %q is %v, want %v", n.describe(), name, a.Type, want)
	}
	return a, nil
}

// Int returns the INT attribute called name, or def if absent.
func (n *Node) Int(name string, def int64) (int64, error) {
	a, err := n.attr(name, AttrInt)
	if a == nil {
		return def, err
	}
	return a.I, nil
}

// Ints returns the INTS attribute called name, or nil if absent.
func (n *Node) Ints(name string) ([]int64, error) {
	a, err := n.attr(name, AttrInts)
	if a == nil {
		return nil, err
	}
	return a.Ints, nil
}

// Float returns the FLOAT attribute called name, or def if absent.
func (n *Node) Float(name string, def float32) (float32, error) {
	a, err := n.attr(name, AttrFloat)
	if a == nil {
		return def, err
	}
	return a.F, nil
}

// Floats returns the FLOATS attribute called name, or nil if absent.
func (n *Node) Floats(name string) ([]float32, error) {
	a, err := n.attr(name, AttrFloats)
	if a == nil {
		return nil, err
	}
	return a.Floats, nil
}

// String returns the STRING attribute called name, or def if absent.
func (n *Node) String(name, def string) (string, error) {
	a, err := n.attr(name, AttrString)
	if a == nil {
		return def, err
	}
	return string(a.S), nil
}

// Tensor returns the TENSOR attribute called name, or nil if absent.
func (n *Node) Tensor(name string) (*Tensor, error) {
	a, err := n.attr(name, AttrTensor)
	if a == nil {
		return nil, err
	}
	return a.T, nil
}

// AttrType is the type of an attribute (AttributeProto.AttributeType).
type AttrType int32

// Attribute types; the values are onnx.proto's.
const (
	AttrUndefined    AttrType = 0
	AttrFloat        AttrType = 1
	AttrInt          AttrType = 2
	AttrString       AttrType = 3
	AttrTensor       AttrType = 4
	AttrGraph        AttrType = 5
	AttrFloats       AttrType = 6
	AttrInts         AttrType = 7
	AttrStrings      AttrType = 8
	AttrTensors      AttrType = 9
	AttrGraphs       AttrType = 10
	AttrSparseTensor AttrType = 11
	AttrTypeProto    AttrType = 13 // only the type is decoded
	AttrTypeProtos   AttrType = 14 // only the type is decoded
)

var attrNames = [...]string{
	"UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS", "INTS",
	"STRINGS", "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS",
}

// String returns onnx.proto's name of the type, e.g. INTS.
func (t AttrType) String() string {
	if t >= 0 && int(t) < len(attrNames) {
		return attrNames[t]
	}
	return "AttrType(" + strconv.Itoa(int(t)) + ")"
}

// Attribute is a decoded AttributeProto. Type says which value field holds
// the value.
type Attribute struct {
	Name    string
	Type    AttrType
	F       float32
	I       int64
	S       []byte
	T       *Tensor
	G       *Graph
	Floats  []float32
	Ints    []int64
	Strings [][]byte
	Tensors []*Tensor
	Graphs  []*Graph
}
