package modelserver

import (
	"strconv"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// scanElements reads data, an array of n elements nested at most
// maxNesting deep, as jsonTensor reads it: numbers as dt (FP32 floats,
// else whole numbers), true and false for BOOL. It is the fast path of
// JSON inputs: one pass over the bytes, no allocation but the result.
// ok is false for anything else — a bare number, an object, a string, a
// malformed number or array, a value out of range, another count — which
// tokenTensor then reads, to say what is wrong.
func scanElements(data []byte, dt onnx.DataType, n int64) (floats []float32, ints []int64, ok bool) {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '[' || n > int64(len(data)) {
		return nil, nil, false
	}
	if dt == onnx.Float {
		floats = make([]float32, 0, n)
	} else {
		ints = make([]int64, 0, n)
	}
	count := int64(0)
	depth := 0
	afterValue := false // an element or a closed array was last: ',' or ']' must follow
	for i < len(data) {
		c := data[i]
		switch {
		case c == '[' && !afterValue:
			if depth++; depth > maxNesting {
				return nil, nil, false
			}
			i++
		case c == ']':
			if depth--; depth < 0 {
				return nil, nil, false
			}
			i++
			afterValue = true
			if depth == 0 {
				if skipSpace(data, i) != len(data) || count != n {
					return nil, nil, false
				}
				return floats, ints, true
			}
		case c == ',' && afterValue:
			i++
			afterValue = false
			if j := skipSpace(data, i); j < len(data) && data[j] == ']' {
				return nil, nil, false // a trailing comma
			}
		case !afterValue && depth > 0:
			j, isNum := scanValue(data, i)
			if j == i || count == n {
				return nil, nil, false
			}
			v := data[i:j]
			switch {
			case dt == onnx.Bool && !isNum:
				b := int64(0)
				if v[0] == 't' {
					b = 1
				}
				ints = append(ints, b)
			case dt == onnx.Float && isNum:
				f, err := strconv.ParseFloat(string(v), 32)
				if err != nil {
					return nil, nil, false
				}
				floats = append(floats, float32(f))
			case dt != onnx.Bool && isNum:
				x, err := strconv.ParseInt(string(v), 10, 64)
				if err != nil {
					return nil, nil, false
				}
				ints = append(ints, x)
			default:
				return nil, nil, false
			}
			count++
			i = j
			afterValue = true
		default:
			return nil, nil, false
		}
		i = skipSpace(data, i)
	}
	return nil, nil, false
}

// skipSpace is the index of the first byte from i on that is not JSON's
// whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanValue is the end of the number, true or false at b[i:], and whether
// it is a number: i itself when there is none. A number follows JSON's
// grammar, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, which is
// narrower than strconv's (no "+1", ".5", "1.", "0x10", "1_0" or "Inf").
func scanValue(b []byte, i int) (int, bool) {
	for _, lit := range []string{"true", "false"} {
		if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
			return i + len(lit), false
		}
	}
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return start, true
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return start, true
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		j := i + 1
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if k := digits(b, j); k > j {
			i = k
		} else {
			return start, true
		}
	}
	return i, true
}

// digits is the end of the run of decimal digits at b[i:].
func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
