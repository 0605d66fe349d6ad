package portal

import (
	"strings"
	"testing"
)

func TestMicros(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "0": 0, "1.5": 1_500_000, "2.40": 2_400_000, ".25": 250_000, "3": 3_000_000, "0.000001": 1,
		"-1": -1_000_000, "-0.5": -500_000, "92233720368.547758": 92233720368_547758} {
		if got, err := micros(in); err != nil || got != want {
			t.Errorf("micros(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"1.2345678", "abc", "1,50", ".", "-", "--1", "1e3", "99999999999999999"} {
		if _, err := micros(in); err == nil {
			t.Errorf("micros(%q): no error", in)
		}
	}
	for m, want := range map[int64]string{0: "0.00", 1_500_000: "1.50", 2_400_000: "2.40", 1: "0.000001", 12_345_670: "12.34567", -1_500_000: "-1.50"} {
		if got := decimal(m); got != want {
			t.Errorf("decimal(%d) = %q, want %q", m, got, want)
		}
	}
	for n, want := range map[int64]string{512: "512 bytes", 2 << 30: "2 GiB", 1536: "1.5 KiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// FuzzMicros: any amount typed into a price field reads back as itself or
// is refused; it never panics, and only a minus sign makes it negative
// (for the API to refuse on the field).
func FuzzMicros(f *testing.F) {
	for _, s := range []string{"1.50", "", ".5", "-1", "1e9", "9223372036854", "0.0000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := micros(s)
		if err != nil {
			return
		}
		if m < 0 && !strings.HasPrefix(strings.TrimSpace(s), "-") {
			t.Fatalf("micros(%q) = %d", s, m)
		}
		if back, err := micros(decimal(m)); err != nil || back != m {
			t.Fatalf("micros(decimal(%d)) = %d, %v", m, back, err)
		}
	})
}
