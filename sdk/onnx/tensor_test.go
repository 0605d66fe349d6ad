package onnx

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDecodeTensor(t *testing.T) {
	f32 := func(vs ...float32) []uint64 {
		u := make([]uint64, len(vs))
		for i, v := range vs {
			u[i] = uint64(math.Float32bits(v))
		}
		return u
	}
	for _, tc := range []struct {
		name   string
		in     pb
		dt     DataType
		floats []float32
		ints   []int64
	}{
		{"float packed", tensorPB("x", Float, 2, 2).floats(tFloatData, true, 1, -2, 3.5, 0), Float, []float32{1, -2, 3.5, 0}, nil},
		{"float unpacked", tensorPB("x", Float, 2, 2).floats(tFloatData, false, 1, -2, 3.5, 0), Float, []float32{1, -2, 3.5, 0}, nil},
		{"float raw", tensorPB("x", Float, 2, 2).bytes(tRawData, le(4, f32(1, -2, 3.5, 0)...)), Float, []float32{1, -2, 3.5, 0}, nil},
		{"float scalar", tensorPB("x", Float).floats(tFloatData, true, 7), Float, []float32{7}, nil},
		{"float empty", tensorPB("x", Float, 3, 0), Float, []float32{}, nil},
		{"double", tensorPB("x", Double, 2).double(tDoubleData, 0.5).double(tDoubleData, -1e10), Double, []float32{0.5, -1e10}, nil},
		{"double raw", tensorPB("x", Double, 1).bytes(tRawData, le(8, math.Float64bits(2.25))), Double, []float32{2.25}, nil},
		{"int64 packed", tensorPB("x", Int64, 3).ints(tInt64Data, true, -1, 0, math.MaxInt64), Int64, nil, []int64{-1, 0, math.MaxInt64}},
		{"int64 unpacked", tensorPB("x", Int64, 3).ints(tInt64Data, false, -1, 0, math.MinInt64), Int64, nil, []int64{-1, 0, math.MinInt64}},
		{"int64 raw", tensorPB("x", Int64, 2).bytes(tRawData, le(8, math.MaxUint64, 5)), Int64, nil, []int64{-1, 5}},
		{"int32 packed", tensorPB("x", Int32, 2).ints(tInt32Data, true, -7, math.MaxInt32), Int32, nil, []int64{-7, math.MaxInt32}},
		{"int32 raw", tensorPB("x", Int32, 2).bytes(tRawData, le(4, 0xffffffff, 9)), Int32, nil, []int64{-1, 9}},
		{"int16 raw", tensorPB("x", Int16, 2).bytes(tRawData, le(2, 0x8000, 9)), Int16, nil, []int64{math.MinInt16, 9}},
		{"uint16 raw", tensorPB("x", Uint16, 1).bytes(tRawData, le(2, 0xffff)), Uint16, nil, []int64{65535}},
		{"int8 int32_data", tensorPB("x", Int8, 3).ints(tInt32Data, false, -128, 0, 127), Int8, nil, []int64{-128, 0, 127}},
		{"int8 raw", tensorPB("x", Int8, 2).bytes(tRawData, []byte{0x80, 0x7f}), Int8, nil, []int64{-128, 127}},
		{"uint8 int32_data", tensorPB("x", Uint8, 2).ints(tInt32Data, true, 0, 255), Uint8, nil, []int64{0, 255}},
		{"uint8 raw", tensorPB("x", Uint8, 3).bytes(tRawData, []byte{0, 128, 255}), Uint8, nil, []int64{0, 128, 255}},
		{"bool raw", tensorPB("x", Bool, 2).bytes(tRawData, []byte{1, 0}), Bool, nil, []int64{1, 0}},
		{"uint32 uint64_data", tensorPB("x", Uint32, 1).ints(tUint64Data, true, math.MaxUint32), Uint32, nil, []int64{math.MaxUint32}},
		{"uint32 raw", tensorPB("x", Uint32, 1).bytes(tRawData, le(4, math.MaxUint32)), Uint32, nil, []int64{math.MaxUint32}},
		{"uint64 raw", tensorPB("x", Uint64, 1).bytes(tRawData, le(8, 1<<40)), Uint64, nil, []int64{1 << 40}},
		{"float16 int32_data", tensorPB("x", Float16, 3).ints(tInt32Data, true, 0x3c00, 0xc000, 0x0001), Float16, []float32{1, -2, 0x1p-24}, nil},
		{"bfloat16 raw", tensorPB("x", Bfloat16, 2).bytes(tRawData, le(2, 0x3f80, 0xff80)), Bfloat16, []float32{1, float32(math.Inf(-1))}, nil},
		{"float8e4m3fn raw", tensorPB("x", Float8E4M3FN, 3).bytes(tRawData, []byte{0x7e, 0x01, 0xb8}), Float8E4M3FN, []float32{448, 0x1p-9, -1}, nil},
		{"float8e4m3fnuz int32_data", tensorPB("x", Float8E4M3FNUZ, 2).ints(tInt32Data, true, 0x7f, 0x40), Float8E4M3FNUZ, []float32{240, 1}, nil},
		{"float8e5m2 raw", tensorPB("x", Float8E5M2, 2).bytes(tRawData, []byte{0x7b, 0x7c}), Float8E5M2, []float32{57344, float32(math.Inf(1))}, nil},
		{"float8e5m2fnuz raw", tensorPB("x", Float8E5M2FNUZ, 1).bytes(tRawData, []byte{0x40}), Float8E5M2FNUZ, []float32{1}, nil},
		{"float4e2m1 raw", tensorPB("x", Float4E2M1, 3).bytes(tRawData, []byte{0xf7, 0x01}), Float4E2M1, []float32{6, -6, 0.5}, nil},
		{"float8e8m0 raw", tensorPB("x", Float8E8M0, 4).bytes(tRawData, []byte{0x7f, 0x80, 0x7c, 0}), Float8E8M0, []float32{1, 2, 0.125, 0x1p-127}, nil},
		{"int4 raw", tensorPB("x", Int4, 3).bytes(tRawData, []byte{0x87, 0x0f}), Int4, nil, []int64{7, -8, -1}},
		{"uint4 int32_data", tensorPB("x", Uint4, 3).ints(tInt32Data, true, 0xf1, 0x02), Uint4, nil, []int64{1, 15, 2}},
		{"int2 raw", tensorPB("x", Int2, 5).bytes(tRawData, []byte{0b11100100, 0b01}), Int2, nil, []int64{0, 1, -2, -1, 1}},
		{"uint2 int32_data", tensorPB("x", Uint2, 4).ints(tInt32Data, true, 0b11100100), Uint2, nil, []int64{0, 1, 2, 3}},
		{"unknown fields", tensorPB("x", Float, 1).str(99, "future").double(98, 1).float(tFloatData, 4).varint(1000, 3), Float, []float32{4}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := DecodeTensor(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if x.Name != "x" || x.DataType != tc.dt {
				t.Errorf("name %q type %v, want x %v", x.Name, x.DataType, tc.dt)
			}
			fs, ferr := x.Float32s()
			is, ierr := x.Int64s()
			if tc.floats != nil {
				if ferr != nil || !slices.Equal(fs, tc.floats) {
					t.Errorf("Float32s = %v, %v; want %v", fs, ferr, tc.floats)
				}
				if ierr == nil {
					t.Errorf("Int64s of %v: no error", tc.dt)
				}
				if x.Len() != int64(len(tc.floats)) {
					t.Errorf("Len = %d, want %d", x.Len(), len(tc.floats))
				}
			}
			if tc.ints != nil {
				if ierr != nil || !slices.Equal(is, tc.ints) {
					t.Errorf("Int64s = %v, %v; want %v", is, ierr, tc.ints)
				}
				if ferr == nil || !strings.Contains(ferr.Error(), `"x"`) {
					t.Errorf("Float32s of %v: error %v, want one naming the tensor", tc.dt, ferr)
				}
				if x.Len() != int64(len(tc.ints)) {
					t.Errorf("Len = %d, want %d", x.Len(), len(tc.ints))
				}
			}
		})
	}
}

