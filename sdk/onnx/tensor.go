package onnx

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// Limits on tensors, so that a hostile or corrupt file cannot make the
// decoder or its callers allocate without bound.
const (
	MaxDims  = 8       // dimensions of a tensor
	MaxElems = 1 << 31 // elements of a tensor
)

// DataType is the element type of a tensor (TensorProto.DataType).
type DataType int32

// The element types this package decodes; the values are onnx.proto's.
const (
	Float   DataType = 1
	Uint8   DataType = 2
	Int8    DataType = 3
	Uint16  DataType = 4
	Int16   DataType = 5
	Int32   DataType = 6
	Int64   DataType = 7
	String  DataType = 8
	Bool    DataType = 9
	Float16 DataType = 10
	Double  DataType = 11
	Uint32  DataType = 12
	Uint64  DataType = 13
	// 14 and 15 are the complex types, which this package does not read.
	Bfloat16       DataType = 16
	Float8E4M3FN   DataType = 17
	Float8E4M3FNUZ DataType = 18
	Float8E5M2     DataType = 19
	Float8E5M2FNUZ DataType = 20
	Uint4          DataType = 21
	Int4           DataType = 22
	Float4E2M1     DataType = 23
	Float8E8M0     DataType = 24
	Uint2          DataType = 25
	Int2           DataType = 26
)

var typeNames = [...]string{
	Float: "FLOAT", Uint8: "UINT8", Int8: "INT8", Uint16: "UINT16", Int16: "INT16",
	Int32: "INT32", Int64: "INT64", String: "STRING", Bool: "BOOL", Float16: "FLOAT16",
	Double: "DOUBLE", Uint32: "UINT32", Uint64: "UINT64", Bfloat16: "BFLOAT16",
	Float8E4M3FN: "FLOAT8E4M3FN", Float8E4M3FNUZ: "FLOAT8E4M3FNUZ", Float8E5M2: "FLOAT8E5M2",
	Float8E5M2FNUZ: "FLOAT8E5M2FNUZ", Uint4: "UINT4", Int4: "INT4", Float4E2M1: "FLOAT4E2M1", Float8E8M0: "FLOAT8E8M0", Uint2: "UINT2", Int2: "INT2",
}

// String returns onnx.proto's name of the type, e.g. FLOAT, or the number of
// a type this package does not know.
func (t DataType) String() string {
	if t > 0 && int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return "DataType(" + strconv.Itoa(int(t)) + ")"
}

// Size returns the size in bytes of an element in raw_data, or 0 for STRING,
// the types of fewer than 8 bits (see Bits) and unknown types.
func (t DataType) Size() int {
	switch t {
	case Uint8, Int8, Bool, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0:
		return 1
	case Uint16, Int16, Float16, Bfloat16:
		return 2
	case Float, Int32, Uint32:
		return 4
	case Int64, Double, Uint64:
		return 8
	}
	return 0
}

// Bits returns the size in bits of an element, or 0 for STRING and unknown
// types. The 4- and 2-bit types (FLOAT4E2M1 too) are packed in raw_data as
// ONNX packs them: the first element in the lowest bits of a byte, a last
// byte padded.
func (t DataType) Bits() int {
	switch t {
	case Uint4, Int4, Float4E2M1:
		return 4
	case Uint2, Int2:
		return 2
	}
	return 8 * t.Size()
}

// rawLen returns the bytes n elements of t take in raw_data.
func (t DataType) rawLen(n int64) int64 { return (n*int64(t.Bits()) + 7) / 8 }

// IsFloat reports whether t is a floating-point type this package decodes.
func (t DataType) IsFloat() bool {
	_, narrow := minifloatOf(t)
	return t == Float || t == Double || t == Float8E8M0 || narrow
}

// integer reports whether Int64s accepts tensors of type t.
func (t DataType) integer() bool {
	switch t {
	case Uint8, Int8, Uint16, Int16, Int32, Int64, Bool, Uint32, Uint64, Uint4, Int4, Uint2, Int2:
		return true
	}
	return false
}

