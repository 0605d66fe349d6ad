package main

import (
	"strings"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
)

// TestModelTestKnownRefusals runs a node test the compiler passes and one
// it is known to refuse (an Equal of STRING tensors): without --known-refusals the
// refusal fails the run; with it, it prints REFUSED with the reason and the
// run succeeds.
func TestModelTestKnownRefusals(t *testing.T) {
	pass := testenv.TestData(t, "onnx", "node", "test_add")
	refused := testenv.TestData(t, "onnx", "node", "test_equal_string")
	stdout, _, code := run(t, "", "model", "test", pass, refused)
	if code == 0 || !strings.Contains(stdout, "FAIL test_equal_string") || !strings.Contains(stdout, "1 of 2 passed") {
		t.Errorf("without --known-refusals: exit %d: %s", code, stdout)
	}
	stdout, stderr, code := run(t, "", "model", "test", "--known-refusals", pass, refused)
	if code != 0 || !strings.Contains(stdout, "PASS test_add") || !strings.Contains(stdout, "REFUSED test_equal_string (listed)") ||
		!strings.Contains(stdout, "STRING") || !strings.Contains(stdout, "1 of 2 passed, 1 refused as listed, 0 failed") {
		t.Errorf("with --known-refusals: exit %d: %s%s", code, stdout, stderr)
	}
}
