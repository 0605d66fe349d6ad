// Command mnist classifies the MNIST reference digits on an AliDNN slot
// served by faasd, the way a tenant's program would: it compiles the ONNX
// model with the SDK, opens the slot through the node agent, runs every
// reference input (each -repeat times, all at once, so the session batches
// them) and prints the predicted digit of each and whether it matches the
// reference output's.
//
// Usage:
//
//	mnist [-agent TARGET] [-slot N] [-model model.onnx] [-inputs DIR] [-repeat N] [-batch N] [-pipeline N] [-json]
//
// The agent is found like the faas command finds it: -agent, else
// $FAAS_AGENT, else /run/faas/faasd.sock. The API token is $FAAS_TOKEN, else
// the one `faas login` stored ($FAAS_CONFIG, else faas/config.json in the
// user's configuration folder). -inputs holds test_data_set_*/input_0.pb and
// output_0.pb (default: the model's folder).
//
// Exit codes: 0 every digit matched; 1 a digit differed or a step failed;
// 2 bad usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/classify"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/onnx"
)

func main() {
	agent := flag.String("agent", "", "faasd: unix socket path, unix:///path or https://host:port (default $FAAS_AGENT or /run/faas/faasd.sock)")
	slot := flag.Int("slot", 0, "slot loaded with the AliDNN engine")
	model := flag.String("model", defaultModel(), "MNIST ONNX model")
	inputs := flag.String("inputs", "", "folder of reference sets test_data_set_*/{input_0,output_0}.pb (default the model's folder)")
	repeat := flag.Int("repeat", 1, "runs of each reference input, all started at once")
	batch := flag.Int("batch", 4, "most runs coalesced into one job (1: none)")
	pipeline := flag.Int("pipeline", 2, "jobs of the session on the engine at once")
	asJSON := flag.Bool("json", false, "print one JSON object")
	flag.Parse()
	if flag.NArg() != 0 || *repeat < 1 || *slot < 0 || *batch < 1 || *pipeline < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if *inputs == "" {
		*inputs = filepath.Dir(*model)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	out, err := run(ctx, *agent, *slot, *model, *inputs, *repeat, alidnn.WithBatch(*batch), alidnn.WithPipeline(*pipeline))
	wall := time.Since(start)
	if err != nil && !errors.Is(err, classify.ErrMismatch) {
		fmt.Fprintln(os.Stderr, "mnist:", err)
		if h := faas.Hint(err); h != "" {
			fmt.Fprintln(os.Stderr, "hint:", h)
		}
		os.Exit(1)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"slot": *slot, "runs": out, "ok": err == nil, "wall_ns": wall})
	} else {
		for _, o := range out {
			verdict := "matches the reference"
			if !o.Match {
				verdict = fmt.Sprintf("MISMATCH: the reference says %d", o.Want)
			}
			fmt.Printf("%s: digit %d, %s (max |Δ| %.1e; job of %d, %.0f µs on the engine)\n",
				o.Case, o.Class, verdict, o.MaxAbsDiff, o.Batch, float64(o.DeviceNS)/1e3)
		}
		fmt.Printf("%d runs on slot %d in %v (compile, open and load included)\n", len(out), *slot, wall.Round(time.Millisecond))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mnist:", err)
		os.Exit(1)
	}
}

// run compiles the model, opens the slot and classifies the reference sets.
func run(ctx context.Context, target string, slot int, model, inputs string, repeat int, opts ...alidnn.SessionOption) ([]classify.Outcome, error) {
	m, err := onnx.ReadModel(model)
	if err != nil {
		return nil, err
	}
	prog, err := alidnn.Compile(m)
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", model, err)
	}
	cases, err := classify.ReadCases(inputs)
	if err != nil {
		return nil, err
	}
	tok, err := token()
	if err != nil {
		return nil, err
	}
	c, err := faas.Dial(ctx, target, faas.WithToken(tok), faas.WithUserAgent("examples/mnist"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	dev, err := c.Open(ctx, slot)
	if err != nil {
		return nil, fmt.Errorf("opening slot %d: %w", slot, err)
	}
	defer dev.Close()
	s, err := alidnn.Open(ctx, alidnn.Agent(dev), prog, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading the model on slot %d: %w", slot, err)
	}
	defer s.Close(ctx)
	out, err := classify.Run(ctx, s, prog, cases, repeat)
	if err != nil {
		return nil, err
	}
	return out, classify.Check(out)
}

// defaultModel is the MNIST model of the test data: in $FAAS_TESTDATA if
// set, else in testdata/ of the working directory (the repository root).
func defaultModel() string {
	dir := os.Getenv("FAAS_TESTDATA")
	if dir == "" {
		dir = "testdata"
	}
	return filepath.Join(dir, "onnx", "models", "mnist", "model.onnx")
}