// bounds returns the range of values of integer type t.
func (t DataType) bounds() (lo int64, hi uint64) {
	switch t {
	case Bool:
		return 0, 1
	case Uint8:
		return 0, math.MaxUint8
	case Int8:
		return math.MinInt8, math.MaxInt8
	case Uint16, Float16: // Float16 is stored as its bits in int32_data
		return 0, math.MaxUint16
	case Int16:
		return math.MinInt16, math.MaxInt16
	case Int32:
		return math.MinInt32, math.MaxInt32
	case Uint32:
		return 0, math.MaxUint32
	case Uint64:
		return 0, math.MaxUint64
	case Uint4, Float4E2M1:
		return 0, 15
	case Int4:
		return -8, 7
	case Uint2:
		return 0, 3
	case Int2:
		return -2, 1
	case Bfloat16:
		return 0, math.MaxUint16
	case Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0:
		return 0, math.MaxUint8
	}
	return math.MinInt64, math.MaxInt64
}

// Tensor is a dense tensor. Its data is kept as onnx's raw_data would hold
// it: elements in row-major order, little-endian, of DataType.Size() bytes
// each (packed for the 4- and 2-bit types, see Bits); STRING tensors keep
// their strings.
type Tensor struct {
	Name     string
	DataType DataType
	Dims     []int64 // empty for a scalar

	raw  []byte
	strs [][]byte
}

// Len returns the number of elements, the product of Dims (1 for a scalar).
func (t *Tensor) Len() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// elems returns the number of elements after checking the dims against the
// limits; the product cannot overflow since each partial product is checked.
func elems(dims []int64) (int64, error) {
	if len(dims) > MaxDims {
		return 0, fmt.Errorf("%d dims, more than %d", len(dims), MaxDims)
	}
	n := int64(1)
	for i, d := range dims {
		if d < 0 {
			return 0, fmt.Errorf("dims[%d] = %d is negative", i, d)
		}
		if d > 0 && n > MaxElems/d {
			return 0, fmt.Errorf("dims %v: more than %d elements", dims, int64(MaxElems))
		}
		n *= d
	}
	return n, nil
}

// check verifies that t's data matches its dims and type. Decoded tensors
// always pass; constructed ones may not.
func (t *Tensor) check() error {
	n, err := elems(t.Dims)
	if err != nil {
		return fmt.Errorf("onnx: tensor %q: %v", t.Name, err)
	}
	if t.DataType == String {
		if int64(len(t.strs)) != n {
			return fmt.Errorf("onnx: tensor %q: %d strings for %d elements", t.Name, len(t.strs), n)
		}
		return nil
	}
	if t.DataType.Bits() == 0 {
		return fmt.Errorf("onnx: tensor %q: unsupported data type %v", t.Name, t.DataType)
	}
	if int64(len(t.raw)) != t.DataType.rawLen(n) {
		return fmt.Errorf("onnx: tensor %q: %d bytes of data for %d elements of %v", t.Name, len(t.raw), n, t.DataType)
	}
	return nil
}

// Float32s returns the elements of a tensor of a floating-point type as
// float32: exactly for FLOAT and the narrow types (FLOAT16, BFLOAT16,
// float8), rounded to nearest even for DOUBLE.
func (t *Tensor) Float32s() ([]float32, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	switch t.DataType {
	case Float:
		v := make([]float32, len(t.raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.raw[4*i:]))
		}
		return v, nil
	case Double:
		v := make([]float32, len(t.raw)/8)
		for i := range v {
			v[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(t.raw[8*i:])))
		}
		return v, nil
	}
	if t.DataType == Float8E8M0 {
		v := make([]float32, len(t.raw))
		for i, b := range t.raw {
			v[i] = decodeE8M0(b)
		}
		return v, nil
	}
	if f, ok := minifloatOf(t.DataType); ok {
		v := make([]float32, t.Len())
		for i := range v {
			v[i] = f.decode(t.bitsAt(i))
		}
		return v, nil
	}
	return nil, fmt.Errorf("onnx: tensor %q: %v is not a floating-point type", t.Name, t.DataType)
}

