package modelserver

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
	"github.com/fpga-faas/faas/services/modelserver/inferencepb"
)

// grpcServed is a Server behind both its REST handler and its gRPC
// server, with a client of the generated stubs.
type grpcServed struct {
	*served
	Addr   string
	client inferencepb.GRPCInferenceServiceClient
}

// serveGRPC is serve with the gRPC service on a loopback listener as well.
func serveGRPC(t testing.TB, repo string, cfg Config) *grpcServed {
	t.Helper()
	s := serve(t, repo, cfg)
	addr, client := listenGRPC(t, s.Server)
	return &grpcServed{served: s, Addr: addr, client: client}
}

// listenGRPC serves s's gRPC service on a loopback port and dials it.
func listenGRPC(t testing.TB, s *Server) (string, inferencepb.GRPCInferenceServiceClient) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := s.GRPCServer()
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(math.MaxInt32)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return ln.Addr().String(), inferencepb.NewGRPCInferenceServiceClient(conn)
}

// typedInfer is a ModelInfer request for MNIST with the input as typed
// contents.
func typedInfer(t testing.TB, id string, in *onnx.Tensor) *inferencepb.ModelInferRequest {
	return &inferencepb.ModelInferRequest{ModelName: "mnist", Id: id, Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
		{Name: in.Name, Datatype: "FP32", Shape: in.Dims, Contents: &inferencepb.InferTensorContents{Fp32Contents: floats(t, in)}}}}
}

// rawInfer is a ModelInfer request for MNIST with the input as
// raw_input_contents.
func rawInfer(t testing.TB, id string, in *onnx.Tensor) *inferencepb.ModelInferRequest {
	var data []byte
	for _, x := range floats(t, in) {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
	}
	return &inferencepb.ModelInferRequest{ModelName: "mnist", Id: id, RawInputContents: [][]byte{data},
		Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{{Name: in.Name, Datatype: "FP32", Shape: in.Dims}}}
}

// rawFloats decodes a raw FP32 tensor.
func rawFloats(t testing.TB, b []byte) []float32 {
	t.Helper()
	if len(b)%4 != 0 {
		t.Fatalf("%d raw bytes are no FP32 tensor", len(b))
	}
	f := make([]float32, len(b)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f
}

// TestGRPCHealthAndMetadata asks every health and metadata RPC, and checks
// the answers equal what the REST side says.
func TestGRPCHealthAndMetadata(t *testing.T) {
	s := serveGRPC(t, writeRepo(t, mnistConfig, "onnx", "onnx"), Config{Version: "test"})
	ctx := context.Background()
	if r, err := s.client.ServerLive(ctx, &inferencepb.ServerLiveRequest{}); err != nil || !r.GetLive() {
		t.Errorf("ServerLive: %v, %v", r, err)
	}
	if r, err := s.client.ServerReady(ctx, &inferencepb.ServerReadyRequest{}); err != nil || !r.GetReady() {
		t.Errorf("ServerReady: %v, %v", r, err)
	}
	for _, v := range []string{"", "1", "2"} {
		if r, err := s.client.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: "mnist", Version: v}); err != nil || !r.GetReady() {
			t.Errorf("ModelReady version %q: %v, %v", v, r, err)
		}
	}
	meta, err := s.client.ServerMetadata(ctx, &inferencepb.ServerMetadataRequest{})
	if err != nil || meta.GetName() != DefaultName || meta.GetVersion() != "test" || !slices.Equal(meta.GetExtensions(), grpcExtensions) {
		t.Errorf("ServerMetadata: %v, %v", meta, err)
	}
	mm, err := s.client.ModelMetadata(ctx, &inferencepb.ModelMetadataRequest{Name: "mnist"})
	want := &inferencepb.ModelMetadataResponse{Name: "mnist", Versions: []string{"1", "2"}, Platform: Platform,
		Inputs:  []*inferencepb.ModelMetadataResponse_TensorMetadata{{Name: mnistInput, Datatype: "FP32", Shape: []int64{1, 1, 28, 28}}},
		Outputs: []*inferencepb.ModelMetadataResponse_TensorMetadata{{Name: mnistOutput, Datatype: "FP32", Shape: []int64{1, 10}}}}
	if err != nil || !proto.Equal(mm, want) {
		t.Errorf("ModelMetadata: %v, %v\nwant %v", mm, err, want)
	}
	for _, c := range []struct{ name, version string }{{"nope", ""}, {"mnist", "7"}} {
		_, err := s.client.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: c.name, Version: c.version})
		if status.Code(err) != codes.NotFound {
			t.Errorf("ModelReady %s version %q: %v, want NotFound", c.name, c.version, err)
		}
		_, err = s.client.ModelMetadata(ctx, &inferencepb.ModelMetadataRequest{Name: c.name, Version: c.version})
		if status.Code(err) != codes.NotFound {
			t.Errorf("ModelMetadata %s version %q: %v, want NotFound", c.name, c.version, err)
		}
	}
}

