package modelserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	alidnnmodel "github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/classify"
	"github.com/fpga-faas/faas/sdk/onnx"
	"github.com/prometheus/client_golang/prometheus"
)

// mnistInput and mnistOutput are the MNIST model's tensors, as its ONNX
// file names them.
const (
	mnistInput  = "Input3"
	mnistOutput = "Plus214_Output_0"
)

// mnistDir is the MNIST model of the test data, with its reference sets.
func mnistDir(t testing.TB) string {
	return testenv.TestData(t, "onnx", "models", "mnist")
}

// mnistCases are the MNIST reference inputs (renamed to the model's input)
// and outputs.
func mnistCases(t testing.TB) []classify.Case {
	t.Helper()
	cases, err := classify.ReadCases(mnistDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		c.Input.Name = mnistInput
	}
	return cases
}

// writeRepo makes a repository holding the MNIST model as model "mnist",
// with config and one version per entry of versions: "onnx" for
// model.onnx, "program" for a precompiled model.alidnn, "batched" for one
// compiled for 3 samples a run.
func writeRepo(t testing.TB, config string, versions ...string) string {
	t.Helper()
	repo := t.TempDir()
	dir := filepath.Join(repo, "mnist")
	src, err := os.ReadFile(filepath.Join(mnistDir(t), "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	for k, kind := range versions {
		vdir := filepath.Join(dir, strconv.Itoa(k+1))
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if kind == "program" || kind == "batched" {
			batch := map[string]int{"program": 1, "batched": 3}[kind]
			p, err := alidnn.Compile(decodeModel(t, src), alidnn.ForBatch(batch))
			if err != nil {
				t.Fatal(err)
			}
			if err := p.WriteFile(filepath.Join(vdir, ProgramFile)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(filepath.Join(vdir, ONNXFile), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return repo
}

func decodeModel(t testing.TB, b []byte) *onnx.Model {
	t.Helper()
	m, err := onnx.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// simEngine is an AliDNN engine on a simulated board of its own.
func simEngine(t testing.TB) alidnn.Engine {
	t.Helper()
	dev, err := alidnnmodel.NewLocal(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return alidnn.NewLocal(dev)
}

// served is a loaded Server behind an httptest server.
type served struct {
	*Server
	URL     string
	metrics *prometheus.Registry
}

// serve starts a Server on repo with cfg (Repository and, if none are
// given, Engines filled in), loads it and serves it.
func serve(t testing.TB, repo string, cfg Config) *served {
	t.Helper()
	cfg.Repository = repo
	if len(cfg.Engines)+len(cfg.Openers) == 0 {
		cfg.Engines = []alidnn.Engine{simEngine(t)}
	}
	reg := prometheus.NewRegistry()
	cfg.Metrics = NewMetrics(reg)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); s.Close(context.Background()) })
	return &served{Server: s, URL: hs.URL, metrics: reg}
}

const mnistConfig = `{"name": "mnist", "max_batch_size": 4}`

// jsonInfer is an infer request body with the tensor as JSON data.
func jsonInfer(t testing.TB, id string, in *onnx.Tensor, params map[string]any) []byte {
	t.Helper()
	f, err := in.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	req := map[string]any{"id": id, "inputs": []map[string]any{{"name": in.Name, "shape": in.Dims, "datatype": "FP32", "data": f}}}
	if params != nil {
		req["parameters"] = params
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends body to url and returns the status, the headers and the body.
func post(t testing.TB, url string, body []byte, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// response is an $inference_response as a client decodes it.
type response struct {
	ModelName    string `json:"model_name"`
	ModelVersion string `json:"model_version"`
	ID           string `json:"id"`
	Outputs      []struct {
		Name       string           `json:"name"`
		Shape      []int64          `json:"shape"`
		Datatype   string           `json:"datatype"`
		Parameters map[string]int64 `json:"parameters"`
		Data       []float32        `json:"data"`
	} `json:"outputs"`
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

func floats(t testing.TB, tensor *onnx.Tensor) []float32 {
	t.Helper()
	f, err := tensor.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// gatedEngine holds every job back until open is closed, so that tests can
// fill queues and pass deadlines.
type gatedEngine struct {
	alidnn.Engine
	open chan struct{}
}

func (g gatedEngine) Program(ctx context.Context, insns []isa.Insn) (alidnn.Code, error) {
	c, err := g.Engine.Program(ctx, insns)
	return gatedCode{c, g.open}, err
}

type gatedCode struct {
	alidnn.Code
	open chan struct{}
}

func (g gatedCode) Submit(ctx context.Context) (alidnn.Job, error) {
	<-g.open
	return g.Code.Submit(ctx)
}