// TestFloatDataRawEquivalence checks that float_data and raw_data holding the
// same values decode to the same tensor.
func TestFloatDataRawEquivalence(t *testing.T) {
	vs := []float32{0, 1, -1, float32(math.Pi), math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Inf(-1))}
	var raw []byte
	for _, v := range vs {
		raw = appendLE(raw, uint64(math.Float32bits(v)), 4)
	}
	a, err := DecodeTensor(tensorPB("w", Float, 7).floats(tFloatData, true, vs...))
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodeTensor(tensorPB("w", Float, 7).bytes(tRawData, raw))
	if err != nil {
		t.Fatal(err)
	}
	af, _ := a.Float32s()
	bf, _ := b.Float32s()
	if !slices.Equal(af, bf) || !slices.Equal(af, vs) {
		t.Errorf("float_data %v, raw_data %v, want %v", af, bf, vs)
	}
	ea, _ := EncodeTensor(a)
	eb, _ := EncodeTensor(b)
	if string(ea) != string(eb) {
		t.Error("encodings differ")
	}
}

func TestDecodeTensorErrors(t *testing.T) {
	long := pb{}
	for range 9 {
		long = long.int(tDims, 1)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want string // in the message
	}{
		{"raw too short", tensorPB("x", Float, 2, 2).bytes(tRawData, make([]byte, 12)), `tensor "x".raw_data: 12 bytes for 4 elements`},
		{"raw too long", tensorPB("x", Int64, 1).bytes(tRawData, make([]byte, 9)), "raw_data: 9 bytes for 1 elements"},
		{"float_data short", tensorPB("x", Float, 3).floats(tFloatData, true, 1, 2), "float_data: 2 values for 3 elements"},
		{"int64_data long", tensorPB("x", Int64, 1).ints(tInt64Data, false, 1, 2), "int64_data: 2 values for 1 elements"},
		{"no data", tensorPB("x", Float, 1), "float_data: 0 values for 1 elements"},
		{"wrong field", tensorPB("x", Float, 1).ints(tInt64Data, true, 1), "int64_data: set in a FLOAT tensor"},
		{"raw and typed", tensorPB("x", Float, 1).floats(tFloatData, true, 1).bytes(tRawData, make([]byte, 4)), "float_data: set along with raw_data"},
		{"uint8 range", tensorPB("x", Uint8, 1).ints(tInt32Data, true, 256), "int32_data: element 0 = 256 out of UINT8 range"},
		{"int8 range", tensorPB("x", Int8, 1).ints(tInt32Data, true, -129), "out of INT8 range"},
		{"uint32 range", tensorPB("x", Uint32, 1).ints(tUint64Data, true, 1<<32), "out of UINT32 range"},
		{"external data", tensorPB("x", Float, 1).msg(tExternalData, pb{}.str(1, "location").str(2, "w.bin")), `tensor "x": external data is not supported`},
		{"data location", tensorPB("x", Float, 1).int(tDataLocation, 1), "external data is not supported"},
		{"segment", tensorPB("x", Float, 1).msg(tSegment, pb{}.int(1, 0)), "segmented tensors"},
		{"negative dim", tensorPB("x", Float, 2, -1), "dims[1] = -1 is negative"},
		{"too many dims", long.int(tDataType, 1), "dims: more than 8 dims"},
		{"too many elements", tensorPB("x", Uint8, 1<<16, 1<<16), "more than 2147483648 elements"},
		{"overflowing dims", tensorPB("x", Uint8, 1<<62, 1<<62, 4), "more than 2147483648 elements"},
		{"undefined type", pb{}.str(tName, "x").bytes(tRawData, nil), "data_type: DataType(0) is not supported"},
		{"complex64", tensorPB("x", 14, 1).bytes(tRawData, make([]byte, 8)), "DataType(14) is not supported"},
		{"int4 raw short", tensorPB("x", Int4, 3).bytes(tRawData, []byte{0x21}), "raw_data: 1 bytes for 3 elements of INT4 (dims [3]), want 2"},
		{"int4 int32_data unpacked", tensorPB("x", Int4, 2).ints(tInt32Data, true, 1, 2), "int32_data: 2 values for 2 elements (dims [2]), want 1"},
		{"uint2 int32_data over a byte", tensorPB("x", Uint2, 4).ints(tInt32Data, true, 256), "int32_data: element 0 = 256 out of UINT2 range"},
		{"float8 int32_data over a byte", tensorPB("x", Float8E5M2, 1).ints(tInt32Data, true, 0x100), "int32_data: element 0 = 256 out of FLOAT8E5M2 range"},
		{"string raw", tensorPB("x", String, 1).bytes(tRawData, []byte("a")), "raw_data: set in a STRING tensor"},
		{"truncated varint", pb{}.str(tName, "x").bytes(tDims, []byte{0x80}), "dims: truncated varint at byte 5"},
		{"truncated message", trunc(tensorPB("x", Float, 1).bytes(tRawData, make([]byte, 4)), 2), "truncated length-delimited field"},
		{"truncated tag", []byte{0x80}, "truncated tag at byte 0"},
		{"wrong wire type", pb{}.int(tName, 3), "name: varint at byte 1, want length-delimited field"},
		{"packed floats", pb{}.bytes(tFloatData, []byte{1, 2, 3}), "float_data: packed fixed32 of 3 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := DecodeTensor(tc.in)
			if err == nil {
				t.Fatalf("decoded %+v", x)
			}
			if !errors.Is(err, ErrFormat) {
				t.Errorf("%v does not wrap ErrFormat", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestAccessorErrors(t *testing.T) {
	s, err := DecodeTensor(tensorPB("s", String, 2).str(tStringData, "a").str(tStringData, "bc"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Float32s(); err == nil {
		t.Error("Float32s of a STRING tensor: no error")
	}
	if _, err := s.Int64s(); err == nil {
		t.Error("Int64s of a STRING tensor: no error")
	}
	big, err := DecodeTensor(tensorPB("u", Uint64, 1).bytes(tRawData, le(8, 1<<63)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := big.Int64s(); err == nil || !strings.Contains(err.Error(), "overflows int64") {
		t.Errorf("Int64s of 1<<63: %v", err)
	}
	h, err := DecodeTensor(tensorPB("h", Float16, 1).ints(tInt32Data, true, 0x3c00))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Int64s(); err == nil {
		t.Error("Int64s of a FLOAT16 tensor: no error")
	}
}

func TestEncodeTensorRoundTrip(t *testing.T) {
	mustInt := func(name string, dt DataType, dims []int64, data []int64) *Tensor {
		t.Helper()
		x, err := NewInt(name, dt, dims, data)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	for _, x := range []*Tensor{
		NewFloat32("f", []int64{2, 3}, []float32{1, 2, 3, 4, 5, -6}),
		NewFloat32("scalar", nil, []float32{42}),
		NewFloat32("", []int64{0}, nil),
		mustInt("i64", Int64, []int64{2}, []int64{math.MinInt64, math.MaxInt64}),
		mustInt("i32", Int32, []int64{1, 2}, []int64{math.MinInt32, math.MaxInt32}),
		mustInt("u8", Uint8, []int64{3}, []int64{0, 1, 255}),
		mustInt("i8", Int8, []int64{2}, []int64{-128, 127}),
		mustInt("i16", Int16, []int64{1}, []int64{-300}),
		mustInt("u16", Uint16, []int64{1}, []int64{65535}),
		mustInt("u32", Uint32, []int64{1}, []int64{math.MaxUint32}),
		mustInt("u64", Uint64, []int64{1}, []int64{math.MaxInt64}),
		mustInt("b", Bool, []int64{2}, []int64{1, 0}),
	} {
		t.Run(x.Name, func(t *testing.T) {
			b, err := EncodeTensor(x)
			if err != nil {
				t.Fatal(err)
			}
			y, err := DecodeTensor(b)
			if err != nil {
				t.Fatal(err)
			}
			if y.Name != x.Name || y.DataType != x.DataType || !slices.Equal(y.Dims, x.Dims) || string(y.raw) != string(x.raw) {
				t.Errorf("decoded %+v, want %+v", y, x)
			}
			path := filepath.Join(t.TempDir(), "t.pb")
			if err := WriteTensor(path, x); err != nil {
				t.Fatal(err)
			}
			z, err := ReadTensor(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(z.raw) != string(x.raw) {
				t.Errorf("read back %v, want %v", z.raw, x.raw)
			}
			if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
				t.Errorf("%d files after WriteTensor, want 1", len(entries))
			}
		})
	}
}

func TestNewIntErrors(t *testing.T) {
	for _, tc := range []struct {
		dt   DataType
		dims []int64
		data []int64
	}{
		{Uint8, []int64{1}, []int64{256}},
		{Uint8, []int64{1}, []int64{-1}},
		{Int8, []int64{1}, []int64{128}},
		{Bool, []int64{1}, []int64{2}},
		{Uint32, []int64{1}, []int64{1 << 32}},
		{Uint64, []int64{1}, []int64{-1}},
		{Int64, []int64{2}, []int64{1}},
		{Int64, []int64{-1}, nil},
		{Float, []int64{1}, []int64{1}},
	} {
		if x, err := NewInt("x", tc.dt, tc.dims, tc.data); err == nil {
			t.Errorf("NewInt(%v, %v, %v) = %+v, want an error", tc.dt, tc.dims, tc.data, x)
		}
	}
	if _, err := EncodeTensor(NewFloat32("x", []int64{2, 2}, []float32{1})); err == nil {
		t.Error("EncodeTensor of 1 value for dims [2 2]: no error")
	}
	if err := WriteTensor(filepath.Join(t.TempDir(), "x.pb"), NewFloat32("x", []int64{2}, nil)); err == nil {
		t.Error("WriteTensor of 0 values for dims [2]: no error")
	}
}

// TestNewString checks that a STRING tensor keeps its bytes (empty, NUL
// and invalid UTF-8 ones too) through encoding, owns a copy of them, and
// that wrong lengths and other types' accessors are refused.
func TestNewString(t *testing.T) {
	data := [][]byte{[]byte("a"), []byte("a\x00"), {}, {0xff, 0xfe}}
	x, err := NewString("s", []int64{2, 2}, data)
	if err != nil {
		t.Fatal(err)
	}
	data[0][0] = 'b'
	b, err := EncodeTensor(x)
	if err != nil {
		t.Fatal(err)
	}
	y, err := DecodeTensor(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := y.Strings()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]byte{[]byte("a"), []byte("a\x00"), {}, {0xff, 0xfe}}
	if y.DataType != String || !slices.Equal(y.Dims, x.Dims) || !slices.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("decoded %v %v %q, want %q", y.DataType, y.Dims, got, want)
	}
	if _, err := NewString("s", []int64{3}, data); err == nil {
		t.Error("NewString of 4 strings for dims [3]: no error")
	}
	if _, err := NewFloat32("f", []int64{1}, []float32{1}).Strings(); err == nil {
		t.Error("Strings of a FLOAT tensor: no error")
	}
}

// TestNewRaw checks that a raw tensor reads back as the typed constructors'
// do, that its data is the very slice given, and that wrong lengths and
// STRING are refused.
func TestNewRaw(t *testing.T) {
	want := NewFloat32("x", []int64{1, 3}, []float32{1.5, -2, 3e-7})
	raw := slices.Clone(want.RawData())
	x, err := NewRaw("x", Float, []int64{1, 3}, raw)
	if err != nil {
		t.Fatal(err)
	}
	if f, err := x.Float32s(); err != nil || !slices.Equal(f, []float32{1.5, -2, 3e-7}) {
		t.Errorf("Float32s of a raw tensor: %v, %v", f, err)
	}
	if &x.RawData()[0] != &raw[0] {
		t.Error("NewRaw copied its data")
	}
	if i, err := NewRaw("i", Int16, []int64{2}, []byte{0xff, 0xff, 2, 0}); err != nil {
		t.Error(err)
	} else if v, err := i.Int64s(); err != nil || !slices.Equal(v, []int64{-1, 2}) {
		t.Errorf("Int64s of a raw INT16 tensor: %v, %v", v, err)
	}
	for _, c := range []struct {
		dt  DataType
		raw []byte
	}{{Float, make([]byte, 11)}, {Int16, make([]byte, 3)}, {String, nil}} {
		if _, err := NewRaw("y", c.dt, []int64{3}, c.raw); err == nil {
			t.Errorf("NewRaw of %d bytes of %v for dims [3]: no error", len(c.raw), c.dt)
		}
	}
}

// TestUint64 round-trips UINT64 values of its whole range, which Int64s
// refuses beyond 2⁶³ − 1, and refuses other types and wrong lengths.
func TestUint64(t *testing.T) {
	v := []uint64{0, 1, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64}
	x, err := NewUint64("u", []int64{5}, v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := x.Uint64s()
	if err != nil || !slices.Equal(got, v) {
		t.Fatalf("Uint64s = %v, %v, want %v", got, err, v)
	}
	if _, err := x.Int64s(); err == nil {
		t.Error("Int64s of 2⁶⁴ − 1: no error")
	}
	if _, err := NewUint64("u", []int64{4}, v); err == nil {
		t.Error("5 values for 4 elements: no error")
	}
	if _, err := NewFloat32("f", []int64{1}, []float32{1}).Uint64s(); err == nil {
		t.Error("Uint64s of FLOAT: no error")
	}
}
