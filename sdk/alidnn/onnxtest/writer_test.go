package onnxtest_test

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// A minimal ONNX writer for the generated cases: one graph of nodes with
// int, float and ints attributes, initializers, and tensor-typed inputs and
// outputs of fixed shape. Field numbers are onnx.proto's.

type attr struct {
	name string
	f    *float32
	i    *int64
	is   []int64
	fs   []float32
	t    *onnx.Tensor
	s    *string
}

func fAttr(name string, v float32) attr { return attr{name: name, f: &v} }
func iAttr(name string, v int64) attr   { return attr{name: name, i: &v} }

func isAttr(name string, v ...int64) attr { return attr{name: name, is: v} }

func sAttr(name, v string) attr { return attr{name: name, s: &v} }

type node struct {
	op      string
	inputs  []string
	outputs []string
	attrs   []attr
}

type valueInfo struct {
	name string
	typ  onnx.DataType
	dims []int64
	// params names the symbolic dimensions: where params[k] is not "",
	// dimension k is written as that name, not as dims[k].
	params []string
}

type graph struct {
	nodes   []node
	inits   []*onnx.Tensor
	inputs  []valueInfo // runtime inputs only
	outputs []valueInfo
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func (a attr) encode() ([]byte, error) {
	b := appendBytes(nil, 1, []byte(a.name))
	switch {
	case a.f != nil:
		b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(*a.f))
		b = appendVarint(b, 20, 1) // FLOAT
	case a.i != nil:
		b = appendVarint(b, 3, uint64(*a.i))
		b = appendVarint(b, 20, 2) // INT
	case a.is != nil:
		for _, v := range a.is {
			b = appendVarint(b, 8, uint64(v))
		}
		b = appendVarint(b, 20, 7) // INTS
	case a.fs != nil:
		for _, v := range a.fs {
			b = protowire.AppendTag(b, 7, protowire.Fixed32Type)
			b = protowire.AppendFixed32(b, math.Float32bits(v))
		}
		b = appendVarint(b, 20, 6) // FLOATS
	case a.t != nil:
		tb, err := onnx.EncodeTensor(a.t)
		if err != nil {
			return nil, err
		}
		b = appendBytes(b, 5, tb)
		b = appendVarint(b, 20, 4) // TENSOR
	case a.s != nil:
		b = appendBytes(b, 4, []byte(*a.s))
		b = appendVarint(b, 20, 3) // STRING
	}
	return b, nil
}

func (n node) encode(k int) ([]byte, error) {
	var b []byte
	for _, s := range n.inputs {
		b = appendBytes(b, 1, []byte(s))
	}
	for _, s := range n.outputs {
		b = appendBytes(b, 2, []byte(s))
	}
	b = appendBytes(b, 3, []byte(n.op+"_"+string(rune('0'+k))))
	b = appendBytes(b, 4, []byte(n.op))
	for _, a := range n.attrs {
		ab, err := a.encode()
		if err != nil {
			return nil, fmt.Errorf("node %s attribute %s: %w", n.op, a.name, err)
		}
		b = appendBytes(b, 5, ab)
	}
	return b, nil
}

func (v valueInfo) encode() []byte {
	var shape []byte
	for k, d := range v.dims {
		if k < len(v.params) && v.params[k] != "" {
			shape = appendBytes(shape, 1, appendBytes(nil, 2, []byte(v.params[k])))
			continue
		}
		shape = appendBytes(shape, 1, appendVarint(nil, 1, uint64(d)))
	}
	tt := appendVarint(nil, 1, uint64(v.typ))
	tt = appendBytes(tt, 2, shape)
	b := appendBytes(nil, 1, []byte(v.name))
	return appendBytes(b, 2, appendBytes(nil, 1, tt))
}

// encodeModel writes g as a ModelProto (IR version 7) importing the
// default domain at opset.
func encodeModel(name string, opset int64, g graph) ([]byte, error) {
	var gb []byte
	for k, n := range g.nodes {
		nb, err := n.encode(k)
		if err != nil {
			return nil, err
		}
		gb = appendBytes(gb, 1, nb)
	}
	gb = appendBytes(gb, 2, []byte(name))
	for _, t := range g.inits {
		tb, err := onnx.EncodeTensor(t)
		if err != nil {
			return nil, err
		}
		gb = appendBytes(gb, 5, tb)
	}
	for _, v := range g.inputs {
		gb = appendBytes(gb, 11, v.encode())
	}
	for _, v := range g.outputs {
		gb = appendBytes(gb, 12, v.encode())
	}
	b := appendVarint(nil, 1, 7)
	b = appendBytes(b, 2, []byte("faas onnxtest generator"))
	b = appendBytes(b, 7, gb)
	return appendBytes(b, 8, appendVarint(appendBytes(nil, 1, nil), 2, uint64(opset))), nil
}
