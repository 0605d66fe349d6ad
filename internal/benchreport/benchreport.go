// Package benchreport turns the output of `go test -bench` into
// BENCHMARKS.md: the median of each benchmark over repeated runs, and each
// figure of interest next to the baseline measured in the same run, as a
// ratio. Medians and same-run ratios are what stay meaningful on a noisy
// shared machine.
package benchreport

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Result is one line of `go test -bench` output.
type Result struct {
	Pkg     string
	Name    string // without the -GOMAXPROCS suffix
	NsPerOp float64
	MBPerS  float64 // 0 when the benchmark did not call SetBytes
	Metrics map[string]float64
}

// line matches "BenchmarkX/sub-2   123   456.7 ns/op   789.0 MB/s ...".
var line = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

// Parse reads `go test -bench` output (several packages, repeated runs) and
// returns every result line in order. Lines that are not results are skipped;
// a result line with a malformed value is an error naming the line.
func Parse(r io.Reader) ([]Result, error) {
	var (
		out []Result
		pkg string
		n   int
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		n++
		text := sc.Text()
		if p, ok := strings.CutPrefix(text, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		m := line.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		res := Result{Pkg: pkg, Name: m[1], Metrics: map[string]float64{}}
		fields := strings.Fields(m[3])
		if len(fields)%2 != 0 {
			return nil, fmt.Errorf("benchreport: line %d: odd number of value/unit fields: %q", n, text)
		}
		for i := 0; i < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchreport: line %d: value %q of %s: %w", n, fields[i], fields[i+1], err)
			}
			switch unit := fields[i+1]; unit {
			case "ns/op":
				res.NsPerOp = v
			case "MB/s":
				res.MBPerS = v
			default:
				res.Metrics[unit] = v
			}
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// Stat is the median of a benchmark's runs.
type Stat struct {
	Pkg     string             `json:"pkg"`
	Name    string             `json:"name"`
	Runs    int                `json:"runs"`
	NsPerOp float64            `json:"ns_per_op"`
	MBPerS  float64            `json:"mb_per_s,omitempty"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Date    time.Time          `json:"date"` // of the Run it comes from
}

// Key names a benchmark across packages: "pkg BenchmarkName".
func (s Stat) Key() string { return s.Pkg + " " + s.Name }

// Medians groups results by package and name and takes each value's median.
func Medians(rs []Result) map[string]Stat {
	groups := map[string][]Result{}
	for _, r := range rs {
		k := r.Pkg + " " + r.Name
		groups[k] = append(groups[k], r)
	}
	out := map[string]Stat{}
	for k, g := range groups {
		s := Stat{Pkg: g[0].Pkg, Name: g[0].Name, Runs: len(g), Metrics: map[string]float64{}}
		s.NsPerOp = median(g, func(r Result) float64 { return r.NsPerOp })
		s.MBPerS = median(g, func(r Result) float64 { return r.MBPerS })
		for unit := range g[0].Metrics {
			s.Metrics[unit] = median(g, func(r Result) float64 { return r.Metrics[unit] })
		}
		out[k] = s
	}
	return out
}

func median(g []Result, f func(Result) float64) float64 {
	v := make([]float64, len(g))
	for i, r := range g {
		v[i] = f(r)
	}
	slices.Sort(v)
	if n := len(v); n%2 == 1 {
		return v[n/2]
	} else {
		return (v[n/2-1] + v[n/2]) / 2
	}
}

// Comparison puts a benchmark next to the baseline it is judged against.
type Comparison struct {
	Title    string
	Pkg      string // import path of both benchmarks' package
	Bench    string // full benchmark name, sub-benchmarks included
	Baseline string // full name of the baseline benchmark in the same package
	// Target says what the ratio should be and why, for the reader.
	Target string
	// Metric, when set, compares this reported metric of Bench with the
	// metric BaselineMetric of Baseline instead of their times, for
	// figures that are not wall time (a modeled device time against the
	// hardware's bound).
	Metric, BaselineMetric string
}

// Render writes the report of book. A comparison whose benchmark and
// baseline were never measured shows as such; one with only one of them is
// an error: a report must never silently drop a figure.
func Render(w io.Writer, book Book, cmp []Comparison) error {
	stats := book.stats()
	fmt.Fprintf(w, "# Benchmarks\n\n")
	fmt.Fprintf(w, "Written by `go run ./internal/cmd/bench` (`make bench` runs every package) from BENCHMARKS.json, which keeps each package's figures from the last run of it. ")
	fmt.Fprintf(w, "Every figure is the median of a benchmark's runs; ratios compare two medians of the same run, so they survive a noisy machine better than absolute figures. The runs, newest first:\n\n")
	for _, r := range book.Runs {
		fmt.Fprintf(w, "- %s: `%s`, Go %s, %s, %d cores, each benchmark %d times: %s\n", r.Date.UTC().Format("2006-01-02 15:04 MST"),
			r.Command, r.GoVersion, r.CPU, r.Cores, r.Count, strings.Join(r.Packages, ", "))
	}
	fmt.Fprintf(w, "\n## Against baselines\n\n| What | Median | Baseline | Baseline median | Ratio | Target |\n|---|---|---|---|---|---|\n")
	for _, c := range cmp {
		if err := comparisonRow(w, c, stats); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\n## Every benchmark\n\n| Package | Benchmark | Runs | Time/op | Throughput | Other | Measured |\n|---|---|---|---|---|---|---|\n")
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := stats[k]
		var other []string
		units := make([]string, 0, len(s.Metrics))
		for u := range s.Metrics {
			units = append(units, u)
		}
		sort.Strings(units)
		for _, u := range units {
			other = append(other, strconv.FormatFloat(s.Metrics[u], 'f', -1, 64)+" "+u)
		}
		tput := ""
		if s.MBPerS > 0 {
			tput = fmt.Sprintf("%.0f MB/s", s.MBPerS)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s |\n", s.Pkg, s.Name, s.Runs, duration(s.NsPerOp), tput,
			strings.Join(other, ", "), s.Date.UTC().Format("2006-01-02 15:04"))
	}
	return nil
}

// comparisonRow writes c's row of the table.
func comparisonRow(w io.Writer, c Comparison, stats map[string]Stat) error {
	b, ok := stats[c.Pkg+" "+c.Bench]
	base, bok := stats[c.Pkg+" "+c.Baseline]
	switch {
	case !ok && !bok:
		fmt.Fprintf(w, "| %s | not measured yet | `%s` | | | %s |\n", c.Title, c.Baseline, c.Target)
		return nil
	case !ok:
		return fmt.Errorf("benchreport: %q: no result for %s in %s", c.Title, c.Bench, c.Pkg)
	case !bok:
		return fmt.Errorf("benchreport: %q: no result for baseline %s in %s", c.Title, c.Baseline, c.Pkg)
	}
	ratio := "n/a"
	switch {
	case c.Metric != "":
		m, ok := b.Metrics[c.Metric]
		bm, bok := base.Metrics[c.BaselineMetric]
		if !ok || !bok {
			return fmt.Errorf("benchreport: %q: %s has no %s or %s has no %s", c.Title, c.Bench, c.Metric, c.Baseline, c.BaselineMetric)
		}
		if bm > 0 {
			ratio = fmt.Sprintf("%.2f× (%s / %s)", m/bm, c.Metric, c.BaselineMetric)
		}
		fmt.Fprintf(w, "| %s | %s %s | `%s` | %s %s | %s | %s |\n", c.Title, strconv.FormatFloat(m, 'f', -1, 64), c.Metric,
			c.Baseline, strconv.FormatFloat(bm, 'f', -1, 64), c.BaselineMetric, ratio, c.Target)
		return nil
	case b.MBPerS > 0 && base.MBPerS > 0:
		ratio = fmt.Sprintf("%.2f× (throughput)", b.MBPerS/base.MBPerS)
	case b.NsPerOp > 0 && base.NsPerOp > 0:
		ratio = fmt.Sprintf("%.2f× (time)", b.NsPerOp/base.NsPerOp)
	}
	fmt.Fprintf(w, "| %s | %s | `%s` | %s | %s | %s |\n", c.Title, figure(b), c.Baseline, figure(base), ratio, c.Target)
	return nil
}

func figure(s Stat) string {
	if s.MBPerS > 0 {
		return fmt.Sprintf("%.0f MB/s", s.MBPerS)
	}
	return duration(s.NsPerOp)
}

func duration(ns float64) string {
	return time.Duration(ns).Round(time.Duration(max(1, int64(ns)/1000))).String()
}
