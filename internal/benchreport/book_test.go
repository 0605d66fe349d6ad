package benchreport

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestMergeKeepsOtherPackages: a run of one package replaces all of that
// package's figures (a benchmark gone from it goes from the book) and keeps
// the other packages' with their run, which the report names.
func TestMergeKeepsOtherPackages(t *testing.T) {
	rs, _ := Parse(strings.NewReader(sample))
	t0, t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	var book Book
	book.Merge(Run{Date: t0, Command: "make bench", Packages: []string{"example.com/a", "example.com/b"}}, Medians(rs))
	again, _ := Parse(strings.NewReader("pkg: example.com/a\nBenchmarkCopy-2 10 1000000 ns/op 67108.86 MB/s\n"))
	book.Merge(Run{Date: t1, Command: "go run ./internal/cmd/bench example.com/a", Packages: []string{"example.com/a"}}, Medians(again))

	st := book.stats()
	if c := st["example.com/a BenchmarkCopy"]; c.NsPerOp != 1000000 || !c.Date.Equal(t1) {
		t.Errorf("BenchmarkCopy after the second run: %+v", c)
	}
	if _, ok := st["example.com/a BenchmarkMemcpy/size=64MiB"]; ok {
		t.Error("a benchmark the second run of its package did not report is still in the book")
	}
	if r := st["example.com/b BenchmarkRound"]; r.NsPerOp != 2000 || !r.Date.Equal(t0) {
		t.Errorf("the other package's figure: %+v", r)
	}
	if len(book.Runs) != 2 || !book.Runs[0].Date.Equal(t1) {
		t.Errorf("runs: %+v, want both, newest first", book.Runs)
	}

	var js bytes.Buffer
	if err := book.Write(&js); err != nil {
		t.Fatal(err)
	}
	back, err := ReadBook(&js)
	if err != nil || len(back.Stats) != len(book.Stats) || len(back.Runs) != 2 {
		t.Fatalf("read back: %+v %v", back, err)
	}
	var md bytes.Buffer
	if err := Render(&md, back, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- 2026-01-02 00:00 UTC: `go run ./internal/cmd/bench example.com/a`", "- 2026-01-01 00:00 UTC: `make bench`",
		"| example.com/b | BenchmarkRound | 2 | 2µs |  | 13.5 p99-µs | 2026-01-01 00:00 |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}

	// The last run of b goes when b is run again: no figure comes from it.
	book.Merge(Run{Date: t1.Add(time.Hour), Packages: []string{"example.com/b"}}, nil)
	if len(book.Runs) != 2 || book.Runs[1].Date != t1 {
		t.Errorf("runs after b's figures all went: %+v", book.Runs)
	}
}

// TestImportReport reads back the figures of a report written before
// books were kept.
func TestImportReport(t *testing.T) {
	const old = "# Benchmarks\n\n## Against baselines\n\n| What | x |\n|---|---|\n| a | b |\n\n## Every benchmark\n\n" +
		"| Package | Benchmark | Runs | Time/op | Throughput | Other |\n|---|---|---|---|---|---|\n" +
		"| example.com/a | BenchmarkCopy | 3 | 4ms | 16777 MB/s | 0 B/op, 0 allocs/op |\n" +
		"| example.com/b | BenchmarkRound | 2 | 2µs |  | 13.5 p99-µs |\n"
	date := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st, err := ImportReport(strings.NewReader(old), date)
	if err != nil || len(st) != 2 {
		t.Fatalf("ImportReport: %+v %v", st, err)
	}
	if st[0].NsPerOp != 4e6 || st[0].MBPerS != 16777 || st[0].Runs != 3 || st[0].Metrics["allocs/op"] != 0 || len(st[0].Metrics) != 2 {
		t.Errorf("first row: %+v", st[0])
	}
	if st[1].NsPerOp != 2000 || st[1].Metrics["p99-µs"] != 13.5 || !st[1].Date.Equal(date) {
		t.Errorf("second row: %+v", st[1])
	}
	if _, err := ImportReport(strings.NewReader("## Every benchmark\n| p | b | x | 1s |  |  |\n"), date); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad row: %v, want an error naming its line", err)
	}
}

func FuzzImportReport(f *testing.F) {
	f.Add("## Every benchmark\n| example.com/a | BenchmarkCopy | 3 | 4ms | 16777 MB/s | 0 B/op, 0 allocs/op |\n")
	f.Add("## Every benchmark\n| p | b | 1 | 1h | x MB/s | 1 |\n")
	f.Fuzz(func(t *testing.T, s string) {
		ImportReport(strings.NewReader(s), time.Time{})
	})
}
