package alidnn

import (
	"encoding/binary"
	"math"
)

// lanes is the engine's BLOCK_IN = BLOCK_OUT: a device element is 16 lanes.
const lanes = 16

// elem is the type of a device tensor's lanes.
type elem uint8

const (
	i8 elem = iota
	i32
	f32
)

func (e elem) size() int {
	if e == i8 {
		return 1
	}
	return 4
}

func (e elem) String() string { return [...]string{"int8", "int32", "fp32"}[e] }

// layout places a logical tensor in device memory. One axis goes on the 16
// lanes of an element (channels, or a matrix's reduction dimension); the
// other axes are split into outer axes and row axes. The device holds
// [O][CB][S] elements of 16 lanes, O the product of the outer axes, CB the
// lane axis in blocks of 16 (zero-padded), S the product of the row axes:
// NCHW activations are [N][C/16][H·W], an [M,K] matrix [K/16][M].
type layout struct {
	shape []int
	outer []int
	lane  int // -1: no lane axis, one lane
	rows  []int
}

func prod(dims []int, axes []int) int {
	n := 1
	for _, a := range axes {
		n *= dims[a]
	}
	return n
}

func (l layout) o() int { return prod(l.shape, l.outer) }
func (l layout) c() int {
	if l.lane < 0 {
		return 1
	}
	return l.shape[l.lane]
}
func (l layout) cb() int { return (l.c() + lanes - 1) / lanes }
func (l layout) s() int  { return prod(l.shape, l.rows) }

// elems is the number of 16-lane elements the tensor occupies.
func (l layout) elems() int { return l.o() * l.cb() * l.s() }

// bytes is the tensor's size on the device.
func (l layout) bytes(e elem) int { return l.elems() * lanes * e.size() }

// convLayout is the layout of an NCHW-like tensor: axis 0 outer, axis 1 on
// the lanes, the rest rows. Rank 2 is a matrix, rank 1 a vector.
func convLayout(shape []int) layout {
	l := layout{shape: shape, lane: -1}
	switch len(shape) {
	case 0:
	case 1:
		l.lane = 0
	case 2:
		l.lane, l.rows = 1, []int{0}
	default:
		l.outer, l.lane = []int{0}, 1
		for a := 2; a < len(shape); a++ {
			l.rows = append(l.rows, a)
		}
	}
	return l
}

// matLayout is the layout of a stack of matrices [..., M, K]: K on the
// lanes, M the rows, the leading axes outer.
func matLayout(shape []int) layout {
	r := len(shape)
	if r < 2 {
		return convLayout(shape)
	}
	l := layout{shape: shape, lane: r - 1, rows: []int{r - 2}}
	for a := 0; a < r-2; a++ {
		l.outer = append(l.outer, a)
	}
	return l
}

func (l layout) equal(m layout) bool {
	return eqInts(l.shape, m.shape) && eqInts(l.outer, m.outer) && l.lane == m.lane && eqInts(l.rows, m.rows)
}

func eqInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// offsets returns, for every logical index in row-major order, where that
// value sits on the device, in lanes from the tensor's start.
func (l layout) offsets() []int {
	n := 1
	for _, d := range l.shape {
		n *= d
	}
	coef := make([]int, len(l.shape))
	s := l.s()
	cb := l.cb()
	m := lanes
	for k := len(l.rows) - 1; k >= 0; k-- {
		coef[l.rows[k]] = m
		m *= l.shape[l.rows[k]]
	}
	m = cb * s * lanes
	for k := len(l.outer) - 1; k >= 0; k-- {
		coef[l.outer[k]] = m
		m *= l.shape[l.outer[k]]
	}
	out := make([]int, n)
	idx := make([]int, len(l.shape))
	for i := 0; i < n; i++ {
		off := 0
		for a, v := range idx {
			if a == l.lane {
				off += (v/lanes)*s*lanes + v%lanes
			} else {
				off += v * coef[a]
			}
		}
		out[i] = off
		for a := len(idx) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < l.shape[a] {
				break
			}
			idx[a] = 0
		}
	}
	return out
}

// broadcastIndex maps every row-major index of shape to the row-major index
// of src broadcast to it (numpy rules; src has at most len(shape) axes).
func broadcastIndex(shape, src []int) []int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	r := len(shape)
	stride := make([]int, r)
	m := 1
	for k := len(src) - 1; k >= 0; k-- {
		a := r - len(src) + k
		if src[k] != 1 {
			stride[a] = m
		}
		m *= src[k]
	}
	out := make([]int, n)
	idx := make([]int, r)
	for i := 0; i < n; i++ {
		off := 0
		for a, v := range idx {
			off += v * stride[a]
		}
		out[i] = off
		for a := r - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < shape[a] {
				break
			}
			idx[a] = 0
		}
	}
	return out
}

// packF32 lays float values out as fp32 lanes.
func packF32(l layout, vals []float32, bcast []int) []byte {
	b := make([]byte, l.bytes(f32))
	for i, off := range l.offsets() {
		v := vals[pick(i, bcast)]
		binary.LittleEndian.PutUint32(b[off*4:], math.Float32bits(v))
	}
	return b
}

// packConst lays out a constant tensor a layer reads whole: as int32
// lanes if it is held so (an integer Pow's exponents), else as fp32.
func packConst(v *value) []byte {
	if v.elem == i32 {
		return packInt(v.lay, i32, v.i, nil)
	}
	return packF32(v.lay, v.f, nil)
}

// packInt lays integer values out as e lanes (i8 or i32), values already in
// range.
func packInt(l layout, e elem, vals []int64, bcast []int) []byte {
	b := make([]byte, l.bytes(e))
	for i, off := range l.offsets() {
		v := vals[pick(i, bcast)]
		if e == i8 {
			b[off] = byte(int8(v))
		} else {
			binary.LittleEndian.PutUint32(b[off*4:], uint32(int32(v)))
		}
	}
	return b
}

func pick(i int, bcast []int) int {
	if bcast == nil {
		return i
	}
	return bcast[i]
}

// unpackF32 reads fp32 lanes back in logical row-major order.
func unpackF32(l layout, b []byte) []float32 {
	offs := l.offsets()
	out := make([]float32, len(offs))
	for i, off := range offs {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[off*4:]))
	}
	return out
}

// unpackInt reads i8 or i32 lanes back in logical row-major order.
func unpackInt(l layout, e elem, b []byte) []int64 {
	offs := l.offsets()
	out := make([]int64, len(offs))
	for i, off := range offs {
		if e == i8 {
			out[i] = int64(int8(b[off]))
		} else {
			out[i] = int64(int32(binary.LittleEndian.Uint32(b[off*4:])))
		}
	}
	return out
}
