package onnx

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// field is one field of a message as it appears on the wire.
type field struct {
	num protowire.Number
	typ protowire.Type
	off int    // offset in the input of the field's value (past the length of a length-delimited one)
	u   uint64 // the value of a varint, fixed32 or fixed64 field
	b   []byte // the value of a length-delimited field
}

// reader iterates over the fields of one encoded message.
type reader struct {
	b   []byte
	off int // offset in the input of b[0], for error messages
}

// wireError explains a failure of protowire at offset off.
func wireError(what string, n, off int) *Error {
	if errors.Is(protowire.ParseError(n), io.ErrUnexpectedEOF) {
		return errorf("", "truncated %s at byte %d", what, off)
	}
	return errorf("", "invalid %s at byte %d: %v", what, off, protowire.ParseError(n))
}

// next returns the next field, or ok false at the end of the message.
// Groups (deprecated, unused by onnx.proto) are skipped like unknown fields.
func (r *reader) next() (f field, ok bool, err error) {
	for len(r.b) > 0 {
		num, typ, n := protowire.ConsumeTag(r.b)
		if n < 0 {
			return f, false, wireError("tag", n, r.off)
		}
		f = field{num: num, typ: typ, off: r.off + n}
		var m int
		switch typ {
		case protowire.VarintType:
			f.u, m = protowire.ConsumeVarint(r.b[n:])
		case protowire.Fixed32Type:
			var v uint32
			v, m = protowire.ConsumeFixed32(r.b[n:])
			f.u = uint64(v)
		case protowire.Fixed64Type:
			f.u, m = protowire.ConsumeFixed64(r.b[n:])
		case protowire.BytesType:
			f.b, m = protowire.ConsumeBytes(r.b[n:])
		default:
			m = protowire.ConsumeFieldValue(num, typ, r.b[n:])
		}
		if m < 0 {
			return f, false, wireError(wireName(typ), m, f.off)
		}
		if typ == protowire.BytesType {
			f.off += m - len(f.b) // past the length
		}
		r.b = r.b[n+m:]
		r.off += n + m
		if typ == protowire.StartGroupType {
			continue
		}
		return f, true, nil
	}
	return f, false, nil
}

func wireName(t protowire.Type) string {
	switch t {
	case protowire.VarintType:
		return "varint"
	case protowire.Fixed32Type:
		return "fixed32"
	case protowire.Fixed64Type:
		return "fixed64"
	case protowire.BytesType:
		return "length-delimited field"
	case protowire.StartGroupType, protowire.EndGroupType:
		return "group"
	}
	return fmt.Sprintf("field of wire type %d", t)
}

// sub returns a reader of the message in the length-delimited field f.
func (f field) sub() reader { return reader{b: f.b, off: f.off} }

// want checks that f has wire type t.
func (f field) want(t protowire.Type) error {
	if f.typ != t {
		return errorf("", "%s at byte %d, want %s", wireName(f.typ), f.off, wireName(t))
	}
	return nil
}

func (f field) str() (string, error) {
	if err := f.want(protowire.BytesType); err != nil {
		return "", err
	}
	return string(f.b), nil
}

func (f field) int64() (int64, error) {
	if err := f.want(protowire.VarintType); err != nil {
		return 0, err
	}
	return int64(f.u), nil
}

// int32 reads an int32 or enum field: negative values are sign-extended to
// ten bytes on the wire, so anything else out of range is malformed.
func (f field) int32() (int32, error) {
	v, err := f.int64()
	if err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		err = errorf("", "value %d at byte %d out of int32 range", v, f.off)
	}
	return int32(v), err
}

func (f field) float32() (float32, error) {
	if err := f.want(protowire.Fixed32Type); err != nil {
		return 0, err
	}
	return math.Float32frombits(uint32(f.u)), nil
}

// appendVarints appends the values of a repeated varint field, packed or not.
func (f field) appendVarints(dst []uint64) ([]uint64, error) {
	switch f.typ {
	case protowire.VarintType:
		return append(dst, f.u), nil
	case protowire.BytesType:
		// Count first, so that dst grows once and by no more than the input.
		n := 0
		for _, c := range f.b {
			if c < 0x80 {
				n++
			}
		}
		dst = slices.Grow(dst, n)
		b, off := f.b, f.off
		for len(b) > 0 {
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return dst, wireError("varint", m, off)
			}
			dst = append(dst, v)
			b, off = b[m:], off+m
		}
		return dst, nil
	}
	return dst, f.want(protowire.VarintType)
}

func (f field) appendInt64s(dst []int64) ([]int64, error) {
	u, err := f.appendVarints(nil)
	dst = slices.Grow(dst, len(u))
	for _, v := range u {
		dst = append(dst, int64(v))
	}
	return dst, err
}

// appendFixed32s appends the values of a repeated fixed32 field (float),
// packed or not.
func (f field) appendFixed32s(dst []uint32) ([]uint32, error) {
	switch f.typ {
	case protowire.Fixed32Type:
		return append(dst, uint32(f.u)), nil
	case protowire.BytesType:
		if len(f.b)%4 != 0 {
			return dst, errorf("", "packed fixed32 of %d bytes at byte %d", len(f.b), f.off)
		}
		dst = slices.Grow(dst, len(f.b)/4)
		for b := f.b; len(b) > 0; b = b[4:] {
			v, _ := protowire.ConsumeFixed32(b)
			dst = append(dst, v)
		}
		return dst, nil
	}
	return dst, f.want(protowire.Fixed32Type)
}

// appendFixed64s appends the values of a repeated fixed64 field (double),
// packed or not.
func (f field) appendFixed64s(dst []uint64) ([]uint64, error) {
	switch f.typ {
	case protowire.Fixed64Type:
		return append(dst, f.u), nil
	case protowire.BytesType:
		if len(f.b)%8 != 0 {
			return dst, errorf("", "packed fixed64 of %d bytes at byte %d", len(f.b), f.off)
		}
		dst = slices.Grow(dst, len(f.b)/8)
		for b := f.b; len(b) > 0; b = b[8:] {
			v, _ := protowire.ConsumeFixed64(b)
			dst = append(dst, v)
		}
		return dst, nil
	}
	return dst, f.want(protowire.Fixed64Type)
}
