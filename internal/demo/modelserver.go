package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/onnx"
)

// serveModels is step 11: the model server serves MNIST on the demo's
// accelerator over the Open Inference Protocol, and curl classifies a
// reference digit through it.
func (d *demo) serveModels(p *platform, mnist string) error {
	slot := p.slots[0]
	d.begin("the model server: MNIST on slot %d over the Open Inference Protocol, a digit classified with curl", slot)
	repo := d.dir("models")
	if err := mnistRepository(repo, mnist); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	p.modelURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	args := []string{"-repo", repo, "-agent", "unix://" + p.socket, "-slots", fmt.Sprint(slot), "-listen", p.modelURL[len("http://"):], "-grpc-listen", ""}
	d.printf("      $ modelserver %s\n", shellJoin(args))
	t := time.Now()
	ms, err := d.serve(p.alice, "modelserver", args...)
	if err != nil {
		return err
	}
	if err := poll(d.ctx, startTimeout, "the model server's readiness", ms, func() (bool, error) {
		resp, err := http.Get(p.modelURL + "/v2/health/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		return err
	}
	d.printf("      ready at %s (%v)\n", p.modelURL, time.Since(t).Round(time.Millisecond))
	body := filepath.Join(d.root, "digit.json")
	if err := inferBody(body, filepath.Join(mnist, "test_data_set_0", "input_0.pb")); err != nil {
		return err
	}
	curl := []string{"-sS", "--fail-with-body", "-H", "Content-Type: application/json", "--data-binary", "@" + body, p.modelURL + "/v2/models/mnist/infer"}
	d.printf("      $ curl %s\n", shellJoin(curl))
	ctx, cancel := context.WithTimeout(d.ctx, cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "curl", curl...).Output()
	if err != nil {
		return fmt.Errorf("curl: %w (%s)", err, out)
	}
	var r struct {
		ModelName string `json:"model_name"`
		Outputs   []struct {
			Name string    `json:"name"`
			Data []float32 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Outputs) != 1 || len(r.Outputs[0].Data) != 10 {
		return fmt.Errorf("the model server answered %s (%v)", out, err)
	}
	best := 0
	for k, x := range r.Outputs[0].Data {
		if x > r.Outputs[0].Data[best] {
			best = k
		}
	}
	d.printf("      %s\n      the answer: model %s, output %s: digit %d\n", truncate(string(out), 160), r.ModelName, r.Outputs[0].Name, best)
	return nil
}

// mnistRepository lays out a model repository holding the MNIST model as
// model "mnist", version 1.
func mnistRepository(repo, mnist string) error {
	model, err := os.ReadFile(filepath.Join(mnist, "model.onnx"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(repo, "mnist", "1"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(repo, "mnist", "config.json"), []byte(`{"name": "mnist", "max_batch_size": 4}`+"\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(repo, "mnist", "1", "model.onnx"), model, 0o644)
}

// inferBody writes an infer request for the ONNX tensor file in to path.
func inferBody(path, in string) error {
	t, err := onnx.ReadTensor(in)
	if err != nil {
		return err
	}
	data, err := t.Float32s()
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	b, err := json.Marshal(map[string]any{"inputs": []map[string]any{{"name": "Input3", "shape": t.Dims, "datatype": "FP32", "data": data}}})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// shellJoin joins args as a shell would read them back: quoted when
// empty or holding spaces, so that the printed command can be pasted.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for k, a := range args {
		if a == "" || strings.ContainsAny(a, " \t'\"$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[k] = a
	}
	return strings.Join(q, " ")
}
