package modelserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/classify"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// binaryInfer is an infer request with the input as binary data; outputs
// are asked for as binary when binOut.
func binaryInfer(t testing.TB, in *onnx.Tensor, binOut bool) ([]byte, map[string]string) {
	t.Helper()
	var data []byte
	for _, x := range floats(t, in) {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
	}
	req := map[string]any{
		"inputs":  []map[string]any{{"name": in.Name, "shape": in.Dims, "datatype": "FP32", "parameters": map[string]any{"binary_data_size": len(data)}}},
		"outputs": []map[string]any{{"name": mnistOutput, "parameters": map[string]any{"binary_data": binOut}}},
	}
	head, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return append(head, data...), map[string]string{headerLength: strconv.Itoa(len(head)), "Content-Type": "application/octet-stream"}
}

// TestInferBinary sends every reference digit as binary data, gets the
// scores back as binary data, and checks the digit; then JSON in and binary
// out through the request's binary_data_output.
func TestInferBinary(t *testing.T) {
	s := serve(t, writeRepo(t, mnistConfig, "onnx"), Config{})
	url := s.URL + "/v2/models/mnist/infer"
	for _, c := range mnistCases(t) {
		body, hdr := binaryInfer(t, c.Input, true)
		code, h, b := post(t, url, body, hdr)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", c.Name, code, b)
		}
		scores := binaryScores(t, h, b)
		if got, want := argmax(scores), argmax(floats(t, c.Want)); got != want {
			t.Errorf("%s: digit %d, the reference says %d", c.Name, got, want)
		}
		// Asked for JSON, the same request answers the same scores.
		body, hdr = binaryInfer(t, c.Input, false)
		code, _, b = post(t, url, body, hdr)
		var r response
		if err := json.Unmarshal(b, &r); code != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %s (%v)", c.Name, code, b, err)
		}
		if !slices.Equal(r.Outputs[0].Data, scores) {
			t.Errorf("%s: JSON scores %v, binary %v", c.Name, r.Outputs[0].Data, scores)
		}
	}
	c := mnistCases(t)[0]
	code, h, b := post(t, url, jsonInfer(t, "j", c.Input, map[string]any{"binary_data_output": true}), nil)
	if code != http.StatusOK {
		t.Fatalf("binary_data_output: %d %s", code, b)
	}
	if got, want := argmax(binaryScores(t, h, b)), argmax(floats(t, c.Want)); got != want {
		t.Errorf("binary_data_output: digit %d, the reference says %d", got, want)
	}
}

// binaryScores reads the one FP32 output of a binary answer.
func binaryScores(t testing.TB, h http.Header, b []byte) []float32 {
	t.Helper()
	n, err := strconv.Atoi(h.Get(headerLength))
	if err != nil || n > len(b) {
		t.Fatalf("%s %q of a %d-byte body", headerLength, h.Get(headerLength), len(b))
	}
	var r response
	if err := json.Unmarshal(b[:n], &r); err != nil {
		t.Fatal(err)
	}
	o := r.Outputs[0]
	if o.Datatype != "FP32" || o.Data != nil || o.Parameters["binary_data_size"] != int64(len(b)-n) {
		t.Fatalf("binary output %+v with %d bytes after the JSON", o, len(b)-n)
	}
	f := make([]float32, (len(b)-n)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[n+4*i:]))
	}
	return f
}

// mnistHeldConfig is mnistConfig whose requests wait up to a second for
// another to share their job.
const mnistHeldConfig = `{"name": "mnist", "max_batch_size": 4,
	"dynamic_batching": {"max_queue_delay_microseconds": 1000000, "preferred_batch_size": [2, 4]}}`

