package onnx

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// pb builds protobuf messages field by field for tests.
type pb []byte

func (b pb) varint(num protowire.Number, v uint64) pb {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func (b pb) int(num protowire.Number, v int64) pb { return b.varint(num, uint64(v)) }

func (b pb) float(num protowire.Number, v float32) pb {
	b = protowire.AppendTag(b, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, math.Float32bits(v))
}

func (b pb) double(num protowire.Number, v float64) pb {
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(v))
}

func (b pb) bytes(num protowire.Number, v []byte) pb {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func (b pb) str(num protowire.Number, s string) pb { return b.bytes(num, []byte(s)) }

func (b pb) msg(num protowire.Number, m pb) pb { return b.bytes(num, m) }

// ints appends vs as a repeated varint field, packed or not.
func (b pb) ints(num protowire.Number, packed bool, vs ...int64) pb {
	if !packed {
		for _, v := range vs {
			b = b.int(num, v)
		}
		return b
	}
	var p []byte
	for _, v := range vs {
		p = protowire.AppendVarint(p, uint64(v))
	}
	return b.bytes(num, p)
}

// floats appends vs as a repeated float field, packed or not.
func (b pb) floats(num protowire.Number, packed bool, vs ...float32) pb {
	if !packed {
		for _, v := range vs {
			b = b.float(num, v)
		}
		return b
	}
	var p []byte
	for _, v := range vs {
		p = protowire.AppendFixed32(p, math.Float32bits(v))
	}
	return b.bytes(num, p)
}

// tensorPB starts a TensorProto with name, type and dims.
func tensorPB(name string, dt DataType, dims ...int64) pb {
	return pb{}.ints(1, false, dims...).int(2, int64(dt)).str(8, name)
}

// le returns vs little-endian, size bytes each.
func le(size int, vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = appendLE(b, v, size)
	}
	return b
}

// Field numbers of onnx.proto used by the tests.
const (
	tDims, tDataType, tSegment, tFloatData, tInt32Data, tStringData, tInt64Data = 1, 2, 3, 4, 5, 6, 7
	tName, tRawData, tDoubleData, tUint64Data, tExternalData, tDataLocation     = 8, 9, 10, 11, 13, 14
)

// trunc returns b without its last n bytes.
func trunc(b pb, n int) pb { return b[:len(b)-n] }
