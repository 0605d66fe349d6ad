package modelserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/classify"
)

// TestNotReadyUntilLoaded serves before Load: the server is live, not
// ready, and model requests answer 503; after Load all of them succeed.
func TestNotReadyUntilLoaded(t *testing.T) {
	s, err := New(Config{Repository: writeRepo(t, mnistConfig, "onnx"), Engines: []alidnn.Engine{simEngine(t)}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	defer s.Close(context.Background())
	get := func(path string) int {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	body := jsonInfer(t, "", mnistCases(t)[0].Input, nil)
	for k, want := range []int{http.StatusServiceUnavailable, http.StatusOK} {
		if got := get("/v2/health/live"); got != http.StatusOK {
			t.Errorf("live: %d", got)
		}
		if got := get("/v2/health/ready"); got != want {
			t.Errorf("ready: %d, want %d", got, want)
		}
		if got := get("/v2/models/mnist/ready"); got != want {
			t.Errorf("model ready: %d, want %d", got, want)
		}
		if got, _, b := post(t, hs.URL+"/v2/models/mnist/infer", body, nil); got != want {
			t.Errorf("infer: %d %s, want %d", got, b, want)
		}
		if k == 0 {
			if err := s.Load(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestVersions serves a compiled version, a precompiled one and one
// precompiled for 3 samples a run: metadata lists them all, with one
// sample's shape each, a request naming none goes to the latest, and each
// answers the reference digit.
func TestVersions(t *testing.T) {
	s := serve(t, writeRepo(t, `{"name": "mnist", "input": [{"name": "Input3", "dims": [1, 1, 28, 28]}]}`, "onnx", "program", "batched"), Config{})
	for _, v := range []string{"1", "2", "3"} {
		var meta struct {
			Versions        []string
			Inputs, Outputs []metadataTensor
		}
		resp, err := http.Get(s.URL + "/v2/models/mnist/versions/" + v)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&meta)
		resp.Body.Close()
		if err != nil || strings.Join(meta.Versions, ",") != "1,2,3" ||
			fmt.Sprint(meta.Inputs[0].Shape, meta.Outputs[0].Shape) != "[1 1 28 28] [1 10]" {
			t.Errorf("version %s: metadata %+v (%v), want versions 1 to 3 and one sample's shapes", v, meta, err)
		}
	}
	c := mnistCases(t)[1]
	for path, ver := range map[string]string{"/v2/models/mnist/infer": "3", "/v2/models/mnist/versions/1/infer": "1", "/v2/models/mnist/versions/2/infer": "2"} {
		code, _, b := post(t, s.URL+path, jsonInfer(t, "", c.Input, nil), nil)
		var r response
		if err := json.Unmarshal(b, &r); code != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %s", path, code, b)
		}
		if r.ModelVersion != ver || argmax(r.Outputs[0].Data) != argmax(floats(t, c.Want)) {
			t.Errorf("%s: version %s, digit %d; want version %s, digit %d", path, r.ModelVersion, argmax(r.Outputs[0].Data), ver, argmax(floats(t, c.Want)))
		}
	}
}

// TestRepositoryErrors loads repositories that are wrong in one way each:
// Load fails with ErrRepository and a message that says what is wrong.
func TestRepositoryErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(repo string) error
		says  string
	}{
		{"name differs", writeFile("mnist/config.json", `{"name": "other"}`), `name "other" differs`},
		{"unknown field", writeFile("mnist/config.json", `{"name": "mnist", "platform": "onnxruntime_onnx"}`), "unknown field"},
		{"negative batch", writeFile("mnist/config.json", `{"name": "mnist", "max_batch_size": -1}`), "negative"},
		{"no config", func(repo string) error { return os.Remove(filepath.Join(repo, "mnist", ConfigFile)) }, "config.json"},
		{"no versions", func(repo string) error { return os.RemoveAll(filepath.Join(repo, "mnist", "1")) }, "no version folders"},
		{"empty version", func(repo string) error { return os.Remove(filepath.Join(repo, "mnist", "1", ONNXFile)) }, "neither"},
		{"two files", writeFile("mnist/1/model.alidnn", "x"), "both"},
		{"bad program", func(repo string) error {
			return errors.Join(os.Remove(filepath.Join(repo, "mnist", "1", ONNXFile)), writeFile("mnist/1/model.alidnn", "x")(repo))
		}, "program"},
		{"bad binding", writeFile("mnist/config.json", `{"name": "mnist", "input": [{"name": "nope", "dims": [1]}]}`), "nope"},
		{"batching field", writeFile("mnist/config.json", `{"name": "mnist", "dynamic_batching": {"max_queue_delay": 5}}`), "unknown field"},
		{"negative delay", writeFile("mnist/config.json", `{"name": "mnist", "dynamic_batching": {"max_queue_delay_microseconds": -1}}`), "max_queue_delay_microseconds"},
		{"preferred 0", writeFile("mnist/config.json", `{"name": "mnist", "max_batch_size": 4, "dynamic_batching": {"preferred_batch_size": [0]}}`), "preferred_batch_size"},
		{"preferred too big", writeFile("mnist/config.json", `{"name": "mnist", "max_batch_size": 4, "dynamic_batching": {"preferred_batch_size": [8]}}`), "preferred_batch_size 8"},
		{"preferred without batch", writeFile("mnist/config.json", `{"name": "mnist", "dynamic_batching": {"preferred_batch_size": [2]}}`), "a job runs at most 1"},
	} {
		repo := writeRepo(t, mnistConfig, "onnx")
		if err := c.setup(repo); err != nil {
			t.Fatal(err)
		}
		s, err := New(Config{Repository: repo, Engines: []alidnn.Engine{simEngine(t)}})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Load(context.Background())
		if !errors.Is(err, ErrRepository) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want ErrRepository saying %q", c.name, err, c.says)
		}
		if s.Ready() {
			t.Errorf("%s: ready after a failed load", c.name)
		}
	}
}

func writeFile(rel, content string) func(repo string) error {
	return func(repo string) error { return os.WriteFile(filepath.Join(repo, rel), []byte(content), 0o644) }
}

// FuzzParseConfig parses config.json files: nothing panics, every refusal
// wraps ErrRepository, and an accepted config names its folder and binds
// only positive sizes.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		mnistConfig,
		`{"name": "mnist", "max_batch_size": 8, "max_queue_size": 64, "input": [{"name": "Input3", "dims": [1, 1, 28, 28]}], "dims": {"batch": 1}}`,
		`{"name": "mnist", "max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 100, "preferred_batch_size": [4, 8]}}`,
		`{"name": "mnist", "input": [{"name": "x", "dims": [0]}]}`,
		`{"name": "mnist", "dims": {"seq": -1}}`,
		`{"name": "mnist", "platform": "onnxruntime_onnx"}`,
		`{"name": "mnist"} {}`,
		`{"name": "other"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseConfig(b, "mnist")
		if err != nil {
			if !errors.Is(err, ErrRepository) {
				t.Fatalf("%v does not wrap ErrRepository", err)
			}
			return
		}
		if c.Name != "mnist" || c.MaxBatchSize < 0 || c.MaxQueueSize < 0 {
			t.Fatalf("accepted %+v", c)
		}
		if d := c.DynamicBatching; d != nil && (d.MaxQueueDelayMicroseconds < 0 || slices.ContainsFunc(d.PreferredBatchSize, func(n int) bool { return n < 1 })) {
			t.Fatalf("accepted dynamic batching %+v", d)
		}
		for _, in := range c.Input {
			for _, d := range in.Dims {
				if d < 1 {
					t.Fatalf("accepted input %+v", in)
				}
			}
		}
	})
}

// TestModelsAndInstances serves two models on two engines: a request goes
// to the instance with the fewest pending (the second engine's while the
// first holds one), and each model answers its own reference digits.
func TestModelsAndInstances(t *testing.T) {
	repo := writeRepo(t, mnistConfig, "onnx")
	quant := testenv.TestData(t, "onnx", "models", "mnist_quantized")
	b, err := os.ReadFile(filepath.Join(quant, "model_quantized.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "mnist_int8", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"mnist_int8/config.json": []byte(`{"name": "mnist_int8"}`), "mnist_int8/1/model.onnx": b} {
		if err := os.WriteFile(filepath.Join(repo, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	s := serve(t, repo, Config{Engines: []alidnn.Engine{gatedEngine{simEngine(t), gate}, gatedEngine{simEngine(t), gate}}})
	t.Cleanup(release)
	instances := s.models["mnist"].versions[0].instances
	cases := mnistCases(t)
	codes := make(chan error, 2)
	for k := range instances {
		go func() {
			code, _, b := post(t, s.URL+"/v2/models/mnist/infer", jsonInfer(t, "", cases[k].Input, nil), nil)
			var r response
			if err := json.Unmarshal(b, &r); code != http.StatusOK || err != nil {
				codes <- fmt.Errorf("request %d: %d %s", k, code, b)
			} else if got, want := argmax(r.Outputs[0].Data), argmax(floats(t, cases[k].Want)); got != want {
				codes <- fmt.Errorf("request %d: digit %d, the reference says %d", k, got, want)
			} else {
				codes <- nil
			}
		}()
		for deadline := time.Now().Add(5 * time.Second); instances[k].pending.Load() != 1; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("request %d is not pending on instance %d (pending: %d, %d)", k, k, instances[0].pending.Load(), instances[1].pending.Load())
			}
		}
	}
	release()
	for range instances {
		if err := <-codes; err != nil {
			t.Error(err)
		}
	}
	qcases, err := classify.ReadCases(quant)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range qcases {
		c.Input.Name = mnistInput
		code, _, b := post(t, s.URL+"/v2/models/mnist_int8/infer", jsonInfer(t, c.Name, c.Input, nil), nil)
		var r response
		if err := json.Unmarshal(b, &r); code != http.StatusOK || err != nil || r.ModelName != "mnist_int8" {
			t.Fatalf("mnist_int8 %s: %d %s", c.Name, code, b)
		}
		if got, want := argmax(r.Outputs[0].Data), argmax(floats(t, c.Want)); got != want {
			t.Errorf("mnist_int8 %s: digit %d, the reference says %d", c.Name, got, want)
		}
	}
}
