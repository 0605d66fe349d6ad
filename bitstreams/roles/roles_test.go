package roles

import (
	"errors"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		want          error
	}{
		{"loopback", "1.0", nil},
		{"loopback", "1.1", ErrIncompatible},
		{"loopback", "2.0", ErrIncompatible},
		{"loopback", "0.9", ErrIncompatible},
		{"nosuch", "1.0", ErrUnknown},
	} {
		if err := Check(tc.name, tc.version); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("Check(%q, %q) = %v, want %v", tc.name, tc.version, err, tc.want)
		}
	}
	for _, bad := range []string{"1", "1.x", "", "1.0.0", "-1.0"} {
		if err := Check("loopback", bad); err == nil {
			t.Errorf("Check(loopback, %q) accepted", bad)
		}
	}
}

func TestCatalogWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range All {
		if r.Name == "" || r.ID == 0 || r.Summary == "" || seen[r.Name] {
			t.Errorf("bad or duplicate catalog entry %+v", r)
		}
		seen[r.Name] = true
		if err := Check(r.Name, r.VersionString()); err != nil {
			t.Errorf("the newest version of %s fails its own check: %v", r.Name, err)
		}
	}
}
