package alidnn

import (
	"fmt"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// value is a tensor of the graph being compiled. Its roles are the
// embedded structs below, which a value combines: a constant known at
// compile time; a device tensor (a graph input the runtime packs, or a
// tensor a layer computes); a derivation from other values (an alias of
// another's storage, a host operator, a transposed view); a dequantisation
// deferred until it is needed.
type value struct {
	name  string
	shape []int
	typ   onnx.DataType // logical element type
	q     quant         // for int8 tensors and their aliases: real = scale·(device − zp)
	uses  int           // consumers in the graph, graph outputs included

	constant
	device
	derived
	dequantised
}

// constant is a value known at compile time: f for floating-point types,
// i for integer types, s for STRING (read only by Equal, see intern.go).
type constant struct {
	isConst bool
	f       []float32
	i       []int64
	s       [][]byte
}

// device is a tensor in device memory: in the activation segment, or, for a
// constant a step reads whole, in the constant segment.
type device struct {
	input bool  // a graph input, packed by the runtime
	bcast []int // for inputs broadcast to shape: the input's own shape
	elem  elem
	lay   layout
	addr  uint64 // offset in its segment
	// placed says addr is assigned (a Concat output is written by several
	// layers but placed once).
	placed bool
	layer  *layer // the layer computing it
	// gather is, for an input the runtime fills with rows of a constant
	// table, the rule (see embed.go).
	gather *rowGather
	// hostOnly says a graph input is read by the runtime only, as a
	// Gather's data (see gatherinput.go) or as the source of its 32-bit
	// words (see wide.go): it has no device storage.
	hostOnly bool
	// word is, for an input the runtime fills with one 32-bit word of a
	// 64-bit integer input, which one (see wide.go).
	word *InputWord
	// zeroPad says the padding lanes of its lane axis hold zeros, as
	// permuteGroups' copy writes them and permutations of whole blocks
	// keep them: a MatMul may read it as B whose padding is zero rows or
	// columns (see weightsOf).
	zeroPad bool
}

// derived is a value computed from others without a layer of its own.
type derived struct {
	// alias is a tensor with the same row-major data (Reshape, Flatten);
	// it has no storage of its own.
	alias *value
	// host is computed by the runtime from another value (Softmax).
	host *hostOp
	// packed is, for a graph input the host packs transposed, the input
	// as the graph declares it; view is, for a Transpose of a device tensor
	// that reorders its data, that tensor (alias is its storage); cols is,
	// for a flattening of a view, where each column is stored (see nhwc.go).
	packed *transposeOf
	view   *transposeOf
	cols   []int
	// self is a gate held back until the graph multiplies it by its
	// input (see selfchain.go).
	self *selfChain
	// block is, for a value [..., C] each row of which holds one value on
	// its C lanes (a lane mean's or sum's), the tensor [..., 16] holding
	// it on all 16 lanes of one block: element-wise operators read that
	// block for every block of C (see laneblock.go).
	block *value
	// words are, for a 64-bit integer, its low and high 32-bit words,
	// int32 device tensors (see wide.go); it has no storage of its own.
	words *[2]*value
	// noSaturate and roundMode are, for a Cast to float8 the host does as
	// it reads the output (see boundary.go), the Cast's saturate=0 and its
	// round_mode for FLOAT8E8M0 ("" for "up").
	noSaturate bool
	roundMode  string
}

// dequantised is the DequantizeLinear computing the value: a folded
// constant's (its int8 input stays at hand), or, deferred, a device
// tensor's that is not compiled until something other than a QDQ Conv reads
// it (see qdq.go).
type dequantised struct {
	dq       *onnx.Node
	deferred bool
}

// quant is a per-tensor affine quantisation on the device's int8 values.
// Logical uint8 tensors are stored shifted by −128; zp is the device's.
type quant struct {
	scale float32
	zp    int32
}

func (v *value) len() int {
	n := 1
	for _, d := range v.shape {
		n *= d
	}
	return n
}

func (v *value) String() string { return fmt.Sprintf("%q %v", v.name, v.shape) }

// el is the device element type of v: its layer's current store type
// while the layer is being built.
func (v *value) el() elem {
	if v.layer != nil && v.layer.out == v {
		return v.layer.storeElem()
	}
	return v.elem
}

// root follows aliases to the value that has storage.
func (v *value) root() *value {
	for v.alias != nil {
		v = v.alias
	}
	return v
}

// isFloat reports whether v's logical type is a floating-point type.
func (v *value) isFloat() bool {
	return v.typ.IsFloat()
}

// f64s returns a constant's values as float64, exact for its floats and
// for integers up to 2⁵³.
func (v *value) f64s() []float64 {
	out := make([]float64, 0, max(len(v.f), len(v.i)))
	for _, x := range v.f {
		out = append(out, float64(x))
	}
	for _, x := range v.i {
		out = append(out, float64(x))
	}
	return out
}

// floats returns a constant's values as float32, converting integers.
func (v *value) floats() []float32 {
	if v.f != nil {
		return v.f
	}
	out := make([]float32, len(v.i))
	for k, x := range v.i {
		out[k] = float32(x)
	}
	return out
}

// ints returns a constant's values as integers, truncating floats.
func (v *value) ints() []int64 {
	if v.i != nil {
		return v.i
	}
	out := make([]int64, len(v.f))
	for k, x := range v.f {
		out[k] = int64(x)
	}
	return out
}

// hostOp is an operator the runtime applies after reading src back.
type hostOp struct {
	op   string // "Softmax"
	axis int
	src  *value
	pads []int // padOp: top, left, bottom, right
	// quant is, for a QuantizeLinear the host does as it reads the
	// output (see hostquant.go), its parameters.
	quant *HostQuant
}

// aliasOf is a value of shape over src's storage.
func aliasOf(src *value, shape []int, typ onnx.DataType) *value {
	return &value{shape: shape, typ: typ, q: src.q, derived: derived{alias: src}}
}

func constFloat(name string, shape []int, f []float32) *value {
	return &value{name: name, shape: shape, typ: onnx.Float, constant: constant{isConst: true, f: f}}
}

func constInt(name string, typ onnx.DataType, shape []int, i []int64) *value {
	return &value{name: name, shape: shape, typ: typ, constant: constant{isConst: true, i: i}}
}

func fromTensor(t *onnx.Tensor) (*value, error) {
	shape := make([]int, len(t.Dims))
	for k, d := range t.Dims {
		shape[k] = int(d)
	}
	switch t.DataType {
	case onnx.Float, onnx.Double:
		f, err := t.Float32s()
		if err != nil {
			return nil, err
		}
		return constFloat(t.Name, shape, f), nil
	case onnx.Float16, onnx.Bfloat16, onnx.Float8E4M3FN, onnx.Float8E4M3FNUZ, onnx.Float8E5M2, onnx.Float8E5M2FNUZ, onnx.Float4E2M1, onnx.Float8E8M0:
		// Exact in fp32; the type stays, so that what is folded from it
		// is rounded to it (see foldRound).
		f, err := t.Float32s()
		if err != nil {
			return nil, err
		}
		v := constFloat(t.Name, shape, f)
		v.typ = t.DataType
		return v, nil
	case onnx.Int8, onnx.Uint8, onnx.Int16, onnx.Uint16, onnx.Int32, onnx.Int64, onnx.Uint32, onnx.Uint64, onnx.Bool,
		onnx.Int4, onnx.Uint4, onnx.Int2, onnx.Uint2:
		i, err := t.Int64s()
		if err != nil {
			return nil, err
		}
		return constInt(t.Name, t.DataType, shape, i), nil
	case onnx.String:
		s, err := t.Strings()
		if err != nil {
			return nil, err
		}
		return &value{name: t.Name, shape: shape, typ: onnx.String, constant: constant{isConst: true, s: s}}, nil
	}
	return nil, fmt.Errorf("tensor %q: data type %v is not supported", t.Name, t.DataType)
}

// broadcastShape is numpy's broadcast of two shapes.
func broadcastShape(a, b []int) ([]int, error) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for k := 0; k < n; k++ {
		x, y := 1, 1
		if i := k - (n - len(a)); i >= 0 {
			x = a[i]
		}
		if i := k - (n - len(b)); i >= 0 {
			y = b[i]
		}
		switch {
		case x == y || y == 1:
			out[k] = x
		case x == 1:
			out[k] = y
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast", a, b)
		}
	}
	return out, nil
}
