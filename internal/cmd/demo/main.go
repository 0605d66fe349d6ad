// Command demo brings the whole platform up on one machine and walks
// through it (see package internal/demo); `make demo` builds the programs
// it runs and starts it.
//
// Usage: demo -bin DIR [-work DIR] [-testdata DIR] [-pg-bin DIR]
//
// It keeps the services running until interrupted, unless DEMO_NO_WAIT=1.
// Exit codes: 0 the walk-through succeeded; 1 a step failed; 2 bad usage.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/fpga-faas/faas/internal/demo"
)

func main() {
	var cfg demo.Config
	flag.StringVar(&cfg.Bin, "bin", "", "folder holding the built registry, faasd, hdk, faas, genbits and mnist")
	flag.StringVar(&cfg.Work, "work", "", "folder for state, keys and logs (default: a temporary folder, removed at the end)")
	flag.StringVar(&cfg.TestData, "testdata", demo.FindTestData(), "test data folder holding onnx/models/mnist (default testdata/ in the repository root) [$FAAS_TESTDATA]")
	flag.StringVar(&cfg.PGBin, "pg-bin", os.Getenv("FAAS_PG_BIN"), "PostgreSQL server binaries (default "+demo.DefaultPGBin+" or PATH) [$FAAS_PG_BIN]")
	flag.Parse()
	if cfg.Bin == "" || cfg.TestData == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: demo -bin DIR [-work DIR] [-testdata DIR] [-pg-bin DIR]  (set FAAS_TESTDATA if the test data is not found)")
		os.Exit(2)
	}
	noWait, _ := strconv.ParseBool(os.Getenv("DEMO_NO_WAIT"))
	cfg.Wait = !noWait
	cfg.Out = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		stop()
		os.Exit(1)
	}
}