// Float64s returns the elements of a DOUBLE tensor, or of another
// floating-point type's as Float32s does.
func (t *Tensor) Float64s() ([]float64, error) {
	if t.DataType != Double {
		f, err := t.Float32s()
		if err != nil {
			return nil, err
		}
		v := make([]float64, len(f))
		for i, x := range f {
			v[i] = float64(x)
		}
		return v, nil
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	v := make([]float64, len(t.raw)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.raw[8*i:]))
	}
	return v, nil
}

// bitsAt is the bit pattern of element i of a narrow type's tensor.
func (t *Tensor) bitsAt(i int) uint32 {
	if bits := t.DataType.Bits(); bits < 8 {
		pos := i * bits
		return uint32(t.raw[pos/8]>>(pos%8)) & (1<<bits - 1)
	}
	size := t.DataType.Size()
	return uint32(readLE(t.raw[size*i:], size))
}

func readLE(b []byte, size int) uint64 {
	var u uint64
	for k := size - 1; k >= 0; k-- {
		u = u<<8 | uint64(b[k])
	}
	return u
}

// Int64s returns the elements of a tensor of an integer type or BOOL (as 0
// and 1). A UINT64 element above math.MaxInt64 is an error.
func (t *Tensor) Int64s() ([]int64, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if !t.DataType.integer() {
		return nil, fmt.Errorf("onnx: tensor %q: %v is not an integer type", t.Name, t.DataType)
	}
	if bits := t.DataType.Bits(); bits < 8 {
		return t.unpack(bits), nil
	}
	size := t.DataType.Size()
	v := make([]int64, len(t.raw)/size)
	for i := range v {
		b := t.raw[size*i:]
		switch t.DataType {
		case Bool:
			if b[0] != 0 {
				v[i] = 1
			}
		case Uint8:
			v[i] = int64(b[0])
		case Int8:
			v[i] = int64(int8(b[0]))
		case Uint16:
			v[i] = int64(binary.LittleEndian.Uint16(b))
		case Int16:
			v[i] = int64(int16(binary.LittleEndian.Uint16(b)))
		case Uint32:
			v[i] = int64(binary.LittleEndian.Uint32(b))
		case Int32:
			v[i] = int64(int32(binary.LittleEndian.Uint32(b)))
		case Int64:
			v[i] = int64(binary.LittleEndian.Uint64(b))
		case Uint64:
			u := binary.LittleEndian.Uint64(b)
			if u > math.MaxInt64 {
				return nil, fmt.Errorf("onnx: tensor %q: element %d = %d overflows int64", t.Name, i, u)
			}
			v[i] = int64(u)
		}
	}
	return v, nil
}

// unpack returns the elements of a 4- or 2-bit tensor, sign-extended for
// INT4 and INT2.
func (t *Tensor) unpack(bits int) []int64 {
	v := make([]int64, t.Len())
	lo, _ := t.DataType.bounds()
	mask := byte(1<<bits - 1)
	for i := range v {
		pos := i * bits
		u := int64(t.raw[pos/8] >> (pos % 8) & mask)
		if lo < 0 && u >= 1<<(bits-1) {
			u -= 1 << bits
		}
		v[i] = u
	}
	return v
}

// NewFloat32 returns a FLOAT tensor holding a copy of data. EncodeTensor and
// the accessors report an error if len(data) is not the product of dims.
func NewFloat32(name string, dims []int64, data []float32) *Tensor {
	raw := make([]byte, 0, 4*len(data))
	for _, f := range data {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(f))
	}
	return &Tensor{Name: name, DataType: Float, Dims: append([]int64{}, dims...), raw: raw}
}