// TestGRPCNotReady serves a server whose models are not loaded: readiness
// is false, and an infer is Unavailable.
func TestGRPCNotReady(t *testing.T) {
	s, err := New(Config{Repository: t.TempDir(), Engines: []alidnn.Engine{simEngine(t)}})
	if err != nil {
		t.Fatal(err)
	}
	_, client := listenGRPC(t, s)
	ctx := context.Background()
	if r, err := client.ServerReady(ctx, &inferencepb.ServerReadyRequest{}); err != nil || r.GetReady() {
		t.Errorf("ServerReady before Load: %v, %v", r, err)
	}
	if r, err := client.ModelReady(ctx, &inferencepb.ModelReadyRequest{Name: "mnist"}); err != nil || r.GetReady() {
		t.Errorf("ModelReady before Load: %v, %v", r, err)
	}
	if _, err := client.ModelInfer(ctx, typedInfer(t, "", mnistCases(t)[0].Input)); status.Code(err) != codes.Unavailable {
		t.Errorf("ModelInfer before Load: %v, want Unavailable", err)
	}
}

// TestGRPCInfer classifies every reference digit with typed contents and
// with raw contents: the typed and raw scores are the same, and the raw
// ones equal, byte for byte, the binary answer of the REST side to the
// same input.
func TestGRPCInfer(t *testing.T) {
	s := serveGRPC(t, writeRepo(t, mnistConfig, "onnx"), Config{})
	ctx := context.Background()
	for _, c := range mnistCases(t) {
		typed, err := s.client.ModelInfer(ctx, typedInfer(t, c.Name, c.Input))
		if err != nil {
			t.Fatalf("%s typed: %v", c.Name, err)
		}
		if typed.GetModelName() != "mnist" || typed.GetModelVersion() != "1" || typed.GetId() != c.Name || len(typed.GetOutputs()) != 1 ||
			len(typed.GetRawOutputContents()) != 0 {
			t.Fatalf("%s typed: answer %v", c.Name, typed)
		}
		o := typed.GetOutputs()[0]
		if o.GetName() != mnistOutput || o.GetDatatype() != "FP32" || !slices.Equal(o.GetShape(), []int64{1, 10}) {
			t.Fatalf("%s typed: output %v", c.Name, o)
		}
		scores := o.GetContents().GetFp32Contents()
		if got, want := argmax(scores), argmax(floats(t, c.Want)); got != want {
			t.Errorf("%s typed: digit %d, the reference says %d", c.Name, got, want)
		}
		raw, err := s.client.ModelInfer(ctx, rawInfer(t, c.Name, c.Input))
		if err != nil {
			t.Fatalf("%s raw: %v", c.Name, err)
		}
		if len(raw.GetRawOutputContents()) != 1 || raw.GetOutputs()[0].GetContents() != nil {
			t.Fatalf("%s raw: answer %v", c.Name, raw)
		}
		if got := rawFloats(t, raw.GetRawOutputContents()[0]); !slices.Equal(got, scores) {
			t.Errorf("%s: raw scores %v, typed %v", c.Name, got, scores)
		}
		body, hdr := binaryInfer(t, c.Input, true)
		code, h, b := post(t, s.URL+"/v2/models/mnist/infer", body, hdr)
		if code != http.StatusOK {
			t.Fatalf("%s REST: %d %s", c.Name, code, b)
		}
		n := len(b) - len(raw.GetRawOutputContents()[0])
		if h.Get(headerLength) != fmt.Sprint(n) || !bytes.Equal(b[n:], raw.GetRawOutputContents()[0]) {
			t.Errorf("%s: the REST binary answer %x differs from the gRPC raw answer %x", c.Name, b, raw.GetRawOutputContents()[0])
		}
	}
	// binary_data_output asks for raw outputs from typed inputs.
	c := mnistCases(t)[0]
	req := typedInfer(t, "", c.Input)
	req.Parameters = map[string]*inferencepb.InferParameter{"binary_data_output": {ParameterChoice: &inferencepb.InferParameter_BoolParam{BoolParam: true}}}
	r, err := s.client.ModelInfer(ctx, req)
	if err != nil || len(r.GetRawOutputContents()) != 1 || argmax(rawFloats(t, r.GetRawOutputContents()[0])) != argmax(floats(t, c.Want)) {
		t.Errorf("binary_data_output: %v, %v", r, err)
	}
	if n := countedBy(t, s.served, "grpc", "200"); n != float64(2*len(mnistCases(t))+1) {
		t.Errorf("%v gRPC infers counted, want %d", n, 2*len(mnistCases(t))+1)
	}
}

