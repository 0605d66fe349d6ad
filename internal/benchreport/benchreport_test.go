package benchreport

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

const sample = `goos: linux
goarch: amd64
pkg: example.com/a
cpu: AMD EPYC
BenchmarkCopy-2          	      30	   4000000 ns/op	16777.22 MB/s	       0 B/op	       0 allocs/op
BenchmarkCopy-2          	      30	   5000000 ns/op	13421.77 MB/s	       0 B/op	       0 allocs/op
BenchmarkCopy-2          	      30	   3000000 ns/op	22369.62 MB/s	       0 B/op	       0 allocs/op
BenchmarkMemcpy/size=64MiB-2	      30	   2000000 ns/op	33554.43 MB/s
PASS
ok  	example.com/a	1.2s
pkg: example.com/b
BenchmarkRound-2   	 1000	      1500 ns/op	        12.5 p99-µs
BenchmarkRound-2   	 1000	      2500 ns/op	        14.5 p99-µs
`

func TestParseAndMedians(t *testing.T) {
	rs, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 6 {
		t.Fatalf("parsed %d results, want 6", len(rs))
	}
	if rs[3].Name != "BenchmarkMemcpy/size=64MiB" || rs[3].Pkg != "example.com/a" || rs[4].Pkg != "example.com/b" {
		t.Errorf("names/packages: %+v %+v", rs[3], rs[4])
	}
	st := Medians(rs)
	if c := st["example.com/a BenchmarkCopy"]; c.Runs != 3 || c.NsPerOp != 4000000 || c.MBPerS != 16777.22 || c.Metrics["allocs/op"] != 0 {
		t.Errorf("median of BenchmarkCopy: %+v", c)
	}
	if r := st["example.com/b BenchmarkRound"]; r.NsPerOp != 2000 || r.Metrics["p99-µs"] != 13.5 {
		t.Errorf("even median of BenchmarkRound: %+v", r)
	}
}

func TestParseRejectsMalformedValues(t *testing.T) {
	_, err := Parse(strings.NewReader("BenchmarkX-2  10  abc ns/op\n"))
	if err == nil || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), `"abc"`) {
		t.Errorf("Parse of a bad value = %v, want an error naming line 1 and the value", err)
	}
}

func TestRender(t *testing.T) {
	rs, _ := Parse(strings.NewReader(sample))
	var book Book
	book.Merge(Run{Date: time.Unix(0, 0), GoVersion: "1.26", CPU: "cpu", Cores: 2, Count: 3, Command: "make bench",
		Packages: []string{"example.com/a", "example.com/b"}}, Medians(rs))
	var buf bytes.Buffer
	cmp := []Comparison{{Title: "copy vs memcpy", Pkg: "example.com/a", Bench: "BenchmarkCopy", Baseline: "BenchmarkMemcpy/size=64MiB", Target: "≥ 0.5×"}}
	if err := Render(&buf, book, cmp); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| copy vs memcpy | 16777 MB/s | `BenchmarkMemcpy/size=64MiB` | 33554 MB/s | 0.50× (throughput) | ≥ 0.5× |") {
		t.Errorf("report lacks the comparison row:\n%s", buf.String())
	}
	metric := []Comparison{{Title: "round p99 vs itself", Pkg: "example.com/b", Bench: "BenchmarkRound", Baseline: "BenchmarkRound",
		Metric: "p99-µs", BaselineMetric: "p99-µs", Target: "1×"}}
	buf.Reset()
	if err := Render(&buf, book, metric); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "| round p99 vs itself | 13.5 p99-µs | `BenchmarkRound` | 13.5 p99-µs | 1.00× (p99-µs / p99-µs) | 1× |") {
		t.Errorf("report lacks the metric row:\n%s", buf.String())
	}
	metric[0].BaselineMetric = "bound-ms"
	if err := Render(&buf, book, metric); err == nil || !strings.Contains(err.Error(), "bound-ms") {
		t.Errorf("Render with a missing metric = %v, want an error naming it", err)
	}
	never := []Comparison{{Title: "not yet", Pkg: "example.com/c", Bench: "BenchmarkNew", Baseline: "BenchmarkOld", Target: "1×"}}
	buf.Reset()
	if err := Render(&buf, book, never); err != nil || !strings.Contains(buf.String(), "| not yet | not measured yet | `BenchmarkOld` |") {
		t.Errorf("Render of a comparison never measured = %v:\n%s", err, buf.String())
	}
	cmp[0].Baseline = "BenchmarkMissing"
	if err := Render(&buf, book, cmp); err == nil || !strings.Contains(err.Error(), "BenchmarkMissing") {
		t.Errorf("Render with a missing baseline = %v, want an error naming it", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("BenchmarkX-2 1 1 ns/op 2\n")
	f.Add("pkg: \nBenchmark-2 3 NaN MB/s\n")
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := Parse(strings.NewReader(s))
		if err == nil {
			Medians(rs)
		}
	})
}