// NewRaw returns a tensor of type dt and dims whose data is raw, laid out
// as onnx's raw_data holds it (row-major, little-endian, DataType.Size()
// bytes an element). raw is kept, not copied, so that data read off the
// wire becomes a tensor without a pass over it: the caller must not change
// it afterwards. STRING is refused, as is a length that is not the dims'.
func NewRaw(name string, dt DataType, dims []int64, raw []byte) (*Tensor, error) {
	if dt == String {
		return nil, fmt.Errorf("onnx: tensor %q: STRING data is not raw", name)
	}
	t := &Tensor{Name: name, DataType: dt, Dims: append([]int64{}, dims...), raw: raw}
	if err := t.check(); err != nil {
		return nil, err
	}
	return t, nil
}

// RawData returns t's data as onnx's raw_data holds it (nil for STRING),
// not a copy: the caller must not change it.
func (t *Tensor) RawData() []byte { return t.raw }

// NewInt returns a tensor of integer type dt (or BOOL) holding data, each
// element of which must be in dt's range, and whose length must be the
// product of dims.
func NewInt(name string, dt DataType, dims []int64, data []int64) (*Tensor, error) {
	if !dt.integer() {
		return nil, fmt.Errorf("onnx: tensor %q: %v is not an integer type", name, dt)
	}
	n, err := elems(dims)
	if err != nil {
		return nil, fmt.Errorf("onnx: tensor %q: %v", name, err)
	}
	if int64(len(data)) != n {
		return nil, fmt.Errorf("onnx: tensor %q: %d elements for dims %v", name, len(data), dims)
	}
	lo, hi := dt.bounds()
	bits := dt.Bits()
	raw := make([]byte, 0, dt.rawLen(n))
	for i, v := range data {
		if v < lo || (v > 0 && uint64(v) > hi) {
			return nil, fmt.Errorf("onnx: tensor %q: element %d = %d out of %v range", name, i, v, dt)
		}
		if bits < 8 {
			pos := i * bits
			if pos%8 == 0 {
				raw = append(raw, 0)
			}
			raw[pos/8] |= byte(v&(1<<bits-1)) << (pos % 8)
			continue
		}
		raw = appendLE(raw, uint64(v), dt.Size())
	}
	return &Tensor{Name: name, DataType: dt, Dims: append([]int64{}, dims...), raw: raw}, nil
}

// NewUint64 returns a UINT64 tensor holding data, whose length must be the
// product of dims: every uint64 is a UINT64 value, where NewInt's int64s
// stop at 2⁶³ − 1.
func NewUint64(name string, dims []int64, data []uint64) (*Tensor, error) {
	n, err := elems(dims)
	if err != nil {
		return nil, fmt.Errorf("onnx: tensor %q: %v", name, err)
	}
	if int64(len(data)) != n {
		return nil, fmt.Errorf("onnx: tensor %q: %d elements for dims %v", name, len(data), dims)
	}
	raw := make([]byte, 0, 8*len(data))
	for _, v := range data {
		raw = binary.LittleEndian.AppendUint64(raw, v)
	}
	return &Tensor{Name: name, DataType: Uint64, Dims: append([]int64{}, dims...), raw: raw}, nil
}

// Uint64s returns the elements of a UINT64 tensor, all of its range, where
// Int64s refuses those beyond int64's.
func (t *Tensor) Uint64s() ([]uint64, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if t.DataType != Uint64 {
		return nil, fmt.Errorf("onnx: tensor %q: %v is not UINT64", t.Name, t.DataType)
	}
	v := make([]uint64, len(t.raw)/8)
	for i := range v {
		v[i] = binary.LittleEndian.Uint64(t.raw[8*i:])
	}
	return v, nil
}

