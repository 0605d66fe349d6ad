package benchreport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Book is every benchmark's latest medians and the runs they come from,
// kept as JSON beside the report (BENCHMARKS.json) so that a run of some
// packages replaces the figures of those packages and keeps the others'.
// A package's figures always come from one run, so a comparison, whose
// benchmark and baseline share a package, is always of one run.
type Book struct {
	Runs  []Run  `json:"runs"`
	Stats []Stat `json:"stats"`
}

// Run is one `go test -bench` run of some packages.
type Run struct {
	Date      time.Time `json:"date"`
	Command   string    `json:"command"`
	GoVersion string    `json:"go_version"`
	CPU       string    `json:"cpu"`
	Cores     int       `json:"cores"`
	Count     int       `json:"count"` // runs per benchmark
	Packages  []string  `json:"packages"`
}

// ReadBook reads a Book's JSON; an empty input is an empty Book.
func ReadBook(r io.Reader) (Book, error) {
	var b Book
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil && err != io.EOF {
		return Book{}, fmt.Errorf("benchreport: book: %w", err)
	}
	return b, nil
}

// Write writes b as indented JSON, stats in key order.
func (b Book) Write(w io.Writer) error {
	slices.SortFunc(b.Stats, func(x, y Stat) int { return strings.Compare(x.Key(), y.Key()) })
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(b)
}

// Merge puts the figures of run in b: every earlier figure of run's
// packages goes, whether or not run measured it again (a benchmark that
// is gone is gone), and runs no figure comes from any longer are dropped.
func (b *Book) Merge(run Run, stats map[string]Stat) {
	ran := map[string]bool{}
	for _, p := range run.Packages {
		ran[p] = true
	}
	kept := b.Stats[:0]
	for _, s := range b.Stats {
		if !ran[s.Pkg] {
			kept = append(kept, s)
		}
	}
	b.Stats = kept
	for _, s := range stats {
		s.Date = run.Date
		b.Stats = append(b.Stats, s)
	}
	used := map[time.Time]bool{}
	for _, s := range b.Stats {
		used[s.Date] = true
	}
	runs := []Run{run}
	for _, r := range b.Runs {
		if used[r.Date] && !r.Date.Equal(run.Date) {
			runs = append(runs, r)
		}
	}
	slices.SortFunc(runs, func(x, y Run) int { return y.Date.Compare(x.Date) })
	b.Runs = runs
}

// stats indexes b's figures by Key.
func (b Book) stats() map[string]Stat {
	m := make(map[string]Stat, len(b.Stats))
	for _, s := range b.Stats {
		m[s.Key()] = s
	}
	return m
}

// ImportReport reads the figures of a report that Render wrote before
// books were kept (its "Every benchmark" table), as measured on date: the
// first book of a repository starts from them. Values are as rounded in
// the table.
func ImportReport(r io.Reader, date time.Time) ([]Stat, error) {
	var out []Stat
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	in, n := false, 0
	for sc.Scan() {
		n++
		text := sc.Text()
		switch {
		case strings.HasPrefix(text, "## "):
			in = text == "## Every benchmark"
			continue
		case !in || !strings.HasPrefix(text, "| ") || strings.HasPrefix(text, "| Package ") || strings.HasPrefix(text, "|---"):
			continue
		}
		s, err := importRow(text)
		if err != nil {
			return nil, fmt.Errorf("benchreport: report line %d: %w", n, err)
		}
		s.Date = date
		out = append(out, s)
	}
	return out, sc.Err()
}

// importRow parses "| pkg | name | runs | time/op | N MB/s | v unit, … |".
func importRow(text string) (Stat, error) {
	cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(text, "| "), " |"), " | ")
	if len(cells) != 6 {
		return Stat{}, fmt.Errorf("%d cells, want 6: %q", len(cells), text)
	}
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	s := Stat{Pkg: cells[0], Name: cells[1], Metrics: map[string]float64{}}
	var err error
	if s.Runs, err = strconv.Atoi(cells[2]); err != nil {
		return Stat{}, fmt.Errorf("runs %q: %w", cells[2], err)
	}
	d, err := time.ParseDuration(cells[3])
	if err != nil {
		return Stat{}, fmt.Errorf("time/op %q: %w", cells[3], err)
	}
	s.NsPerOp = float64(d)
	if t, ok := strings.CutSuffix(cells[4], " MB/s"); ok {
		if s.MBPerS, err = strconv.ParseFloat(t, 64); err != nil {
			return Stat{}, fmt.Errorf("throughput %q: %w", cells[4], err)
		}
	}
	if cells[5] == "" {
		return s, nil
	}
	for m := range strings.SplitSeq(cells[5], ", ") {
		v, unit, ok := strings.Cut(m, " ")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			return Stat{}, fmt.Errorf("metric %q: want a value and a unit", m)
		}
		s.Metrics[unit] = f
	}
	return s, nil
}
