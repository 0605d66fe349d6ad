package modelserver

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// curlPath finds curl; without it the test is skipped, or fails when CI is
// true.
func curlPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("curl")
	if err == nil {
		return p
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("curl not found (CI=true: a missing client is a failure); install it with: apt-get install curl")
	}
	t.Skipf("curl not found; install it with: apt-get install curl (with CI=true this is a failure)")
	return ""
}

// curl runs curl with args and returns the HTTP status and the body it
// printed.
func curl(t *testing.T, bin string, args ...string) (int, []byte) {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"-sS", "-w", "\n%{http_code}"}, args...)...).Output()
	if err != nil {
		t.Fatalf("curl %v: %v", args, err)
	}
	i := strings.LastIndexByte(string(out), '\n')
	code, err := strconv.Atoi(string(out[i+1:]))
	if err != nil {
		t.Fatalf("curl %v printed %q", args, out)
	}
	return code, out[:i]
}

// TestCurl is the README's walk-through, run by curl: health, server and
// model metadata, and a JSON infer of each MNIST reference digit.
func TestCurl(t *testing.T) {
	bin := curlPath(t)
	s := serve(t, writeRepo(t, mnistConfig, "onnx"), Config{Version: "test"})
	for _, path := range []string{"/v2/health/live", "/v2/health/ready", "/v2/models/mnist/ready", "/v2/models/mnist/versions/1/ready"} {
		if code, b := curl(t, bin, s.URL+path); code != 200 {
			t.Errorf("GET %s: %d %s", path, code, b)
		}
	}
	var meta struct {
		Name, Version string
		Extensions    []string
	}
	if code, b := curl(t, bin, s.URL+"/v2"); code != 200 || json.Unmarshal(b, &meta) != nil ||
		meta.Name != DefaultName || meta.Version != "test" || !strings.Contains(strings.Join(meta.Extensions, ","), "binary_tensor_data") {
		t.Errorf("GET /v2: %d %s", code, b)
	}
	code, b := curl(t, bin, s.URL+"/v2/models/mnist")
	want := `{"inputs":[{"name":"Input3","datatype":"FP32","shape":[1,1,28,28]}],"name":"mnist",` +
		`"outputs":[{"name":"Plus214_Output_0","datatype":"FP32","shape":[1,10]}],"platform":"alidnn","versions":["1"]}`
	if code != 200 || string(b) != want {
		t.Errorf("GET /v2/models/mnist: %d %s\nwant %s", code, b, want)
	}
	for _, c := range mnistCases(t) {
		req := filepath.Join(t.TempDir(), "request.json")
		if err := os.WriteFile(req, jsonInfer(t, c.Name, c.Input, nil), 0o644); err != nil {
			t.Fatal(err)
		}
		code, b := curl(t, bin, "-H", "Content-Type: application/json", "--data-binary", "@"+req, s.URL+"/v2/models/mnist/infer")
		var r response
		if err := json.Unmarshal(b, &r); code != 200 || err != nil {
			t.Fatalf("%s: %d %s", c.Name, code, b)
		}
		if r.ModelName != "mnist" || r.ModelVersion != "1" || r.ID != c.Name || len(r.Outputs) != 1 ||
			r.Outputs[0].Name != mnistOutput || r.Outputs[0].Datatype != "FP32" || len(r.Outputs[0].Data) != 10 {
			t.Fatalf("%s: answer %s", c.Name, b)
		}
		if got, want := argmax(r.Outputs[0].Data), argmax(floats(t, c.Want)); got != want {
			t.Errorf("%s: digit %d, the reference says %d", c.Name, got, want)
		}
	}
	if code, b := curl(t, bin, s.URL+"/v2/models/nope"); code != 404 || !strings.Contains(string(b), `"error"`) {
		t.Errorf("GET /v2/models/nope: %d %s", code, b)
	}
}
