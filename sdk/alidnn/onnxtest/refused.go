package onnxtest

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Refusal returns the reason the compiler refuses onnx's node test named
// name (a folder of testdata/onnx/node), as refusals.go lists it, or "".
func Refusal(name string) string { return refusals[name] }

// expectRefusal turns r, the result of a folder run with
// Options.KnownRefusals, into a pass when the folder is listed and was
// refused with the listed reason, and into a failure when it is listed but
// passed or failed for another reason: the list must neither hide a
// regression nor outlive the refusal.
func expectRefusal(r *Result) {
	name := filepath.Base(strings.TrimRight(r.Dir, "/"))
	reason := refusals[name]
	switch {
	case reason == "":
	case r.Pass:
		r.Pass = false
		r.Err = fmt.Errorf("listed as refused (%q) but passes: remove it from onnxtest's refusals", reason)
	case r.Err == nil:
		r.Err = fmt.Errorf("listed as refused (%q) but compiles and runs (worst error %.3g× the tolerance)", reason, r.Worst)
	case !strings.Contains(r.Err.Error(), reason):
		r.Err = fmt.Errorf("listed as refused (%q) but fails otherwise: %w", reason, r.Err)
	default:
		r.Pass, r.Refused = true, reason
	}
}
