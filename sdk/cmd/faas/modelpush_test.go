package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
)

// TestModelPushInput: a bad reference, model or config is refused (exit
// 2) before anything is sent; the push to a real registry is tested in
// services/modelserver (TestFaasModelPush), which may start one.
func TestModelPushInput(t *testing.T) {
	t.Setenv("FAAS_CONFIG", filepath.Join(t.TempDir(), "none.json"))
	t.Setenv("FAAS_TOKEN", "")
	t.Setenv("FAAS_REGISTRY", "")
	mnist := filepath.Join(testenv.TestData(t, "onnx", "models", "mnist"), "model.onnx")
	dir := t.TempDir()
	notModel := filepath.Join(dir, "model.alidnn")
	badConfig := filepath.Join(dir, "config.json")
	os.WriteFile(notModel, []byte("not a program"), 0o644)
	os.WriteFile(badConfig, []byte(`[1]`), 0o644)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"acme/mnist:1", mnist}, "with the registry's host"},
		{[]string{"127.0.0.1:1/acme/mnist:1", notModel}, "not a program of faas model compile"},
		{[]string{"127.0.0.1:1/acme/mnist:1", "--config", badConfig, mnist}, "not one JSON object"},
		{[]string{"127.0.0.1:1/acme/mnist:1", filepath.Join(dir, "none.onnx")}, "no such file"},
	} {
		out, code := faas(t, append([]string{"model", "push"}, c.args...)...)
		if code != 2 || !strings.Contains(out, c.says) {
			t.Errorf("push %v: exit %d %s, want 2 saying %q", c.args, code, out, c.says)
		}
	}
	if out, code := faas(t, "model", "push", "127.0.0.1:1/acme/mnist:1", mnist); code != 3 || !strings.Contains(out, "no registry login") {
		t.Errorf("push without a login: exit %d %s, want 3", code, out)
	}
}
