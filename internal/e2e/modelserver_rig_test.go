package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// modelServer is a modelserver process serving MNIST.
type modelServer struct {
	srv        *server
	url        string // REST
	grpcAddr   string
	metricsURL string
}

// digitCase is an MNIST reference input and the digit it shows.
type digitCase struct {
	input []float32
	digit int
}

// mnistRepo is a model repository holding the test data's MNIST model as
// model "mnist", and its reference digits.
func mnistRepo(t *testing.T) (string, []digitCase) {
	t.Helper()
	src := testenv.TestData(t, "onnx/models/mnist")
	repo := t.TempDir()
	model, err := os.ReadFile(filepath.Join(src, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "mnist", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"mnist/config.json": []byte(`{"name": "mnist", "max_batch_size": 4}`), "mnist/1/model.onnx": model} {
		if err := os.WriteFile(filepath.Join(repo, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var cases []digitCase
	for _, set := range []string{"test_data_set_0", "test_data_set_1"} {
		in, err := onnx.ReadTensor(filepath.Join(src, set, "input_0.pb"))
		if err != nil {
			t.Fatal(err)
		}
		out, err := onnx.ReadTensor(filepath.Join(src, set, "output_0.pb"))
		if err != nil {
			t.Fatal(err)
		}
		x, err1 := in.Float32s()
		y, err2 := out.Float32s()
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, digitCase{input: x, digit: argmax(y)})
	}
	return repo, cases
}

// pushModel pushes the model of repo named name (its config.json and
// version 1's model.onnx) with faas model push, as the ISV acme, to its
// repository acme/NAME-model. It returns the reference pinned to the
// pushed digest and a file holding an API token of acme's, which the model
// server pulls it with.
func pushModel(t *testing.T, p *platform, repo, name string) (ref, tokenFile string) {
	t.Helper()
	env := append(slices.Clone(p.env), "FAAS_CONFIG="+filepath.Join(p.root, "acme-faas.json"))
	must(t, env, password+"\n", "faas", "login", p.regURL, "-u", "acme", "--password-stdin")
	var out struct{ Ref, Digest string }
	if err := json.Unmarshal([]byte(must(t, env, "", "faas", "model", "push", "--json", "acme/"+name+"-model:1",
		"--config", filepath.Join(repo, name, "config.json"), filepath.Join(repo, name, "1", "model.onnx"))), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Digest, "sha256:") {
		t.Fatalf("faas model push: %+v", out)
	}
	host, _, _ := strings.Cut(out.Ref, "/")
	tokenFile = filepath.Join(t.TempDir(), "acme.token")
	if err := os.WriteFile(tokenFile, []byte(newToken(t, p.regURL, "acme", "modelserver")), 0o600); err != nil {
		t.Fatal(err)
	}
	return host + "/acme/" + name + "-model@" + out.Digest, tokenFile
}

func argmax(f []float32) int {
	k := 0
	for i, x := range f {
		if x > f[k] {
			k = i
		}
	}
	return k
}

// startModelServer runs modelserver on repo with args and waits until it
// is ready.
func startModelServer(t *testing.T, env []string, repo string, args ...string) *modelServer {
	t.Helper()
	rest, rpc, metrics := freePort(t), freePort(t), freePort(t)
	ms := &modelServer{url: fmt.Sprintf("http://127.0.0.1:%d", rest), grpcAddr: fmt.Sprintf("127.0.0.1:%d", rpc),
		metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)}
	flags := []string{"-listen", ms.url[len("http://"):], "-grpc-listen", ms.grpcAddr, "-metrics", fmt.Sprintf("127.0.0.1:%d", metrics)}
	if repo != "" {
		flags = append(flags, "-repo", repo)
	}
	ms.srv = startServer(t, env, "modelserver", append(flags, args...)...)
	ms.waitReady(t)
	return ms
}

func (ms *modelServer) ready() bool {
	resp, err := http.Get(ms.url + "/v2/health/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (ms *modelServer) waitReady(t *testing.T) {
	t.Helper()
	poll(t, startTimeout, "the model server to be ready", func() bool {
		if ms.srv.exited() {
			t.Fatalf("modelserver exited: %v\n%s", ms.srv.cmd.ProcessState, tail(ms.srv.stderr.String()))
		}
		return ms.ready()
	})
}

// metric is the sum of the samples of a metric in the server's
// Prometheus text.
func (ms *modelServer) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get(ms.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if line != name && !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// restInfer classifies c over REST, with plain net/http: "ok", or the
// kind of failure ("http 503", "wrong digit 3", a transport error).
func (ms *modelServer) restInfer(ctx context.Context, c digitCase) string {
	body, _ := json.Marshal(map[string]any{"inputs": []map[string]any{{"name": "Input3", "shape": []int{1, 1, 28, 28}, "datatype": "FP32", "data": c.input}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ms.url+"/v2/models/mnist/infer", bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "transport: " + err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "reading: " + err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			return fmt.Sprintf("http %d without the protocol's error object: %s", resp.StatusCode, b)
		}
		return fmt.Sprintf("http %d", resp.StatusCode)
	}
	var r struct{ Outputs []struct{ Data []float32 } }
	if err := json.Unmarshal(b, &r); err != nil || len(r.Outputs) != 1 {
		return fmt.Sprintf("answer %s: %v", b, err)
	}
	if d := argmax(r.Outputs[0].Data); d != c.digit {
		return fmt.Sprintf("wrong digit %d", d)
	}
	return "ok"
}

// rawCodec sends and receives protobuf messages as bytes: the test
// encodes the protocol's messages itself, as a client in any language
// could, instead of importing the server's generated code.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = slices.Clone(data)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// grpcInfer classifies c with ModelInfer, raw input contents: "ok" or the
// kind of failure ("grpc Unavailable", ...).
func grpcInfer(ctx context.Context, conn *grpc.ClientConn, c digitCase) string {
	var tensor []byte
	tensor = protowire.AppendTag(tensor, 1, protowire.BytesType)
	tensor = protowire.AppendString(tensor, "Input3")
	tensor = protowire.AppendTag(tensor, 2, protowire.BytesType)
	tensor = protowire.AppendString(tensor, "FP32")
	var shape []byte
	for _, d := range []uint64{1, 1, 28, 28} {
		shape = protowire.AppendVarint(shape, d)
	}
	tensor = protowire.AppendTag(tensor, 3, protowire.BytesType)
	tensor = protowire.AppendBytes(tensor, shape)
	raw := make([]byte, 4*len(c.input))
	for k, x := range c.input {
		binary.LittleEndian.PutUint32(raw[4*k:], math.Float32bits(x))
	}
	var req []byte
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendString(req, "mnist")
	req = protowire.AppendTag(req, 5, protowire.BytesType)
	req = protowire.AppendBytes(req, tensor)
	req = protowire.AppendTag(req, 7, protowire.BytesType)
	req = protowire.AppendBytes(req, raw)
	var resp []byte
	err := conn.Invoke(ctx, "/inference.GRPCInferenceService/ModelInfer", &req, &resp, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		if st, ok := status.FromError(err); ok {
			return "grpc " + st.Code().String()
		}
		return "grpc: " + err.Error()
	}
	for len(resp) > 0 {
		num, typ, n := protowire.ConsumeTag(resp)
		if n < 0 {
			return "bad answer"
		}
		resp = resp[n:]
		if num == 6 && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(resp)
			if m < 0 || len(v) != 40 {
				return fmt.Sprintf("raw output of %d bytes", len(v))
			}
			scores := make([]float32, 10)
			for k := range scores {
				scores[k] = math.Float32frombits(binary.LittleEndian.Uint32(v[4*k:]))
			}
			if d := argmax(scores); d != c.digit {
				return fmt.Sprintf("wrong digit %d", d)
			}
			return "ok"
		}
		m := protowire.ConsumeFieldValue(num, typ, resp)
		if m < 0 {
			return "bad answer"
		}
		resp = resp[m:]
	}
	return "no raw output"
}

// tally counts the outcomes of requests by kind.
type tally struct {
	mu    sync.Mutex
	kinds map[string]int
}

func (tl *tally) add(kind string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.kinds == nil {
		tl.kinds = map[string]int{}
	}
	tl.kinds[kind]++
}

func (tl *tally) get(kind string) int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.kinds[kind]
}

func (tl *tally) String() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return fmt.Sprint(tl.kinds)
}

// clients runs two REST and two gRPC clients on ms, each sending requests
// one after the other, n each or, with n 0, until stop is closed.
func (ms *modelServer) clients(t *testing.T, cases []digitCase, n int, stop <-chan struct{}) *tally {
	t.Helper()
	conn, err := grpc.NewClient(ms.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tl := &tally{}
	var wg sync.WaitGroup
	for k := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; n == 0 || i < n; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Within the server's own 30 s deadline: a request that
				// hangs past it is a failure of its own kind.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				c := cases[(k+i)%len(cases)]
				if k%2 == 0 {
					tl.add(ms.restInfer(ctx, c))
				} else {
					tl.add(grpcInfer(ctx, conn, c))
				}
				cancel()
			}
		}()
	}
	if n == 0 {
		<-stop
	}
	wg.Wait()
	return tl
}
