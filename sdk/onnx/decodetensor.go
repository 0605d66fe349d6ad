package onnx

// Decoding a TensorProto: its fields, then its elements checked against its
// type and dims.

import (
	"math"
	"slices"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// typedField is a TensorProto field that holds elements of some data types.
type typedField struct {
	name  string
	num   protowire.Number
	types []DataType
}

// typedFields lists where onnx.proto keeps the elements of each type when
// not in raw_data: the narrow integer types and the narrow floating-point
// ones (as their bits) are widened to int32_data, the 4- and 2-bit types
// packed first (a value of int32_data holds a byte of raw_data), UINT32 to
// uint64_data.
var typedFields = []typedField{
	{"float_data", 4, []DataType{Float}},
	{"int32_data", 5, []DataType{Int32, Int16, Int8, Uint16, Uint8, Bool, Float16, Bfloat16,
		Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0, Uint4, Int4, Float4E2M1, Uint2, Int2}},
	{"int64_data", 7, []DataType{Int64}},
	{"double_data", 10, []DataType{Double}},
	{"uint64_data", 11, []DataType{Uint32, Uint64}},
}

// tensorWire is what a TensorProto's fields hold of its elements, before
// they are checked against its type and dims.
type tensorWire struct {
	raw      []byte
	hasRaw   bool
	typed    [][]uint64 // float_data and such, as their wire values
	external bool
}

// tensor decodes a TensorProto. It returns a non-nil tensor even on error,
// so that the caller can name it.
func (d *decoder) tensor(r reader) (*Tensor, error) {
	t := &Tensor{}
	if err := d.charge(int(unsafe.Sizeof(*t)) + 8); err != nil {
		return t, err
	}
	w := tensorWire{typed: make([][]uint64, len(typedFields))}
	for {
		f, ok, err := r.next()
		if err != nil {
			return t, err
		}
		if !ok {
			break
		}
		if err := d.tensorProtoField(t, &w, f); err != nil {
			return t, err
		}
	}
	if w.external {
		return t, errorf("", "tensor %q: external data is not supported", t.Name)
	}
	n, err := elems(t.Dims)
	if err != nil {
		return t, errorf("dims", "%v", err)
	}
	if err := d.charge(8 * len(t.Dims)); err != nil {
		return t, err
	}
	if t.DataType == String {
		return t, w.checkStrings(t, n)
	}
	if len(t.strs) > 0 {
		return t, errorf("string_data", "set in a %v tensor", t.DataType)
	}
	if t.DataType.Bits() == 0 {
		return t, errorf("data_type", "%v is not supported", t.DataType)
	}
	if w.hasRaw {
		return t, d.rawElements(t, &w, n)
	}
	return t, d.typedElements(t, &w, n)
}

// tensorProtoField decodes field f of a TensorProto into t or w.
func (d *decoder) tensorProtoField(t *Tensor, w *tensorWire, f field) error {
	var err error
	switch f.num {
	case 1:
		t.Dims, err = f.appendInt64s(t.Dims)
		if err == nil && len(t.Dims) > MaxDims {
			err = errorf("", "more than %d dims", MaxDims)
		}
		err = within("dims", err)
	case 2:
		var v int32
		v, err = f.int32()
		t.DataType = DataType(v)
		err = within("data_type", err)
	case 3:
		err = errorf("segment", "segmented tensors are not supported")
	case 6:
		err = within(named("string_data", len(t.strs), ""), f.want(protowire.BytesType))
		t.strs = append(t.strs, append([]byte{}, f.b...))
		err = d.chargeIf(err, 24+len(f.b))
	case 8:
		t.Name, err = f.str()
		err = within("name", err)
	case 9:
		err = within("raw_data", f.want(protowire.BytesType))
		w.raw, w.hasRaw = f.b, true
	case 13:
		w.external = true
	case 14:
		var v int32
		v, err = f.int32()
		w.external = w.external || v == 1 // EXTERNAL
		err = within("data_location", err)
	}
	for i, tf := range typedFields {
		if f.num != tf.num {
			continue
		}
		if tf.num == 4 {
			var u []uint32
			u, err = f.appendFixed32s(nil)
			for _, v := range u {
				w.typed[i] = append(w.typed[i], uint64(v))
			}
		} else if tf.num == 10 {
			w.typed[i], err = f.appendFixed64s(w.typed[i])
		} else {
			w.typed[i], err = f.appendVarints(w.typed[i])
		}
		err = within(tf.name, err)
	}
	return err
}

// checkStrings checks that a STRING tensor of n elements has n strings and
// no other data.
func (w *tensorWire) checkStrings(t *Tensor, n int64) error {
	if w.hasRaw {
		return errorf("raw_data", "set in a STRING tensor")
	}
	for i, tf := range typedFields {
		if len(w.typed[i]) > 0 {
			return errorf(tf.name, "set in a STRING tensor")
		}
	}
	if int64(len(t.strs)) != n {
		return errorf("string_data", "%d strings for %d elements (dims %v)", len(t.strs), n, t.Dims)
	}
	return nil
}

// rawElements keeps raw_data as t's n elements.
func (d *decoder) rawElements(t *Tensor, w *tensorWire, n int64) error {
	for i, tf := range typedFields {
		if len(w.typed[i]) > 0 {
			return errorf(tf.name, "set along with raw_data")
		}
	}
	if want := t.DataType.rawLen(n); int64(len(w.raw)) != want {
		return errorf("raw_data", "%d bytes for %d elements of %v (dims %v), want %d",
			len(w.raw), n, t.DataType, t.Dims, want)
	}
	if err := d.charge(len(w.raw)); err != nil {
		return err
	}
	t.raw = append([]byte{}, w.raw...)
	return nil
}

// typedElements converts the typed field that holds t's type to its n
// elements, range-checked; the other typed fields must be empty.
func (d *decoder) typedElements(t *Tensor, w *tensorWire, n int64) error {
	held := -1 // the typed field that holds t's type
	for i, tf := range typedFields {
		if slices.Contains(tf.types, t.DataType) {
			held = i
		} else if len(w.typed[i]) > 0 {
			return errorf(tf.name, "set in a %v tensor", t.DataType)
		}
	}
	if held < 0 {
		return nil
	}
	tf, typed := typedFields[held], w.typed[held]
	size, values := t.DataType.Size(), n
	lo, hi := t.DataType.bounds()
	if t.DataType.Bits() < 8 { // packed: a value per byte
		size, values, lo, hi = 1, t.DataType.rawLen(n), 0, math.MaxUint8
	}
	if int64(len(typed)) != values {
		return errorf(tf.name, "%d values for %d elements (dims %v), want %d", len(typed), n, t.Dims, values)
	}
	if err := d.charge(int(values) * size); err != nil {
		return err
	}
	t.raw = make([]byte, 0, int(values)*size)
	for j, v := range typed {
		switch tf.num {
		case 5: // int32 on the wire, sign-extended to 64 bits
			if s := int64(v); s < lo || s > int64(hi) {
				return errorf(tf.name, "element %d = %d out of %v range", j, s, t.DataType)
			}
		case 11:
			if v > hi {
				return errorf(tf.name, "element %d = %d out of %v range", j, v, t.DataType)
			}
		}
		t.raw = appendLE(t.raw, v, size)
	}
	return nil
}
