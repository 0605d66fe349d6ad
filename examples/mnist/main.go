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
//	mnist -attach LISTING[:VERSION] [-registry URL] [...]
//
// With -attach, the program asks the registry's pool for an accelerator
// running the listing instead of opening a slot of this host's faasd: the
// same code on a *faas.Device either way, on a host that may run no faasd
// at all. The attachment is detached at the end.
//
// The agent is found like the faas command finds it: -agent, else
// $FAAS_AGENT, else /run/faas/faasd.sock. The API token is $FAAS_TOKEN, else
// the one `faas login` stored ($FAAS_CONFIG, else faas/config.json in the
// user's configuration folder), else a Kubernetes pod's allocation
// credential ($FAAS_ALLOCATION_TOKEN). -inputs holds test_data_set_*/input_0.pb and
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
	attach := flag.String("attach", "", "attach an accelerator of the registry's pool running LISTING[:VERSION] instead of opening -slot")
	registry := flag.String("registry", "", "with -attach: the registry (default $FAAS_REGISTRY or the one faas login stored)")
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
	open := func(ctx context.Context) (*faas.Device, string, func(), error) { return openSlot(ctx, *agent, *slot) }
	if *attach != "" {
		open = func(ctx context.Context) (*faas.Device, string, func(), error) {
			return attachSlot(ctx, *registry, *attach)
		}
	}
	out, where, err := run(ctx, open, *model, *inputs, *repeat, alidnn.WithBatch(*batch), alidnn.WithPipeline(*pipeline))
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
		_ = enc.Encode(map[string]any{"on": where, "runs": out, "ok": err == nil, "wall_ns": wall})
	} else {
		for _, o := range out {
			verdict := "matches the reference"
			if !o.Match {
				verdict = fmt.Sprintf("MISMATCH: the reference says %d", o.Want)
			}
			fmt.Printf("%s: digit %d, %s (max |Δ| %.1e; job of %d, %.0f µs on the engine)\n",
				o.Case, o.Class, verdict, o.MaxAbsDiff, o.Batch, float64(o.DeviceNS)/1e3)
		}
		fmt.Printf("%d runs on %s in %v (compile, open and load included)\n", len(out), where, wall.Round(time.Millisecond))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mnist:", err)
		os.Exit(1)
	}
}

// run compiles the model, opens a device with open and classifies the
// reference sets on it; where says which device it was.
func run(ctx context.Context, open func(context.Context) (*faas.Device, string, func(), error), model, inputs string,
	repeat int, opts ...alidnn.SessionOption) (out []classify.Outcome, where string, err error) {
	m, err := onnx.ReadModel(model)
	if err != nil {
		return nil, "", err
	}
	prog, err := alidnn.Compile(m)
	if err != nil {
		return nil, "", fmt.Errorf("compiling %s: %w", model, err)
	}
	cases, err := classify.ReadCases(inputs)
	if err != nil {
		return nil, "", err
	}
	dev, where, closeDev, err := open(ctx)
	if err != nil {
		return nil, "", err
	}
	defer closeDev()
	s, err := alidnn.Open(ctx, alidnn.Agent(dev), prog, opts...)
	if err != nil {
		return nil, where, fmt.Errorf("loading the model on %s: %w", where, err)
	}
	defer s.Close(ctx)
	out, err = classify.Run(ctx, s, prog, cases, repeat)
	if err != nil {
		return nil, where, err
	}
	return out, where, classify.Check(out)
}

// openSlot opens slot of the faasd at target.
func openSlot(ctx context.Context, target string, slot int) (*faas.Device, string, func(), error) {
	tok, err := token()
	if err != nil {
		return nil, "", nil, err
	}
	c, err := faas.Dial(ctx, target, faas.WithToken(tok), faas.WithUserAgent("examples/mnist"))
	if err != nil {
		return nil, "", nil, err
	}
	dev, err := c.Open(ctx, slot)
	if err != nil {
		c.Close()
		return nil, "", nil, fmt.Errorf("opening slot %d: %w", slot, err)
	}
	return dev, fmt.Sprintf("slot %d", slot), func() { dev.Close(); c.Close() }, nil
}

// attachSlot attaches an accelerator of the pool running listing.
func attachSlot(ctx context.Context, registry, listing string) (*faas.Device, string, func(), error) {
	a, err := faas.Attach(ctx, registry, listing, faas.WithAttachUserAgent("examples/mnist"))
	if err != nil {
		return nil, "", nil, err
	}
	info := a.Info()
	where := fmt.Sprintf("slot %d of node %s (attachment %s)", info.Slot, info.Node, info.ID)
	return a.Device(), where, func() { a.Close() }, nil
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
