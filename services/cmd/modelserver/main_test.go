package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/onnx"
	"github.com/fpga-faas/faas/services/modelserver"
	"github.com/fpga-faas/faas/services/modelserver/inferencepb"
)

// TestRun wires two simulated engines into a server on a repository holding
// MNIST, waits for readiness, classifies a reference digit over REST and
// over gRPC and stops it as a signal would.
func TestRun(t *testing.T) {
	mnist := testenv.TestData(t, "onnx", "models", "mnist")
	repo := t.TempDir()
	model, err := os.ReadFile(filepath.Join(mnist, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "mnist", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"mnist/config.json": []byte(`{"name": "mnist"}`), "mnist/1/model.onnx": model} {
		if err := os.WriteFile(filepath.Join(repo, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	engines, _, closeEngines, err := engineSource{sim: 2}.open()
	if err != nil {
		t.Fatal(err)
	}
	defer closeEngines()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, slog.New(slog.DiscardHandler), modelserver.Config{Repository: repo, Engines: engines}, ln, gln)
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(url + "/v2/health/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready in 30s")
		}
	}
	in, err := onnx.ReadTensor(filepath.Join(mnist, "test_data_set_0", "input_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := onnx.ReadTensor(filepath.Join(mnist, "test_data_set_0", "output_0.pb"))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := in.Float32s()
	body, _ := json.Marshal(map[string]any{"inputs": []any{map[string]any{"name": "Input3", "shape": in.Dims, "datatype": "FP32", "data": f}}})
	resp, err := http.Post(url+"/v2/models/mnist/infer", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var r struct{ Outputs []struct{ Data []float32 } }
	if err := json.Unmarshal(b, &r); resp.StatusCode != http.StatusOK || err != nil || len(r.Outputs) != 1 {
		t.Fatalf("infer: %d %s", resp.StatusCode, b)
	}
	w, _ := want.Float32s()
	if got, want := argmax(r.Outputs[0].Data), argmax(w); got != want {
		t.Errorf("digit %d, the reference says %d", got, want)
	}
	conn, err := grpc.NewClient(gln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := inferencepb.NewGRPCInferenceServiceClient(conn)
	gr, err := client.ModelInfer(ctx, &inferencepb.ModelInferRequest{ModelName: "mnist", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
		{Name: "Input3", Datatype: "FP32", Shape: in.Dims, Contents: &inferencepb.InferTensorContents{Fp32Contents: f}}}})
	if err != nil || len(gr.GetOutputs()) != 1 {
		t.Fatalf("gRPC infer: %v, %v", gr, err)
	}
	if got, want := argmax(gr.GetOutputs()[0].GetContents().GetFp32Contents()), argmax(w); got != want {
		t.Errorf("gRPC: digit %d, the reference says %d", got, want)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after its context ended: %v", err)
		}
	case <-time.After(modelserver.DefaultTimeout + 10*time.Second):
		t.Fatal("run did not return after its context ended")
	}
	if _, err := http.Get(url + "/v2/health/live"); err == nil {
		t.Errorf("%s still answers after run returned", url)
	}
	if _, err := client.ServerLive(context.Background(), &inferencepb.ServerLiveRequest{}); err == nil {
		t.Errorf("the gRPC service at %s still answers after run returned", gln.Addr())
	}
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