// TestGRPCConcurrent runs many gRPC clients at once on one connection:
// their requests are coalesced into engine jobs (held for one another, as
// in TestInferConcurrentBatched), and every answer equals a direct
// Session.Run of the same program, bit for bit.
func TestGRPCConcurrent(t *testing.T) {
	s := serveGRPC(t, writeRepo(t, mnistHeldConfig, "onnx"), Config{Pipeline: 1})
	cases := mnistCases(t)
	want := directScores(t, cases)
	const clients = 16
	for round := 0; round < 5 && maxBatch(t, s.served) < 2; round++ {
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for k := range clients {
			wg.Go(func() {
				id := fmt.Sprintf("r%d-%d", round, k)
				r, err := s.client.ModelInfer(context.Background(), rawInfer(t, id, cases[k%len(cases)].Input))
				if err != nil {
					errs <- fmt.Errorf("client %d: %w", k, err)
					return
				}
				if got := rawFloats(t, r.GetRawOutputContents()[0]); r.GetId() != id || !slices.Equal(got, want[k%len(cases)]) {
					errs <- fmt.Errorf("client %d: id %q, scores %v; want id %q, scores %v", k, r.GetId(), got, id, want[k%len(cases)])
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	if b := maxBatch(t, s.served); b < 2 {
		t.Errorf("no request shared an engine job with another (largest batch %v)", b)
	}
}

// TestGRPCQueueFullAndTimeout holds the engine's jobs back: the model's
// queue fills, the next request is Unavailable (Triton's answer to a full
// queue), and the ones admitted end DeadlineExceeded.
func TestGRPCQueueFullAndTimeout(t *testing.T) {
	gate := make(chan struct{})
	s := serveGRPC(t, writeRepo(t, `{"name": "mnist", "max_queue_size": 2}`, "onnx"),
		Config{Engines: []alidnn.Engine{gatedEngine{simEngine(t), gate}}, Timeout: 2 * time.Second})
	t.Cleanup(func() { close(gate) })
	req := rawInfer(t, "", mnistCases(t)[0].Input)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := s.client.ModelInfer(context.Background(), req)
			errs <- err
		}()
	}
	waitFor(t, "two requests to be admitted", func() bool { return len(s.models["mnist"].queue) == 2 })
	if _, err := s.client.ModelInfer(context.Background(), req); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "queue full") {
		t.Errorf("a third request: %v, want Unavailable", err)
	}
	for range 2 {
		if err := <-errs; status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("a held request: %v, want DeadlineExceeded", err)
		}
	}
	if n := countedBy(t, s.served, "grpc", "429"); n != 1 {
		t.Errorf("%v full-queue refusals counted for gRPC, want 1", n)
	}
}

// TestGRPCErrors sends ModelInfer requests the protocol refuses and checks
// the status code and message of each.
func TestGRPCErrors(t *testing.T) {
	s := serveGRPC(t, writeRepo(t, mnistConfig, "onnx"), Config{MaxBodyBytes: 64 << 10})
	in := mnistCases(t)[0].Input
	edit := func(f func(r *inferencepb.ModelInferRequest)) *inferencepb.ModelInferRequest {
		r := typedInfer(t, "", in)
		f(r)
		return r
	}
	editRaw := func(f func(r *inferencepb.ModelInferRequest)) *inferencepb.ModelInferRequest {
		r := rawInfer(t, "", in)
		f(r)
		return r
	}
	str := func(v string) *inferencepb.InferParameter {
		return &inferencepb.InferParameter{ParameterChoice: &inferencepb.InferParameter_StringParam{StringParam: v}}
	}
	for _, c := range []struct {
		name string
		req  *inferencepb.ModelInferRequest
		code codes.Code
		says string
	}{
		{"unknown model", edit(func(r *inferencepb.ModelInferRequest) { r.ModelName = "nope" }), codes.NotFound, `no model "nope"`},
		{"unknown version", edit(func(r *inferencepb.ModelInferRequest) { r.ModelVersion = "7" }), codes.NotFound, `no version "7"`},
		{"unknown input", edit(func(r *inferencepb.ModelInferRequest) { r.Inputs[0].Name = "x" }), codes.InvalidArgument, `unknown input "x"`},
		{"missing input", edit(func(r *inferencepb.ModelInferRequest) { r.Inputs = nil }), codes.InvalidArgument, "missing"},
		{"input twice", edit(func(r *inferencepb.ModelInferRequest) { r.Inputs = append(r.Inputs, r.Inputs[0]) }), codes.InvalidArgument, "twice"},
		{"wrong shape", edit(func(r *inferencepb.ModelInferRequest) { r.Inputs[0].Shape = []int64{1, 28, 28} }), codes.InvalidArgument, "shape [1 28 28]"},
		{"wrong datatype", edit(func(r *inferencepb.ModelInferRequest) { r.Inputs[0].Datatype = "INT64" }), codes.InvalidArgument, "is INT64, the model takes FP32"},
		{"too few elements", edit(func(r *inferencepb.ModelInferRequest) { r.Inputs[0].Contents.Fp32Contents = []float32{1, 2} }),
			codes.InvalidArgument, "2 elements"},
		{"contents of another type", edit(func(r *inferencepb.ModelInferRequest) { r.Inputs[0].Contents.Int64Contents = []int64{1} }),
			codes.InvalidArgument, "other types' fields"},
		{"no contents", edit(func(r *inferencepb.ModelInferRequest) { r.Inputs[0].Contents = nil }), codes.InvalidArgument, "no contents"},
		{"raw and typed contents", editRaw(func(r *inferencepb.ModelInferRequest) {
			r.Inputs[0].Contents = &inferencepb.InferTensorContents{Fp32Contents: floats(t, in)}
		}), codes.InvalidArgument, "has contents and the request raw_input_contents"},
		{"raw contents too short", editRaw(func(r *inferencepb.ModelInferRequest) { r.RawInputContents[0] = r.RawInputContents[0][4:] }),
			codes.InvalidArgument, "3132 bytes of binary data"},
		{"raw contents for fewer inputs", editRaw(func(r *inferencepb.ModelInferRequest) { r.RawInputContents = append(r.RawInputContents, nil) }),
			codes.InvalidArgument, "2 raw_input_contents for 1 inputs"},
		{"unknown output", edit(func(r *inferencepb.ModelInferRequest) {
			r.Outputs = []*inferencepb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y"}}
		}), codes.InvalidArgument, `unknown output "y"`},
		{"binary_data_output not a boolean", edit(func(r *inferencepb.ModelInferRequest) {
			r.Parameters = map[string]*inferencepb.InferParameter{"binary_data_output": str("yes")}
		}), codes.InvalidArgument, "not a boolean"},
		{"too large", editRaw(func(r *inferencepb.ModelInferRequest) { r.RawInputContents[0] = make([]byte, 64<<10) }),
			codes.ResourceExhausted, "larger than max"},
	} {
		_, err := s.client.ModelInfer(context.Background(), c.req)
		if st, _ := status.FromError(err); st.Code() != c.code || !strings.Contains(st.Message(), c.says) {
			t.Errorf("%s: %v; want %v and a message saying %q", c.name, err, c.code, c.says)
		}
	}
}

// stallConn passes the first left bytes written to it and then holds
// every write back until stop is closed, as a client that stops sending
// in the middle of a message does.
type stallConn struct {
	net.Conn
	mu   sync.Mutex
	left int
	stop chan struct{} // closed by the test
}

func (c *stallConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	n := min(len(b), c.left)
	c.left -= n
	c.mu.Unlock()
	if n > 0 {
		if _, err := c.Conn.Write(b[:n]); err != nil {
			return 0, err
		}
	}
	if n < len(b) {
		<-c.stop
		return n, net.ErrClosed
	}
	return n, nil
}

// TestGRPCSlowMessage sends the headers of a ModelInfer call and part of
// its message, then stalls, with no deadline of its own: the server's
// deadline covers reading the message, and the call ends DeadlineExceeded
// soon after it.
func TestGRPCSlowMessage(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := serveGRPC(t, writeRepo(t, mnistConfig, "onnx"), Config{Timeout: timeout})
	stop := make(chan struct{})
	dial := func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		// Enough for the connection preface, the settings and the call's
		// headers; the 3 KiB message is cut short.
		return &stallConn{Conn: c, left: 1500, stop: stop}, nil
	}
	conn, err := grpc.NewClient("passthrough:///"+s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	// Released before the client closes, which would wait for its stalled
	// writes first.
	defer conn.Close()
	defer close(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 20*timeout)
	defer cancel()
	start := time.Now()
	_, err = inferencepb.NewGRPCInferenceServiceClient(conn).ModelInfer(ctx, rawInfer(t, "", mnistCases(t)[0].Input))
	if took := time.Since(start); status.Code(err) != codes.DeadlineExceeded || took > 10*timeout {
		t.Errorf("a stalled message: %v after %v; want DeadlineExceeded from the server after about %v", err, took, timeout)
	}
}
