package modelserver

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
)

// installGrpcurl is what `make tools` runs for grpcurl.
const installGrpcurl = "go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4"

// grpcurlPath finds grpcurl on PATH or in $(go env GOPATH)/bin, where
// `make tools` puts it; without it the test is skipped, or fails when CI is
// true.
func grpcurlPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("grpcurl"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		gopath = strings.TrimSpace(string(out))
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "grpcurl")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("grpcurl not found (CI=true: a missing client is a failure); install it with: make tools, or %s", installGrpcurl)
	}
	t.Skipf("grpcurl not found; install it with: make tools, or %s (with CI=true this is a failure)", installGrpcurl)
	return ""
}

// grpcurl calls method of inference.GRPCInferenceService at addr with the
// JSON request body, described by the vendored .proto only (the server has
// no reflection), and returns the JSON answer, or the status's code name
// and message when the call failed.
func grpcurl(t *testing.T, bin, addr, method, body string) (answer []byte, code, message string) {
	t.Helper()
	return grpcurlWith(t, bin, []string{"-plaintext"}, addr, method, body)
}

// grpcurlWith is grpcurl with flags of the transport and headers instead
// of -plaintext.
func grpcurlWith(t *testing.T, bin string, flags []string, addr, method, body string) (answer []byte, code, message string) {
	t.Helper()
	cmd := exec.Command(bin, append(flags, "-import-path", "inferencepb", "-proto", "grpc_predict_v2.proto",
		"-format-error", "-d", "@", addr, "inference.GRPCInferenceService/"+method)...)
	cmd.Stdin = strings.NewReader(body)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		// -format-error prints a failed call's status as JSON on standard
		// error and exits with 64 plus its code.
		var st struct {
			Code    codes.Code `json:"code"`
			Message string     `json:"message"`
		}
		if err := json.Unmarshal(stderr.Bytes(), &st); err != nil || exit.ExitCode() != 64+int(st.Code) {
			t.Fatalf("grpcurl %s: exit %d and %s", method, exit.ExitCode(), stderr.Bytes())
		}
		return nil, st.Code.String(), st.Message
	}
	if err != nil {
		t.Fatalf("grpcurl %s: %v\n%s", method, err, stderr.Bytes())
	}
	return out, "OK", ""
}

// TestGrpcurl drives the gRPC service with grpcurl and the official .proto
// on the cases of the protocol's documentation: health, metadata, infer
// with typed and with raw contents on every MNIST reference digit, and the
// errors of an unknown model, a wrong shape, a wrong datatype and a
// message over the size limit.
func TestGrpcurl(t *testing.T) {
	bin := grpcurlPath(t)
	s := serveGRPC(t, writeRepo(t, mnistConfig, "onnx"), Config{Version: "test", MaxBodyBytes: 64 << 10})
	call := func(method, body, want string) {
		t.Helper()
		b, code, msg := grpcurl(t, bin, s.Addr, method, body)
		if code != "OK" || compactJSON(t, b) != want {
			t.Errorf("%s %s: %s %s %s\nwant %s", method, body, code, msg, b, want)
		}
	}
	call("ServerLive", "{}", `{"live":true}`)
	call("ServerReady", "{}", `{"ready":true}`)
	call("ModelReady", `{"name": "mnist"}`, `{"ready":true}`)
	call("ModelReady", `{"name": "mnist", "version": "1"}`, `{"ready":true}`)
	call("ServerMetadata", "{}", `{"name":"`+DefaultName+`","version":"test","extensions":["binary_tensor_data"]}`)
	call("ModelMetadata", `{"name": "mnist"}`, `{"name":"mnist","versions":["1"],"platform":"alidnn",`+
		`"inputs":[{"name":"Input3","datatype":"FP32","shape":["1","1","28","28"]}],`+
		`"outputs":[{"name":"Plus214_Output_0","datatype":"FP32","shape":["1","10"]}]}`)
	for _, c := range mnistCases(t) {
		f := floats(t, c.Input)
		typed, _ := json.Marshal(map[string]any{"model_name": "mnist", "id": c.Name, "inputs": []any{map[string]any{
			"name": mnistInput, "datatype": "FP32", "shape": c.Input.Dims, "contents": map[string]any{"fp32_contents": f}}}})
		var raw []byte
		for _, x := range f {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
		}
		rawReq, _ := json.Marshal(map[string]any{"model_name": "mnist", "id": c.Name, "raw_input_contents": [][]byte{raw},
			"inputs": []any{map[string]any{"name": mnistInput, "datatype": "FP32", "shape": c.Input.Dims}}})
		want := argmax(floats(t, c.Want))
		for k, req := range [][]byte{typed, rawReq} {
			b, code, msg := grpcurl(t, bin, s.Addr, "ModelInfer", string(req))
			if code != "OK" {
				t.Fatalf("%s: %s %s", c.Name, code, msg)
			}
			if got := grpcurlScores(t, b, c.Name, k == 1); argmax(got) != want {
				t.Errorf("%s: digit %d, the reference says %d (answer %s)", c.Name, argmax(got), want, b)
			}
		}
	}
	good := `{"model_name": "mnist", "inputs": [{"name": "Input3", "datatype": "FP32", "shape": [1, 1, 28, 28], "contents": {"fp32_contents": [` +
		strings.Repeat("0,", 783) + `0]}}]}`
	for _, c := range []struct{ name, body, code, says string }{
		{"unknown model", strings.Replace(good, `"mnist"`, `"nope"`, 1), "NotFound", `no model "nope"`},
		{"wrong shape", strings.Replace(good, "[1, 1, 28, 28]", "[1, 28, 28]", 1), "InvalidArgument", "shape [1 28 28]"},
		{"wrong datatype", strings.Replace(good, `"FP32"`, `"INT32"`, 1), "InvalidArgument", "is INT32, the model takes FP32"},
		{"too large", `{"model_name": "mnist", "raw_input_contents": ["` + base64.StdEncoding.EncodeToString(make([]byte, 64<<10)) + `"]}`,
			"ResourceExhausted", "larger than max"},
	} {
		if _, code, msg := grpcurl(t, bin, s.Addr, "ModelInfer", c.body); code != c.code || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %s %q; want %s and a message saying %q", c.name, code, msg, c.code, c.says)
		}
	}
}

// grpcurlScores reads the MNIST scores of grpcurl's JSON answer to
// ModelInfer: typed fp32_contents, or raw_output_contents in base64 when
// raw.
func grpcurlScores(t *testing.T, b []byte, id string, raw bool) []float32 {
	t.Helper()
	var r struct {
		ModelName, ID string
		Outputs       []struct {
			Name, Datatype string
			Contents       struct {
				Fp32Contents []float32
			}
		}
		RawOutputContents []string
	}
	if err := json.Unmarshal(b, &r); err != nil || r.ModelName != "mnist" || r.ID != id || len(r.Outputs) != 1 || r.Outputs[0].Name != mnistOutput {
		t.Fatalf("ModelInfer answered %s (%v)", b, err)
	}
	if !raw {
		return r.Outputs[0].Contents.Fp32Contents
	}
	if len(r.RawOutputContents) != 1 || r.Outputs[0].Contents.Fp32Contents != nil {
		t.Fatalf("ModelInfer with raw_input_contents answered %s", b)
	}
	data, err := base64.StdEncoding.DecodeString(r.RawOutputContents[0])
	if err != nil {
		t.Fatalf("raw_output_contents %q: %v", r.RawOutputContents[0], err)
	}
	return rawFloats(t, data)
}

func compactJSON(t *testing.T, b []byte) string {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("%q is not JSON: %v", b, err)
	}
	return out.String()
}