// TestInferConcurrentBatched runs many clients at once: their requests are
// coalesced into engine jobs, and every answer equals a direct Session.Run
// of the same program on its own engine, bit for bit. Requests wait up to
// a second for a second one to share their job: without the delay, whether
// two meet on a loaded machine is up to the scheduler.
func TestInferConcurrentBatched(t *testing.T) {
	s := serve(t, writeRepo(t, mnistHeldConfig, "onnx"), Config{Pipeline: 1})
	cases := mnistCases(t)
	want := directScores(t, cases)
	url := s.URL + "/v2/models/mnist/infer"
	const clients = 16
	for round := 0; round < 5 && maxBatch(t, s) < 2; round++ {
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for k := range clients {
			wg.Go(func() {
				c := cases[k%len(cases)]
				id := fmt.Sprintf("r%d-%d", round, k)
				code, _, b := post(t, url, jsonInfer(t, id, c.Input, nil), nil)
				var r response
				if err := json.Unmarshal(b, &r); code != http.StatusOK || err != nil {
					errs <- fmt.Errorf("client %d: %d %s", k, code, b)
					return
				}
				if r.ID != id || !slices.Equal(r.Outputs[0].Data, want[k%len(cases)]) {
					errs <- fmt.Errorf("client %d: id %q, scores %v; want id %q, scores %v", k, r.ID, r.Outputs[0].Data, id, want[k%len(cases)])
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	if b := maxBatch(t, s); b < 2 {
		t.Errorf("no request shared an engine job with another (largest batch %v)", b)
	}
}

// directScores runs each case through alidnn on an engine of its own.
func directScores(t testing.TB, cases []classify.Case) [][]float32 {
	t.Helper()
	m, err := onnx.ReadModel(mnistDir(t) + "/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	p, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sess, err := alidnn.Open(ctx, simEngine(t), p)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	var out [][]float32
	for _, c := range cases {
		res, err := sess.Run(ctx, c.Input)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, floats(t, res.Outputs[0]))
	}
	return out
}

// maxBatch is the largest batch size the batch histogram has seen: the
// upper bound of the lowest bucket holding every observation.
func maxBatch(t testing.TB, s *served) float64 {
	t.Helper()
	mfs, err := s.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "modelserver_infer_batch_size" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		for _, b := range h.GetBucket() {
			if b.GetCumulativeCount() == h.GetSampleCount() {
				return b.GetUpperBound()
			}
		}
	}
	return 0
}

// TestInferErrors sends requests the protocol refuses and checks the
// status and the error object of each.
func TestInferErrors(t *testing.T) {
	s := serve(t, writeRepo(t, mnistConfig, "onnx"), Config{MaxBodyBytes: 64 << 10})
	in := mnistCases(t)[0].Input
	good := string(jsonInfer(t, "", in, nil))
	bin, hdr := binaryInfer(t, in, false)
	headLen, _ := strconv.Atoi(hdr[headerLength])
	for _, c := range []struct {
		name, path, body string
		header           map[string]string
		code             int
		says             string
	}{
		{"unknown model", "/v2/models/nope/infer", good, nil, 404, `no model "nope"`},
		{"unknown version", "/v2/models/mnist/versions/7/infer", good, nil, 404, `no version "7"`},
		{"malformed JSON", "/v2/models/mnist/infer", `{"inputs": [`, nil, 400, "malformed"},
		{"unknown input", "/v2/models/mnist/infer", strings.Replace(good, mnistInput, "x", 1), nil, 400, `unknown input "x"`},
		{"missing input", "/v2/models/mnist/infer", `{"inputs": []}`, nil, 400, "missing"},
		{"wrong shape", "/v2/models/mnist/infer", strings.Replace(good, "[1,1,28,28]", "[1,28,28]", 1), nil, 400, "shape"},
		{"wrong datatype", "/v2/models/mnist/infer", strings.Replace(good, `"FP32"`, `"INT64"`, 1), nil, 400, "INT64"},
		{"too few elements", "/v2/models/mnist/infer", `{"inputs":[{"name":"Input3","shape":[1,1,28,28],"datatype":"FP32","data":[[1],[2]]}]}`, nil, 400, "2 elements"},
		{"too many elements", "/v2/models/mnist/infer", strings.Replace(good, `"data":[`, `"data":[1,`, 1), nil, 400, "more than the 784 elements"},
		{"nested too deep", "/v2/models/mnist/infer", `{"inputs":[{"name":"Input3","shape":[1,1,28,28],"datatype":"FP32","data":` +
			strings.Repeat("[", 10) + "1" + strings.Repeat("]", 10) + `}]}`, nil, 400, "nests deeper than 9"},
		{"data not numbers", "/v2/models/mnist/infer", `{"inputs":[{"name":"Input3","shape":[1,1,28,28],"datatype":"FP32","data":["a"]}]}`, nil, 400, "not a number"},
		{"unknown output", "/v2/models/mnist/infer", strings.TrimSuffix(good, "}") + `,"outputs":[{"name":"y"}]}`, nil, 400, `unknown output "y"`},
		{"binary size beyond body", "/v2/models/mnist/infer", string(bin[:len(bin)-4]), hdr, 400, "binary_data_size"},
		{"binary bytes left over", "/v2/models/mnist/infer", string(bin) + "xx", hdr, 400, "2 bytes of binary data"},
		{"header length beyond body", "/v2/models/mnist/infer", string(bin[:headLen]), map[string]string{headerLength: strconv.Itoa(len(bin) + 1)}, 400, "exceeds"},
		{"binary data without header", "/v2/models/mnist/infer", string(bin[:headLen]), nil, 400, "binary_data_size"},
		{"too large", "/v2/models/mnist/infer", good + strings.Repeat(" ", 64<<10), nil, 413, "more than"},
	} {
		code, _, b := post(t, s.URL+c.path, []byte(c.body), c.header)
		var e struct{ Error string }
		if err := json.Unmarshal(b, &e); err != nil || code != c.code || !strings.Contains(e.Error, c.says) {
			t.Errorf("%s: %d %s; want %d and an error saying %q", c.name, code, b, c.code, c.says)
		}
	}
}

// TestQueueFullAndTimeout holds the engine's jobs back: the model's queue
// fills, the next request is refused with 429, and the ones admitted fail
// with 504 when their deadline passes.
func TestQueueFullAndTimeout(t *testing.T) {
	gate := make(chan struct{})
	eng := gatedEngine{simEngine(t), gate}
	s := serve(t, writeRepo(t, `{"name": "mnist", "max_queue_size": 2}`, "onnx"),
		Config{Engines: []alidnn.Engine{eng}, Timeout: 2 * time.Second})
	t.Cleanup(func() { close(gate) })
	body := jsonInfer(t, "", mnistCases(t)[0].Input, nil)
	url := s.URL + "/v2/models/mnist/infer"
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			code, _, _ := post(t, url, body, nil)
			codes <- code
		}()
	}
	waitFor(t, "two requests to be admitted", func() bool { return len(s.models["mnist"].queue) == 2 })
	if code, _, b := post(t, url, body, nil); code != http.StatusTooManyRequests {
		t.Errorf("a third request: %d %s, want 429", code, b)
	}
	for range 2 {
		if code := <-codes; code != http.StatusGatewayTimeout {
			t.Errorf("a held request: %d, want 504", code)
		}
	}
}

// TestClientGone cancels a request while its job is held on the engine:
// its place in the model's queue is given back at once, it is counted as
// 499, and once the engine runs again the next request is answered.
func TestClientGone(t *testing.T) {
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	s := serve(t, writeRepo(t, `{"name": "mnist", "max_queue_size": 1}`, "onnx"),
		Config{Engines: []alidnn.Engine{gatedEngine{simEngine(t), gate}}})
	t.Cleanup(release)
	c := mnistCases(t)[0]
	url := s.URL + "/v2/models/mnist/infer"
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(jsonInfer(t, "", c.Input, nil)))
	if err != nil {
		t.Fatal(err)
	}
	gone := make(chan error, 1)
	go func() {
		_, err := http.DefaultClient.Do(req)
		gone <- err
	}()
	queue := s.models["mnist"].queue
	waitFor(t, "the request to be admitted", func() bool { return len(queue) == 1 })
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Errorf("the client's request ended with %v", err)
	}
	waitFor(t, "the queue to empty", func() bool { return len(queue) == 0 })
	waitFor(t, "a 499 to be counted", func() bool { return countedBy(t, s, "http", "499") == 1 })
	release()
	code, _, b := post(t, url, jsonInfer(t, "", c.Input, nil), nil)
	var r response
	if err := json.Unmarshal(b, &r); code != http.StatusOK || err != nil || argmax(r.Outputs[0].Data) != argmax(floats(t, c.Want)) {
		t.Errorf("the next request: %d %s", code, b)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5s for %s", what)
		}
	}
}

// countedBy is how many infer requests the metrics counted for protocol
// with status code, every model and version.
func countedBy(t testing.TB, s *served, protocol, code string) float64 {
	t.Helper()
	mfs, err := s.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "modelserver_infer_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["protocol"] == protocol && labels["code"] == code {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// TestSlowBody sends part of a body and stalls: the request's deadline
// covers reading it, and the answer is 504.
func TestSlowBody(t *testing.T) {
	s := serve(t, writeRepo(t, mnistConfig, "onnx"), Config{Timeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v2/models/mnist/infer HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100\r\n\r\n{\"inputs\": "); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(b), "reading the body") {
		t.Errorf("a stalled body: %d %s, want 504", resp.StatusCode, b)
	}
}
