package onnxtest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn/onnxtest"
)

func local(t testing.TB) *model.Local {
	t.Helper()
	dev, err := model.NewLocal(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// TestNodeTests runs every ONNX backend node test of the test data
// (testdata/onnx/node): each must pass.
func TestNodeTests(t *testing.T) {
	root := testenv.TestData(t, "onnx", "node")
	dirs, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	dev := local(t)
	for _, d := range dirs {
		t.Run(d.Name(), func(t *testing.T) {
			r := onnxtest.Run(context.Background(), dev, filepath.Join(root, d.Name()), onnxtest.Options{})
			if !r.Pass {
				t.Error(r.Line())
			}
			t.Log(r.Line())
		})
	}
}