// NewString returns a STRING tensor holding a copy of data, whose length
// must be the product of dims. Strings are bytes, as onnx's string_data
// holds them: UTF-8 is not required.
func NewString(name string, dims []int64, data [][]byte) (*Tensor, error) {
	n, err := elems(dims)
	if err != nil {
		return nil, fmt.Errorf("onnx: tensor %q: %v", name, err)
	}
	if int64(len(data)) != n {
		return nil, fmt.Errorf("onnx: tensor %q: %d elements for dims %v", name, len(data), dims)
	}
	strs := make([][]byte, len(data))
	for i, s := range data {
		strs[i] = append([]byte{}, s...)
	}
	return &Tensor{Name: name, DataType: String, Dims: append([]int64{}, dims...), strs: strs}, nil
}

// Strings returns the elements of a STRING tensor, not copies: the caller
// must not change them.
func (t *Tensor) Strings() ([][]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if t.DataType != String {
		return nil, fmt.Errorf("onnx: tensor %q: %v is not STRING", t.Name, t.DataType)
	}
	return t.strs, nil
}

// NewFloat returns a tensor of floating-point type dt holding data
// converted as ONNX's Cast from FLOAT converts: exactly to FLOAT, to
// DOUBLE, and to the narrow types rounded to nearest even, a value beyond
// the type's largest finite one becoming that value (saturate, the Cast
// default, for the float8 types only) or infinity or NaN (see minifloat's
// encode); to FLOAT8E8M0 rounded up (see NewFloatRounded). The length of
// data must be the product of dims.
func NewFloat(name string, dt DataType, dims []int64, data []float32, saturate bool) (*Tensor, error) {
	return NewFloatRounded(name, dt, dims, data, saturate, "up")
}

// NewFloatRounded is NewFloat with Cast's round_mode for FLOAT8E8M0 ("up",
// "down" or "nearest"; see encodeE8M0), which the other types ignore.
func NewFloatRounded(name string, dt DataType, dims []int64, data []float32, saturate bool, roundMode string) (*Tensor, error) {
	n, err := elems(dims)
	if err != nil {
		return nil, fmt.Errorf("onnx: tensor %q: %v", name, err)
	}
	if int64(len(data)) != n {
		return nil, fmt.Errorf("onnx: tensor %q: %d elements for dims %v", name, len(data), dims)
	}
	switch dt {
	case Float:
		return NewFloat32(name, dims, data), nil
	case Double:
		raw := make([]byte, 0, 8*len(data))
		for _, f := range data {
			raw = binary.LittleEndian.AppendUint64(raw, math.Float64bits(float64(f)))
		}
		return &Tensor{Name: name, DataType: dt, Dims: append([]int64{}, dims...), raw: raw}, nil
	}
	if dt == Float8E8M0 {
		raw := make([]byte, len(data))
		for i, x := range data {
			b, err := encodeE8M0(x, saturate, roundMode)
			if err != nil {
				return nil, fmt.Errorf("onnx: tensor %q: %v", name, err)
			}
			raw[i] = b
		}
		return &Tensor{Name: name, DataType: dt, Dims: append([]int64{}, dims...), raw: raw}, nil
	}
	f, ok := minifloatOf(dt)
	if !ok {
		return nil, fmt.Errorf("onnx: tensor %q: %v is not a floating-point type", name, dt)
	}
	saturate = saturate && f.bits() == 8 // FLOAT16 and BFLOAT16 overflow to infinity
	raw := make([]byte, 0, dt.rawLen(n))
	for i, x := range data {
		b := f.encode(x, saturate)
		if bits := dt.Bits(); bits < 8 {
			pos := i * bits
			if pos%8 == 0 {
				raw = append(raw, 0)
			}
			raw[pos/8] |= byte(b) << (pos % 8)
			continue
		}
		raw = appendLE(raw, uint64(b), dt.Size())
	}
	return &Tensor{Name: name, DataType: dt, Dims: append([]int64{}, dims...), raw: raw}, nil
}

// appendLE appends the size low bytes of v, little-endian.
func appendLE(b []byte, v uint64, size int) []byte {
	for range size {
		b = append(b, byte(v))
		v >>= 8
	}
	return b
}
