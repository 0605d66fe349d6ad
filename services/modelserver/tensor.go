package modelserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// The protocol's datatype names ("Tensor Data Types" of the Open Inference
// Protocol) of the ONNX element types the server converts. FP16 and FP64
// have names but no conversion: the engine takes neither.
var protocolTypes = map[onnx.DataType]string{
	onnx.Bool: "BOOL", onnx.Uint8: "UINT8", onnx.Uint16: "UINT16", onnx.Uint32: "UINT32", onnx.Uint64: "UINT64",
	onnx.Int8: "INT8", onnx.Int16: "INT16", onnx.Int32: "INT32", onnx.Int64: "INT64",
	onnx.Float: "FP32", onnx.Float16: "FP16", onnx.Double: "FP64", onnx.String: "BYTES",
}

// datatypeName is the protocol's name of t.
func datatypeName(t onnx.DataType) string {
	if n, ok := protocolTypes[t]; ok {
		return n
	}
	return t.String()
}

// convertible reports whether tensors of type t can cross the protocol.
func convertible(t onnx.DataType) bool {
	return t == onnx.Float || t == onnx.String || (t.Size() > 0 && !t.IsFloat())
}

// maxNesting bounds how deeply "data" arrays nest: a tensor has at most
// onnx.MaxDims dimensions, and deeper input only costs the parser.
const maxNesting = onnx.MaxDims + 1

// jsonTensor turns the "data" of a $request_input, nested or flat, into a
// tensor of type dt and shape dims. Elements are coerced as the protocol
// allows a server to: numbers to the input's type (integers must be whole
// and in range), booleans only for BOOL, strings only for BYTES. Arrays of
// the right count of well-formed numbers are read by scanElements;
// anything else by encoding/json's tokens, for its errors.
func jsonTensor(name string, dt onnx.DataType, dims []int64, data json.RawMessage) (*onnx.Tensor, error) {
	if dt == onnx.String {
		// encoding/json would read bytes that are not UTF-8 as U+FFFD:
		// another string than the one sent.
		if !utf8.Valid(data) {
			return nil, fmt.Errorf("%w: input %q: BYTES data is not UTF-8: send such bytes as binary data", ErrBadRequest, name)
		}
		return tokenTensor(name, dt, dims, data)
	}
	if floats, ints, ok := scanElements(data, dt, elemCount(dims)); ok {
		return newTensor(name, dt, dims, floats, ints)
	}
	return tokenTensor(name, dt, dims, data)
}

// newTensor is the tensor of floats (FP32) or ints.
func newTensor(name string, dt onnx.DataType, dims []int64, floats []float32, ints []int64) (*onnx.Tensor, error) {
	if dt == onnx.Float {
		return onnx.NewFloat32(name, dims, floats), nil
	}
	t, err := onnx.NewInt(name, dt, dims, ints)
	if err != nil {
		return nil, fmt.Errorf("%w: input %q: %v", ErrBadRequest, name, err)
	}
	return t, nil
}

// tokenTensor is jsonTensor through encoding/json's tokens: slow (an
// allocation an element), but it names what is wrong with data.
func tokenTensor(name string, dt onnx.DataType, dims []int64, data json.RawMessage) (*onnx.Tensor, error) {
	n := elemCount(dims)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var floats []float32
	var ints []int64
	var uints []uint64 // UINT64's, all of its range
	var strs [][]byte  // BYTES'
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: input %q: data: %v", ErrBadRequest, name, err)
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '[' {
				depth++
			} else if v == ']' {
				depth--
			} else {
				return nil, fmt.Errorf("%w: input %q: data holds an object", ErrBadRequest, name)
			}
		case json.Number:
			if dt == onnx.Bool || dt == onnx.String {
				return nil, fmt.Errorf("%w: input %q: %s data holds the number %s", ErrBadRequest, name, datatypeName(dt), v)
			}
			switch dt {
			case onnx.Float:
				f, err := strconv.ParseFloat(string(v), 32)
				if err != nil {
					return nil, fmt.Errorf("%w: input %q: %s is not an FP32", ErrBadRequest, name, v)
				}
				floats = append(floats, float32(f))
			case onnx.Uint64:
				u, err := strconv.ParseUint(string(v), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%w: input %q: %s is not an integer of UINT64's range", ErrBadRequest, name, v)
				}
				uints = append(uints, u)
			default:
				i, err := strconv.ParseInt(string(v), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("%w: input %q: %s is not an integer of int64's range", ErrBadRequest, name, v)
				}
				ints = append(ints, i)
			}
		case bool:
			if dt != onnx.Bool {
				return nil, fmt.Errorf("%w: input %q: %s data holds a boolean", ErrBadRequest, name, datatypeName(dt))
			}
			ints = append(ints, map[bool]int64{false: 0, true: 1}[v])
		case string:
			if dt != onnx.String {
				want := "a number"
				if dt == onnx.Bool {
					want = "a boolean"
				}
				return nil, fmt.Errorf("%w: input %q: %s data holds the string %q, not %s", ErrBadRequest, name, datatypeName(dt), v, want)
			}
			strs = append(strs, []byte(v))
		default:
			return nil, fmt.Errorf("%w: input %q: data holds %v, not a number", ErrBadRequest, name, tok)
		}
		if depth == 0 {
			break
		}
		if depth > maxNesting {
			return nil, fmt.Errorf("%w: input %q: data nests deeper than %d", ErrBadRequest, name, maxNesting)
		}
		if int64(len(floats)+len(ints)+len(uints)+len(strs)) > n {
			return nil, fmt.Errorf("%w: input %q: more than the %d elements of shape %v", ErrBadRequest, name, n, dims)
		}
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: input %q: data is not one array", ErrBadRequest, name)
	}
	if got := int64(len(floats) + len(ints) + len(uints) + len(strs)); got != n {
		return nil, fmt.Errorf("%w: input %q: %d elements for shape %v, which holds %d", ErrBadRequest, name, got, dims, n)
	}
	switch dt {
	case onnx.Uint64:
		return onnx.NewUint64(name, dims, uints)
	case onnx.String:
		return onnx.NewString(name, dims, strs)
	}
	return newTensor(name, dt, dims, floats, ints)
}

