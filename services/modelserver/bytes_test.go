package modelserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
	"github.com/fpga-faas/faas/services/modelserver/inferencepb"
)

// lengthPrefixed is BYTES binary data: each element's length in 4
// little-endian bytes, then the element.
func lengthPrefixed(elems ...string) []byte {
	var b []byte
	for _, s := range elems {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return b
}

func stringsOf(t testing.TB, in *onnx.Tensor) []string {
	t.Helper()
	b, err := in.Strings()
	if err != nil {
		t.Fatal(err)
	}
	s := make([]string, len(b))
	for i := range b {
		s[i] = string(b[i])
	}
	return s
}

// TestBytesData reads BYTES inputs from JSON strings and from binary data,
// writes them back both ways, and refuses what does not fit.
func TestBytesData(t *testing.T) {
	dims := []int64{2, 2}
	in, err := jsonTensor("s", onnx.String, dims, json.RawMessage(`[["", "a\u0000b"], ["héllo", "\"\\/\n"]]`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"", "a\x00b", "héllo", "\"\\/\n"}
	if got := stringsOf(t, in); !slices.Equal(got, want) {
		t.Errorf("JSON: %q, want %q", got, want)
	}
	b, err := tensorBytes(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, lengthPrefixed(want...)) {
		t.Errorf("binary data %x, want %x", b, lengthPrefixed(want...))
	}
	raw := []string{"\xff\xfe", "", "x", "\x00"} // not UTF-8: binary data carries any bytes
	bin, err := binaryTensor("s", onnx.String, dims, lengthPrefixed(raw...))
	if err != nil {
		t.Fatal(err)
	}
	if got := stringsOf(t, bin); !slices.Equal(got, raw) {
		t.Errorf("binary: %q, want %q", got, raw)
	}
	js, err := appendTensorJSON(nil, in)
	if err != nil || string(js) != `["","a\u0000b","héllo","\"\\/\n"]` {
		t.Errorf("JSON of %q: %s, %v", want, js, err)
	}
	if _, err := appendTensorJSON(nil, bin); err == nil {
		t.Errorf("JSON of bytes that are not UTF-8: no error")
	}

	refused := map[string]json.RawMessage{
		"a number":      json.RawMessage(`["a", "b", 1, "c"]`),
		"a boolean":     json.RawMessage(`["a", "b", true, "c"]`),
		"too few":       json.RawMessage(`["a", "b", "c"]`),
		"too many":      json.RawMessage(`["a", "b", "c", "d", "e"]`),
		"an object":     json.RawMessage(`["a", {"b": 1}, "c", "d"]`),
		"not UTF-8":     json.RawMessage("[\"a\", \"\xff\", \"c\", \"d\"]"),
		"not one array": json.RawMessage(`["a", "b", "c", "d"] []`),
	}
	for what, data := range refused {
		if _, err := jsonTensor("s", onnx.String, dims, data); !errors.Is(err, ErrBadRequest) {
			t.Errorf("JSON with %s: %v, want ErrBadRequest", what, err)
		}
	}
	if _, err := jsonTensor("i", onnx.Int32, []int64{1}, json.RawMessage(`["1"]`)); !errors.Is(err, ErrBadRequest) {
		t.Errorf("a string in INT32 data: %v, want ErrBadRequest", err)
	}
	four := lengthPrefixed("a", "b", "c", "d")
	for what, data := range map[string][]byte{
		"no data":          nil,
		"a cut length":     four[:len(four)-3],
		"a cut element":    append(lengthPrefixed("a", "b", "c"), 5, 0, 0, 0, 'd'),
		"a huge length":    append(lengthPrefixed("a", "b", "c"), 0xff, 0xff, 0xff, 0xff, 'd'),
		"bytes left after": append(four, 0),
		"three elements":   lengthPrefixed("a", "b", "c"),
		"five elements":    lengthPrefixed("a", "b", "c", "d", "e"),
	} {
		if _, err := binaryTensor("s", onnx.String, dims, data); !errors.Is(err, ErrBadRequest) {
			t.Errorf("binary data with %s: %v, want ErrBadRequest", what, err)
		}
	}
}

// TestBytesContents carries BYTES as gRPC's bytes_contents, both ways.
func TestBytesContents(t *testing.T) {
	spec := tensorSpec{Name: "s", Type: onnx.String, Shape: []int64{3}}
	sent := [][]byte{[]byte("\xff"), nil, []byte("abc")}
	in, err := contentsTensor(spec, &inferencepb.InferTensorContents{BytesContents: sent})
	if err != nil {
		t.Fatal(err)
	}
	c, err := tensorContents(in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(c.GetBytesContents(), sent, bytes.Equal) {
		t.Errorf("bytes_contents %q back, %q sent", c.GetBytesContents(), sent)
	}
	for what, c := range map[string]*inferencepb.InferTensorContents{
		"two elements":          {BytesContents: sent[:2]},
		"int_contents as well":  {BytesContents: sent, IntContents: []int32{1}},
		"int_contents instead":  {IntContents: []int32{1, 2, 3}},
		"fp32_contents instead": {Fp32Contents: []float32{1, 2, 3}},
	} {
		if _, err := contentsTensor(spec, c); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: %v, want ErrBadRequest", what, err)
		}
	}
}

// FuzzBytesInput reads BYTES inputs of n elements from JSON and from
// binary data: nothing panics, every refusal is ErrBadRequest, and what is
// accepted goes back to binary data and JSON (when UTF-8) unchanged.
func FuzzBytesInput(f *testing.F) {
	f.Add([]byte(`["a", "", "\u00e9"]`), uint8(3), false)
	f.Add([]byte(`[["a"], ["b"]]`), uint8(2), false)
	f.Add([]byte(`[1, "a"]`), uint8(2), false)
	f.Add(lengthPrefixed("a", "", "\xff"), uint8(3), true)
	f.Add(lengthPrefixed("abc"), uint8(1), true)
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 0}, uint8(1), true)
	f.Fuzz(func(t *testing.T, data []byte, n uint8, isBinary bool) {
		dims := []int64{int64(n)}
		var in *onnx.Tensor
		var err error
		if isBinary {
			in, err = binaryTensor("s", onnx.String, dims, data)
		} else {
			in, err = jsonTensor("s", onnx.String, dims, data)
		}
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("%v is not ErrBadRequest", err)
			}
			return
		}
		sent := stringsOf(t, in)
		b, err := tensorBytes(in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := binaryTensor("s", onnx.String, dims, b)
		if err != nil {
			t.Fatal(err)
		}
		if got := stringsOf(t, back); !slices.Equal(got, sent) {
			t.Fatalf("binary round trip: %q back, %q sent", got, sent)
		}
		js, err := appendTensorJSON(nil, in)
		if err != nil {
			return // bytes that are not UTF-8
		}
		back, err = jsonTensor("s", onnx.String, dims, js)
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		if got := stringsOf(t, back); !slices.Equal(got, sent) {
			t.Fatalf("JSON round trip: %q back, %q sent", got, sent)
		}
	})
}

