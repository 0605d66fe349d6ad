// Command bench runs the module's Go benchmarks several times and writes
// BENCHMARKS.md: the median of every benchmark, and the figures the platform
// promises next to the baselines measured in the same run (see
// comparisons.go).
//
// Usage: go run ./internal/cmd/bench [-count 5] [-benchtime 1s] [-o BENCHMARKS.md] [packages]
//
// Exit codes: 0 report written; 1 a benchmark failed or a compared figure is
// missing; 2 bad usage.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/fpga-faas/faas/internal/atomicfile"
	"github.com/fpga-faas/faas/internal/benchreport"
)

func main() {
	count := flag.Int("count", 5, "runs of each benchmark; the report shows medians")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	out := flag.String("o", "BENCHMARKS.md", "report to write")
	bookPath := flag.String("book", "BENCHMARKS.json", "figures kept between runs: a run of some packages replaces theirs")
	renderOnly := flag.Bool("render", false, "run nothing: write the report again from the book (after a comparison's text changed)")
	flag.Parse()
	if *renderOnly {
		if err := render(*bookPath, *out); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	pkgs := flag.Args()
	if len(pkgs) == 0 {
		pkgs = []string{"./..."}
	}
	if *count < 1 {
		fmt.Fprintln(os.Stderr, "bench: -count must be at least 1")
		os.Exit(2)
	}
	if err := run(*count, *benchtime, *out, *bookPath, pkgs); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(count int, benchtime, out, bookPath string, pkgs []string) error {
	book, err := openBook(bookPath, out)
	if err != nil {
		return err
	}
	paths, err := importPaths(pkgs)
	if err != nil {
		return err
	}
	args := append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem",
		"-count", fmt.Sprint(count), "-benchtime", benchtime}, pkgs...)
	fmt.Fprintf(os.Stderr, "bench: go %s\n", strings.Join(args, " "))
	cmd := exec.Command("go", args...)
	var raw bytes.Buffer
	// Show progress as go test prints, and keep a copy to parse.
	cmd.Stdout = io.MultiWriter(&raw, progress{os.Stderr})
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go test: %w", err)
	}
	results, err := benchreport.Parse(&raw)
	if err != nil {
		return err
	}
	command := "go run ./internal/cmd/bench -count " + fmt.Sprint(count) + " -benchtime " + benchtime + " " + strings.Join(pkgs, " ")
	if slices.Equal(pkgs, []string{"./..."}) {
		book, command = benchreport.Book{}, "make bench"
	}
	book.Merge(benchreport.Run{Date: time.Now().UTC().Truncate(time.Second), Command: command,
		GoVersion: strings.TrimPrefix(runtime.Version(), "go"), CPU: cpuModel(), Cores: runtime.NumCPU(), Count: count,
		Packages: paths}, benchreport.Medians(results))
	if err := atomicfile.WriteWith(bookPath, 0o644, book.Write); err != nil {
		return err
	}
	if err := atomicfile.WriteWith(out, 0o644, func(w io.Writer) error { return benchreport.Render(w, book, comparisons) }); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: wrote %s and %s (%d results of this run)\n", out, bookPath, len(results))
	return nil
}

// render writes the report of the book at bookPath to out.
func render(bookPath, out string) error {
	f, err := os.Open(bookPath)
	if err != nil {
		return err
	}
	defer f.Close()
	book, err := benchreport.ReadBook(f)
	if err != nil {
		return err
	}
	return atomicfile.WriteWith(out, 0o644, func(w io.Writer) error { return benchreport.Render(w, book, comparisons) })
}

// openBook reads the book at path; without one, it starts from the figures
// of the report at report, when there is one (a repository's first book).
func openBook(path, report string) (benchreport.Book, error) {
	f, err := os.Open(path)
	if err == nil {
		defer f.Close()
		return benchreport.ReadBook(f)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return benchreport.Book{}, err
	}
	r, err := os.Open(report)
	if errors.Is(err, fs.ErrNotExist) {
		return benchreport.Book{}, nil
	} else if err != nil {
		return benchreport.Book{}, err
	}
	defer r.Close()
	st, err := r.Stat()
	if err != nil {
		return benchreport.Book{}, err
	}
	stats, err := benchreport.ImportReport(r, st.ModTime().UTC().Truncate(time.Second))
	if err != nil {
		return benchreport.Book{}, err
	}
	var book benchreport.Book
	m := map[string]benchreport.Stat{}
	var pkgs []string
	for _, s := range stats {
		m[s.Key()] = s
		if !slices.Contains(pkgs, s.Pkg) {
			pkgs = append(pkgs, s.Pkg)
		}
	}
	book.Merge(benchreport.Run{Date: st.ModTime().UTC().Truncate(time.Second), Command: "earlier runs, read from " + report,
		Packages: pkgs}, m)
	return book, nil
}

// importPaths lists the import paths of the packages pkgs names.
func importPaths(pkgs []string) ([]string, error) {
	out, err := exec.Command("go", append([]string{"list"}, pkgs...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", strings.Join(pkgs, " "), err)
	}
	return strings.Fields(string(out)), nil
}

// progress passes through only the lines that say where the run is.
type progress struct{ w io.Writer }

func (p progress) Write(b []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "pkg: ") || strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "FAIL") {
			fmt.Fprintln(p.w, "  ", l)
		}
	}
	return len(b), nil
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
