package modelserver

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/alidnn"
)

// index is POST /v2/repository/index's answer.
func index(t *testing.T, url string) []indexEntry {
	t.Helper()
	code, _, b := post(t, url+"/v2/repository/index", nil, nil)
	var out []indexEntry
	if err := json.Unmarshal(b, &out); code != http.StatusOK || err != nil {
		t.Fatalf("index: %d %s", code, b)
	}
	return out
}

func stateOf(entries []indexEntry, name string) indexEntry {
	for _, e := range entries {
		if e.Name == name {
			return e
		}
	}
	return indexEntry{}
}

// TestRepositoryExtension: the index lists the loaded model READY and a
// folder not loaded UNAVAILABLE; unload takes a model out (404 after),
// load brings it back from its folder; errors are the protocol's.
func TestRepositoryExtension(t *testing.T) {
	repo := writeRepo(t, mnistConfig, "onnx")
	s := serve(t, repo, Config{})
	// A second folder appears after the start: listed, not loaded.
	if err := os.CopyFS(filepath.Join(repo, "digits"), os.DirFS(filepath.Join(repo, "mnist"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "digits", ConfigFile), []byte(`{"name": "digits"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	got := index(t, s.URL)
	want := []indexEntry{{Name: "digits", State: StateUnavailable, Reason: "not loaded"}, {Name: "mnist", Version: "1", State: StateReady}}
	if !slices.Equal(got, want) {
		t.Errorf("index %+v, want %+v", got, want)
	}
	var meta struct{ Extensions []string }
	if code, _, b := get(t, s.URL+"/v2"); code != 200 || json.Unmarshal(b, &meta) != nil || !slices.Contains(meta.Extensions, "model_repository") {
		t.Errorf("GET /v2: %d %s", code, b)
	}

	if code, _, b := post(t, s.URL+"/v2/repository/models/digits/load", nil, nil); code != 200 {
		t.Fatalf("load digits: %d %s", code, b)
	}
	inferMNIST(t, s.URL, "digits")
	if code, _, b := post(t, s.URL+"/v2/repository/models/mnist/unload", nil, nil); code != 200 {
		t.Fatalf("unload: %d %s", code, b)
	}
	if e := stateOf(index(t, s.URL), "mnist"); e.State != StateUnavailable || e.Reason != "unloaded" {
		t.Errorf("mnist after unload: %+v", e)
	}
	for _, path := range []string{"/v2/models/mnist", "/v2/models/mnist/ready"} {
		if code, _, b := get(t, s.URL+path); code != 404 || !strings.Contains(string(b), `"error"`) {
			t.Errorf("GET %s after unload: %d %s", path, code, b)
		}
	}
	if code, _, b := post(t, s.URL+"/v2/models/mnist/infer", jsonInfer(t, "", mnistCases(t)[0].Input, nil), nil); code != 404 {
		t.Errorf("infer after unload: %d %s", code, b)
	}
	if code, _, _ := post(t, s.URL+"/v2/repository/models/mnist/unload", nil, nil); code != 404 {
		t.Errorf("unloading again: %d, want 404", code)
	}
	if code, _, b := post(t, s.URL+"/v2/repository/models/mnist/load", []byte(`{}`), nil); code != 200 {
		t.Fatalf("load again: %d %s", code, b)
	}
	inferMNIST(t, s.URL, "mnist")

	for _, c := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/v2/repository/models/none/load", "", 400, "none"},
		{"/v2/repository/models/.hidden/load", "", 400, "model name"},
		{"/v2/repository/models/x/load", `{"parameters": `, 400, "the body"},
		{"/v2/repository/models/x/load", `{"parameters": {"registry_ref": "no-registry/x"}}`, 400, "registry"},
		{"/v2/repository/index", `[`, 400, "the body"},
	} {
		code, _, b := post(t, s.URL+c.path, []byte(c.body), nil)
		var e struct{ Error string }
		if code != c.code || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error, c.want) {
			t.Errorf("POST %s %s: %d %s, want %d naming %q", c.path, c.body, code, b, c.code, c.want)
		}
	}
	if e := stateOf(index(t, s.URL), "none"); e.State != StateUnavailable || !strings.Contains(e.Reason, "none") {
		t.Errorf("a failed load in the index: %+v", e)
	}
}

// TestRepositoryWhileLoading: loads and unloads wait for the server's
// own load (503), the index answers.
func TestRepositoryWhileLoading(t *testing.T) {
	s, err := New(Config{Repository: writeRepo(t, mnistConfig, "onnx"), Engines: []alidnn.Engine{simEngine(t)}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	for _, op := range []string{"load", "unload"} {
		if code, _, b := post(t, hs.URL+"/v2/repository/models/mnist/"+op, nil, nil); code != http.StatusServiceUnavailable {
			t.Errorf("%s before Load: %d %s, want 503", op, code, b)
		}
	}
	if e := stateOf(index(t, hs.URL), "mnist"); e.State != StateUnavailable {
		t.Errorf("index before Load: %+v", e)
	}
}

// TestUnloadDrains: an unload waits for the request in flight, which is
// answered; requests that come after it get 404.
func TestUnloadDrains(t *testing.T) {
	gate := make(chan struct{})
	s := serve(t, writeRepo(t, mnistConfig, "onnx"), Config{Engines: []alidnn.Engine{gatedEngine{simEngine(t), gate}}})
	c := mnistCases(t)[0]
	body := jsonInfer(t, "held", c.Input, nil)
	s.mu.Lock()
	m := s.models["mnist"]
	s.mu.Unlock()
	held := make(chan int, 1)
	go func() {
		code, _, _ := post(t, s.URL+"/v2/models/mnist/infer", body, nil)
		held <- code
	}()
	waitFor(t, "the request to be admitted", func() bool { return len(m.queue) == 1 })
	unloaded := make(chan int, 1)
	go func() {
		code, _, _ := post(t, s.URL+"/v2/repository/models/mnist/unload", nil, nil)
		unloaded <- code
	}()
	waitFor(t, "the unload to start", func() bool { return stateOf(index(t, s.URL), "mnist").State == StateUnloading })
	if code, _, b := post(t, s.URL+"/v2/models/mnist/infer", body, nil); code != 404 {
		t.Errorf("a request during the unload: %d %s, want 404", code, b)
	}
	if code, _, _ := post(t, s.URL+"/v2/repository/models/mnist/load", nil, nil); code != http.StatusConflict {
		t.Errorf("a load during the unload: %d, want 409", code)
	}
	select {
	case <-unloaded:
		t.Fatal("the unload returned while a request was in flight")
	default:
	}
	close(gate)
	if code := <-held; code != 200 {
		t.Errorf("the request in flight: %d, want 200", code)
	}
	if code := <-unloaded; code != 200 {
		t.Errorf("unload: %d", code)
	}
	if e := stateOf(index(t, s.URL), "mnist"); e.State != StateUnavailable {
		t.Errorf("after the unload: %+v", e)
	}
}

// FuzzParseArtifactConfig: an artifact's config.json from the registry
// yields a config served under the given name, or an ErrRepository.
func FuzzParseArtifactConfig(f *testing.F) {
	for _, seed := range []string{`{}`, mnistConfig, `{"name": "other"}`, `{"max_batch_size": -1}`, `{"input": [{"name": "x", "dims": [0]}]}`,
		`{"dims": {"batch": 2}}`, `{"unknown": 1}`, `{} {}`, `[`, ``} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseArtifactConfig(b, "mnist")
		if err != nil {
			if !errors.Is(err, ErrRepository) {
				t.Fatalf("error %v does not wrap ErrRepository", err)
			}
			return
		}
		if c.Name != "mnist" || c.MaxBatchSize < 0 || c.MaxQueueSize < 0 {
			t.Fatalf("accepted %+v", c)
		}
	})
}

// get fetches url and returns the status, the headers and the body.
func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
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
