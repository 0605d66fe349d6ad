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
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/fpga-faas/faas/internal/benchreport"
)

func main() {
	count := flag.Int("count", 5, "runs of each benchmark; the report shows medians")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	out := flag.String("o", "BENCHMARKS.md", "report to write")
	flag.Parse()
	pkgs := flag.Args()
	if len(pkgs) == 0 {
		pkgs = []string{"./..."}
	}
	if *count < 1 {
		fmt.Fprintln(os.Stderr, "bench: -count must be at least 1")
		os.Exit(2)
	}
	if err := run(*count, *benchtime, *out, pkgs); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(count int, benchtime, out string, pkgs []string) error {
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
	env := benchreport.Env{
		Date: time.Now(), GoVersion: strings.TrimPrefix(runtime.Version(), "go"), CPU: cpuModel(),
		Cores: runtime.NumCPU(), Count: count, Command: "make bench",
	}
	// A run of some packages reports the comparisons of those packages.
	ran := map[string]bool{}
	for _, r := range results {
		ran[r.Pkg] = true
	}
	var cmps []benchreport.Comparison
	for _, c := range comparisons {
		if ran[c.Pkg] {
			cmps = append(cmps, c)
		}
	}
	var report bytes.Buffer
	if err := benchreport.Render(&report, env, cmps, benchreport.Medians(results)); err != nil {
		return err
	}
	if err := os.WriteFile(out, report.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: wrote %s (%d results)\n", out, len(results))
	return nil
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