// binaryTensor turns the binary tensor data extension's bytes of an input
// (little-endian, row-major, BOOL one byte of 0 or 1, BYTES each element's
// length in 4 bytes before it) into a tensor. The wire's layout is onnx's
// raw data: but for BOOL, whose values are checked, and BYTES, which onnx
// copies, the tensor keeps b itself, without a copy, so b must not change
// while the tensor is in use (the request's body is not reused).
func binaryTensor(name string, dt onnx.DataType, dims []int64, b []byte) (*onnx.Tensor, error) {
	if dt == onnx.String {
		return binaryStrings(name, dims, b)
	}
	size := dt.Size()
	if n := elemCount(dims); int64(len(b)) != n*int64(size) {
		return nil, fmt.Errorf("%w: input %q: %d bytes of binary data, but shape %v of %s takes %d bytes",
			ErrBadRequest, name, len(b), dims, datatypeName(dt), n*int64(size))
	}
	if dt != onnx.Bool {
		t, err := onnx.NewRaw(name, dt, dims, b)
		if err != nil {
			return nil, fmt.Errorf("%w: input %q: %v", ErrBadRequest, name, err)
		}
		return t, nil
	}
	v := make([]int64, len(b))
	for i := range v {
		v[i] = int64(b[i])
	}
	t, err := onnx.NewInt(name, dt, dims, v)
	if err != nil {
		return nil, fmt.Errorf("%w: input %q: %v", ErrBadRequest, name, err)
	}
	return t, nil
}

// binaryStrings reads BYTES binary data: elements in row-major order, each
// a 4-byte little-endian length and as many bytes.
func binaryStrings(name string, dims []int64, b []byte) (*onnx.Tensor, error) {
	n := elemCount(dims)
	if n > int64(len(b))/4 {
		return nil, fmt.Errorf("%w: input %q: %d bytes of binary data cannot hold the %d lengths of shape %v",
			ErrBadRequest, name, len(b), n, dims)
	}
	strs := make([][]byte, n)
	off := 0
	for i := range strs {
		if len(b)-off < 4 {
			return nil, fmt.Errorf("%w: input %q: binary data ends at byte %d, before element %d's length", ErrBadRequest, name, off, i)
		}
		size := binary.LittleEndian.Uint32(b[off:])
		off += 4
		if uint64(size) > uint64(len(b)-off) {
			return nil, fmt.Errorf("%w: input %q: element %d is %d bytes long, but %d bytes are left at byte %d",
				ErrBadRequest, name, i, size, len(b)-off, off)
		}
		strs[i] = b[off : off+int(size)]
		off += int(size)
	}
	if off != len(b) {
		return nil, fmt.Errorf("%w: input %q: %d bytes of binary data after its %d elements", ErrBadRequest, name, len(b)-off, n)
	}
	return onnx.NewString(name, dims, strs)
}

// elemCount is the number of elements of a shape whose dimensions were
// checked against onnx's limits.
func elemCount(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

// tensorBytes is t's data as the binary tensor data extension sends it:
// onnx's raw data, which it is not a copy of, or BYTES' lengths and bytes.
func tensorBytes(t *onnx.Tensor) ([]byte, error) {
	if t.DataType == onnx.String {
		strs, err := t.Strings()
		if err != nil {
			return nil, err
		}
		n := 4 * len(strs)
		for _, s := range strs {
			n += len(s)
		}
		b := make([]byte, 0, n)
		for _, s := range strs {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
			b = append(b, s...)
		}
		return b, nil
	}
	if want := t.Len() * int64(t.DataType.Size()); t.DataType.Size() == 0 || int64(len(t.RawData())) != want {
		return nil, fmt.Errorf("tensor %q: %d bytes of %v data for shape %v", t.Name, len(t.RawData()), t.DataType, t.Dims)
	}
	return t.RawData(), nil
}
