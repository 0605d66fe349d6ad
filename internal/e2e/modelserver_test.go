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
	"github.com/fpga-faas/faas/sdk/poolapi"
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

// modelServerPool starts a registry that declares a silent node lost
// after 5 s, and two faasd nodes serving remote attach; env is a host
// without faasd, logged in as alice.
func modelServerPool(t *testing.T) (*platform, map[string]*poolNode, []string) {
	t.Helper()
	p := newPlatform(t, "--node-lost-after", "5s", "--lease-check-interval", "200ms")
	nodes := map[string]*poolNode{}
	for _, name := range []string{"ms-a", "ms-b"} {
		port := freePort(t)
		n := &poolNode{name: name, socket: filepath.Join(p.dir(t, "run-"+name), "faasd.sock"), args: []string{"--hostname", name,
			"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--advertise", fmt.Sprintf("https://127.0.0.1:%d", port), "--heartbeat", "500ms"}}
		n.srv, n.agent = p.startFaasd(t, n.socket, filepath.Join(p.root, name+"-state"), n.args...)
		nodes[name] = n
	}
	ops := as(t, p.regURL, "ops")
	poll(t, startTimeout, "both nodes serving remote attach", func() bool {
		ns, err := ops.Nodes(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, x := range ns.Items {
			if nodes[x.Hostname] != nil && x.Endpoint != "" && x.TLSCertificate != "" {
				k++
			}
		}
		return k == 2
	})
	env := append(slices.Clone(p.env), "FAAS_CONFIG="+filepath.Join(p.root, "ms-faas.json"),
		"FAAS_AGENT=unix://"+filepath.Join(p.root, "no-faasd-here.sock"))
	must(t, env, password+"\n", "faas", "login", p.regURL, "-u", "alice", "--password-stdin")
	return p, nodes, env
}

// readyOn is the nodes of alice's ready attachments, by node name.
func readyOn(t *testing.T, p *platform) map[string]int {
	t.Helper()
	atts, err := as(t, p.regURL, "alice").Attachments(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	on := map[string]int{}
	for _, a := range atts {
		if a.State == poolapi.Ready {
			on[a.Node]++
		}
	}
	return on
}

// protocolFailures checks that every request of tl succeeded or failed
// with the protocol's 503 or Unavailable, and returns how many failed.
func protocolFailures(t *testing.T, tl *tally) int {
	t.Helper()
	failed := 0
	for kind, k := range tl.kinds {
		switch kind {
		case "ok":
		case "http 503", "grpc Unavailable":
			failed += k
		default:
			t.Errorf("%d requests failed with %q, not the protocol's 503 or Unavailable", k, kind)
		}
	}
	return failed
}

// TestModelServerPool serves MNIST, pushed to the registry with faas model
// push and pulled by digest, on two attachments from the pool of that
// registry with two faasd nodes, under REST and gRPC clients. The node of
// an attachment is killed mid-run: the requests that fail, fail with the
// protocol's errors (503, Unavailable), the server attaches again on the
// other node, and every request after that succeeds. Then that node is
// killed too: with no engine left the server is not ready and answers 503
// and Unavailable; the first node is started again, the server attaches
// there and is ready again.
func TestModelServerPool(t *testing.T) {
	p, nodes, env := modelServerPool(t)
	repo, cases := mnistRepo(t)
	ref, tokenFile := pushModel(t, p, repo, "mnist")
	ms := startModelServer(t, env, "", "-model", "mnist="+ref, "-model-cache", t.TempDir(), "-registry-user", "acme",
		"-registry-token-file", tokenFile, "-attach", "acme/alidnn-dual", "-attachments", "2", "-registry", p.regURL)
	if up := ms.metric(t, "modelserver_engines_up"); up != 2 {
		t.Fatalf("%v engines up, want 2", up)
	}
	var victim, survivor *poolNode
	for name := range readyOn(t, p) {
		victim = nodes[name]
	}
	for _, n := range nodes {
		if n != victim {
			survivor = n
		}
	}

	stop := make(chan struct{})
	var during *tally
	ran := make(chan struct{})
	go func() {
		during = ms.clients(t, cases, 0, stop)
		close(ran)
	}()
	poll(t, startTimeout, "requests before the kill", func() bool { return ms.metric(t, "modelserver_infer_requests_total") >= 40 })
	kill(t, victim.srv)
	t.Logf("killed node %s under load", victim.name)
	poll(t, startTimeout, "the server to attach again", func() bool {
		return ms.metric(t, "modelserver_engine_reopens_total") >= 1 && ms.metric(t, "modelserver_engines_up") == 2
	})
	close(stop)
	<-ran
	ms.waitReady(t)
	// The lost attachment was detached, or the registry marked it lost.
	poll(t, startTimeout, "two ready attachments, on the node left", func() bool {
		on := readyOn(t, p)
		return on[survivor.name] == 2 && on[victim.name] == 0
	})
	t.Logf("during the kill and the reattach: %v (%d failed with the protocol's errors)", during, protocolFailures(t, during))
	if after := ms.clients(t, cases, 25, nil); after.get("ok") != 100 {
		t.Errorf("after the reattach: %v, want 100 ok", after)
	}
	if dev := ms.metric(t, "modelserver_device_seconds_total"); dev <= 0 {
		t.Errorf("device time %v, want some", dev)
	}

	// No node left: not ready, 503 and Unavailable, until a node returns.
	kill(t, survivor.srv)
	poll(t, startTimeout, "the server not ready with no engine", func() bool { return !ms.ready() })
	conn, err := grpc.NewClient(ms.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if rest, rpc := ms.restInfer(t.Context(), cases[0]), grpcInfer(t.Context(), conn, cases[0]); rest != "http 503" || rpc != "grpc Unavailable" {
		t.Errorf("with no engine: REST %s, gRPC %s; want http 503 and grpc Unavailable", rest, rpc)
	}
	victim.srv, victim.agent = p.startFaasd(t, victim.socket, filepath.Join(p.root, victim.name+"-state"), victim.args...)
	ms.waitReady(t)
	if after := ms.clients(t, cases, 10, nil); after.get("ok") != 40 {
		t.Errorf("after %s came back: %v, want 40 ok", victim.name, after)
	}
}

// TestModelServerSlots serves MNIST on two slots of the local faasd,
// loaded with the AliDNN image, through the SDK; faasd is killed (the
// server is not ready, requests fail with 503) and started again (the
// server opens the slots again and answers).
func TestModelServerSlots(t *testing.T) {
	p := newPlatform(t)
	socket := filepath.Join(p.dir(t, "run"), "faasd.sock")
	state := filepath.Join(p.root, "faasd-state")
	faasd, _ := p.startFaasd(t, socket, state)
	env := append(slices.Clone(p.env), "FAAS_CONFIG="+filepath.Join(p.root, "alice-faas.json"), "FAAS_AGENT=unix://"+socket)
	must(t, env, password+"\n", "faas", "login", p.regURL, "-u", "alice", "--password-stdin")
	var l struct{ Slots []int }
	if err := json.Unmarshal([]byte(must(t, env, "", "faas", "load", "--json", p.dual.ref)), &l); err != nil || len(l.Slots) != 2 {
		t.Fatalf("faas load: %+v %v", l, err)
	}
	repo, cases := mnistRepo(t)
	ms := startModelServer(t, env, repo, "-slots", fmt.Sprintf("%d,%d", l.Slots[0], l.Slots[1]))
	if got := ms.clients(t, cases, 5, nil); got.get("ok") != 20 {
		t.Fatalf("on slots %v: %v, want 20 ok", l.Slots, got)
	}
	if err := faasd.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-faasd.done
	poll(t, startTimeout, "the server to drop the slots", func() bool { return !ms.ready() })
	if got := ms.restInfer(t.Context(), cases[0]); got != "http 503" {
		t.Errorf("a request with faasd down: %s, want http 503", got)
	}
	p.startFaasd(t, socket, state)
	ms.waitReady(t)
	if got := ms.clients(t, cases, 5, nil); got.get("ok") != 20 {
		t.Errorf("after faasd's restart: %v, want 20 ok", got)
	}
	if n := ms.metric(t, "modelserver_engine_reopens_total"); n != 2 {
		t.Errorf("%v reopens, want 2 (both slots)", n)
	}
}
