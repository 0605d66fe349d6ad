package portal

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzUsageQuery: any query string gives a bounded range of days or an
// error naming the field, never a panic; csvSafe never lets a formula
// start a cell.
func FuzzUsageQuery(f *testing.F) {
	for _, s := range []string{"", "from=2030-01-01&to=2030-01-31", "from=2030-02-30", "to=1999-01-01",
		"from=2020-01-01&to=2030-01-01", "listing=x&from=%00", "from=2030-01-01T00:00:00Z", "=cmd|' /C calc'!A0"} {
		f.Add(s)
	}
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw string) {
		in, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseUsageQuery(in, now)
		if err != nil {
			if m := err.Error(); !strings.HasPrefix(m, "from:") && !strings.HasPrefix(m, "to:") {
				t.Fatalf("error %q names no field", m)
			}
			return
		}
		if len(q.days) == 0 || len(q.days) > maxUsageDays || q.days[0] != q.From || q.days[len(q.days)-1] != q.To {
			t.Fatalf("%q: %d days %s..%s", raw, len(q.days), q.From, q.To)
		}
		if s := csvSafe(raw); s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
			t.Fatalf("csvSafe(%q) = %q", raw, s)
		}
	})
}
