package modelserver

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// inferResponse is an $inference_response ready to send: its JSON, and the
// binary data of the outputs asked for as binary, in their order.
type inferResponse struct {
	header *[]byte // from headerPool, given back by write
	binary [][]byte
}

// headerPool holds the buffers answers' JSON is written to: an answer
// is built per request, and its buffer is free again once written.
var headerPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledHeader bounds the buffers kept in headerPool, so that one
// answer of large JSON outputs does not stay in memory.
const maxPooledHeader = 64 << 10

// newResponse builds the answer to req from the run's outputs, in the
// model's output order. The JSON is written by hand, as encoding/json
// would write it, without reflection: it is on every request's path.
func newResponse(model, ver string, req *inferRequest, outs []*onnx.Tensor) (*inferResponse, error) {
	bp := headerPool.Get().(*[]byte)
	b := append((*bp)[:0], `{"model_name":`...)
	b = appendString(b, model)
	b = append(b, `,"model_version":`...)
	b = appendString(b, ver)
	if req.ID != "" {
		b = append(b, `,"id":`...)
		b = appendString(b, req.ID)
	}
	b = append(b, `,"outputs":[`...)
	r := &inferResponse{header: bp}
	for k, o := range req.Outputs {
		if o.index >= len(outs) {
			return nil, fmt.Errorf("the run returned %d outputs, output %d was asked for", len(outs), o.index)
		}
		t := outs[o.index]
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendString(b, t.Name)
		b = append(b, `,"shape":[`...)
		for i, d := range t.Dims {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, d, 10)
		}
		b = append(b, `],"datatype":"`...)
		b = append(b, datatypeName(t.DataType)...)
		b = append(b, '"')
		var err error
		if o.binary {
			var data []byte
			if data, err = tensorBytes(t); err == nil {
				b = append(b, `,"parameters":{"binary_data_size":`...)
				b = strconv.AppendInt(b, int64(len(data)), 10)
				b = append(b, '}')
				r.binary = append(r.binary, data)
			}
		} else {
			b = append(b, `,"data":`...)
			b, err = appendTensorJSON(b, t)
		}
		if err != nil {
			return nil, fmt.Errorf("output %q: %w", t.Name, err)
		}
		b = append(b, '}')
	}
	*bp = append(b, "]}"...)
	return r, nil
}

// appendString appends s as a JSON string: as is when it is plain ASCII
// with nothing to escape, as the names and ids of requests are, else as
// encoding/json escapes it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendTensorJSON appends t's data as a flat JSON array: numbers,
// booleans for BOOL, strings for BYTES. NaN, infinities and bytes that
// are not UTF-8 have no JSON.
func appendTensorJSON(b []byte, t *onnx.Tensor) ([]byte, error) {
	b = append(b, '[')
	if t.DataType == onnx.String {
		strs, err := t.Strings()
		if err != nil {
			return nil, err
		}
		for i, s := range strs {
			if !utf8.Valid(s) {
				return nil, fmt.Errorf("element %d is not UTF-8, which JSON cannot carry: ask for binary_data", i)
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, string(s))
		}
		return append(b, ']'), nil
	}
	if t.DataType == onnx.Float {
		f, err := t.Float32s()
		if err != nil {
			return nil, err
		}
		for i, x := range f {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("element %d is %v, which JSON cannot carry: ask for binary_data", i, x)
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = appendFloat32(b, x)
		}
		return append(b, ']'), nil
	}
	if t.DataType == onnx.Uint64 {
		u, err := t.Uint64s()
		if err != nil {
			return nil, err
		}
		for i, x := range u {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, x, 10)
		}
		return append(b, ']'), nil
	}
	v, err := t.Int64s()
	if err != nil {
		return nil, err
	}
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		if t.DataType == onnx.Bool {
			b = strconv.AppendBool(b, x != 0)
		} else {
			b = strconv.AppendInt(b, x, 10)
		}
	}
	return append(b, ']'), nil
}

// appendFloat32 appends x as encoding/json writes a float32: the shortest
// decimal that reads back as x, with an exponent only for the very small
// and very large, and no leading zero in it.
func appendFloat32(b []byte, x float32) []byte {
	abs := float32(math.Abs(float64(x))) // compared as a float32, as encoding/json does
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, float64(x), format, -1, 32)
	if format == 'e' {
		// e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// write sends the response: JSON alone, or with binary outputs the JSON
// followed by their data, Inference-Header-Content-Length giving the
// JSON's length. The JSON's buffer goes back to the pool.
func (r *inferResponse) write(w http.ResponseWriter) {
	header := *r.header
	defer func() {
		if cap(header) <= maxPooledHeader {
			headerPool.Put(r.header)
		}
		r.header = nil
	}()
	h := w.Header()
	if len(r.binary) == 0 {
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{strconv.Itoa(len(header))}
		_, _ = w.Write(header)
		return
	}
	n := len(header)
	for _, b := range r.binary {
		n += len(b)
	}
	h["Content-Type"] = []string{"application/octet-stream"}
	h[headerLength] = []string{strconv.Itoa(len(header))}
	h["Content-Length"] = []string{strconv.Itoa(n)}
	_, _ = w.Write(header)
	for _, b := range r.binary {
		_, _ = w.Write(b)
	}
}
