package portal

import (
	"errors"
	"testing"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// FuzzSpendFields: whatever is typed into the spend-limit form's amounts
// and the listing editor's free trial is read as a non-negative amount or
// a whole number of hours in range, or refused on its own field; never a
// panic.
func FuzzSpendFields(f *testing.F) {
	for _, s := range []string{"", "0", "3", "10.5", "0.000001", "1.0000001", "-1", "1e3", "abc", " 7 ", "9223372036854775807",
		"99999999999999.999999", ".5", "5.", "-0", "10000", "10001", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := optMicros("limit", s)
		var fe *fieldError
		switch {
		case err != nil && (!errors.As(err, &fe) || fe.field != "limit"):
			t.Fatalf("%q: %v names no field", s, err)
		case err == nil && s == "" && v != nil:
			t.Fatalf("%q: an empty field is %d, not none", s, *v)
		case err == nil && v != nil && *v < 0:
			t.Fatalf("%q: %d is negative", s, *v)
		}
		h, err := trialHours(s)
		switch {
		case err != nil && (!errors.As(err, &fe) || fe.field != "trial_hours"):
			t.Fatalf("%q: %v names no field", s, err)
		case err == nil && (h < 0 || h > registryapi.MaxTrialHours):
			t.Fatalf("%q: %d hours out of range", s, h)
		}
	})
}