// words are the constant strings the "match" model compares its input
// with.
var words = []string{"cat", "", "\xff\x00"}

// writeMatchRepo makes a repository holding model "match": BYTES input
// "s" [1,3] (a program for 2 samples a run) compared elementwise with
// words, BOOL output "eq".
func writeMatchRepo(t testing.TB) string {
	t.Helper()
	bs := make([][]byte, len(words))
	for i, w := range words {
		bs[i] = []byte(w)
	}
	k, err := onnx.NewString("k", []int64{3}, bs)
	if err != nil {
		t.Fatal(err)
	}
	dims := []onnx.Dim{{Value: 2}, {Value: 3}}
	g := &onnx.Graph{
		Initializers: []*onnx.Tensor{k},
		Nodes:        []*onnx.Node{{OpType: "Equal", Name: "eq", Inputs: []string{"s", "k"}, Outputs: []string{"eq"}}},
		Inputs:       []onnx.ValueInfo{{Name: "s", ElemType: onnx.String, Dims: dims}},
		Outputs:      []onnx.ValueInfo{{Name: "eq", ElemType: onnx.Bool, Dims: dims}},
	}
	p, err := alidnn.Compile(&onnx.Model{IRVersion: 8, Opsets: []onnx.Opset{{Version: 17}}, Graph: g}, alidnn.ForBatch(2))
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	vdir := filepath.Join(repo, "match", "1")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteFile(filepath.Join(vdir, ProgramFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "match", ConfigFile), []byte(`{"name": "match", "max_batch_size": 2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return repo
}

// matches is the "match" model's answer for s.
func matches(s []string) []bool {
	r := make([]bool, len(s))
	for i := range s {
		r[i] = s[i] == words[i]
	}
	return r
}

// TestInferBytes serves a model with a BYTES input over REST, as JSON
// strings and as binary data, and over gRPC, as bytes_contents and as raw
// contents; requests at once share runs of the program for two samples.
func TestInferBytes(t *testing.T) {
	s := serveGRPC(t, writeMatchRepo(t), Config{})
	url := s.URL + "/v2/models/match/infer"

	var meta struct {
		Inputs []struct{ Name, Datatype string }
	}
	_, _, b := get(t, s.URL+"/v2/models/match")
	if err := json.Unmarshal(b, &meta); err != nil || len(meta.Inputs) != 1 || meta.Inputs[0].Datatype != "BYTES" {
		t.Fatalf("metadata %s: %v", b, err)
	}

	inputs := [][]string{{"cat", "", "\xff\x00"}, {"cat", "x", "\xff"}, {"", "", ""}, {"dog", "", "\xff\x00"}}
	var wg sync.WaitGroup
	for k, in := range inputs {
		want := matches(in)
		wg.Add(3)
		go func() { // binary data in and out
			defer wg.Done()
			header := fmt.Sprintf(`{"inputs":[{"name":"s","shape":[1,3],"datatype":"BYTES","parameters":{"binary_data_size":%d}}],`+
				`"outputs":[{"name":"eq","parameters":{"binary_data":true}}]}`, len(lengthPrefixed(in...)))
			code, h, body := post(t, url, append([]byte(header), lengthPrefixed(in...)...),
				map[string]string{headerLength: strconv.Itoa(len(header))})
			n, _ := strconv.Atoi(h.Get(headerLength))
			if code != http.StatusOK || n > len(body) {
				t.Errorf("binary request %d: %d %s", k, code, body)
				return
			}
			got := make([]bool, len(body[n:]))
			for i, c := range body[n:] {
				got[i] = c == 1
			}
			if !slices.Equal(got, want) {
				t.Errorf("binary request %d (%q): %v, want %v", k, in, got, want)
			}
		}()
		go func() { // typed contents
			defer wg.Done()
			bs := make([][]byte, len(in))
			for i := range in {
				bs[i] = []byte(in[i])
			}
			resp, err := s.client.ModelInfer(context.Background(), &inferencepb.ModelInferRequest{ModelName: "match",
				Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "s", Datatype: "BYTES", Shape: []int64{1, 3},
					Contents: &inferencepb.InferTensorContents{BytesContents: bs}}}})
			if err != nil {
				t.Errorf("gRPC request %d: %v", k, err)
				return
			}
			if got := resp.GetOutputs()[0].GetContents().GetBoolContents(); !slices.Equal(got, want) {
				t.Errorf("gRPC request %d (%q): %v, want %v", k, in, got, want)
			}
		}()
		go func() { // raw contents
			defer wg.Done()
			resp, err := s.client.ModelInfer(context.Background(), &inferencepb.ModelInferRequest{ModelName: "match",
				Inputs:           []*inferencepb.ModelInferRequest_InferInputTensor{{Name: "s", Datatype: "BYTES", Shape: []int64{1, 3}}},
				RawInputContents: [][]byte{lengthPrefixed(in...)}})
			if err != nil {
				t.Errorf("raw gRPC request %d: %v", k, err)
				return
			}
			if got := resp.GetRawOutputContents(); len(got) != 1 || !bytes.Equal(got[0], boolBytes(want)) {
				t.Errorf("raw gRPC request %d (%q): %x, want %x", k, in, got, boolBytes(want))
			}
		}()
	}
	wg.Wait()

	// JSON carries UTF-8 only: the third word goes as binary data above.
	body := `{"inputs":[{"name":"s","shape":[1,3],"datatype":"BYTES","data":[["cat","","é"]]}]}`
	code, _, b := post(t, url, []byte(body), nil)
	var resp struct {
		Outputs []struct {
			Datatype string
			Data     []bool
		}
	}
	if err := json.Unmarshal(b, &resp); code != http.StatusOK || err != nil || len(resp.Outputs) != 1 ||
		!slices.Equal(resp.Outputs[0].Data, []bool{true, true, false}) {
		t.Errorf("JSON request: %d %s", code, b)
	}
	for what, body := range map[string]string{
		"numbers":   `{"inputs":[{"name":"s","shape":[1,3],"datatype":"BYTES","data":[1,2,3]}]}`,
		"as INT32":  `{"inputs":[{"name":"s","shape":[1,3],"datatype":"INT32","data":[1,2,3]}]}`,
		"not UTF-8": "{\"inputs\":[{\"name\":\"s\",\"shape\":[1,3],\"datatype\":\"BYTES\",\"data\":[\"\xff\",\"\",\"\"]}]}",
	} {
		if code, _, b := post(t, url, []byte(body), nil); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", what, code, b)
		}
	}
}

func boolBytes(v []bool) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		if x {
			b[i] = 1
		}
	}
	return b
}
