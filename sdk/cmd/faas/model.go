package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/internal/atomicfile"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/onnxtest"
	client "github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/onnx"
	"github.com/spf13/cobra"
)

// engineMemory is the device memory of the in-process engine.
const engineMemory = 4 << 30

func modelCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "Compile and run ONNX models on the AliDNN engine"}
	cmd.AddCommand(testCommand(), compileCommand(), runCommand(), benchCommand(), pushCommand())
	return cmd
}

func engine() (*model.Local, error) {
	dev, err := model.NewLocal(engineMemory)
	if err != nil {
		return nil, fmt.Errorf("starting the in-process engine: %w", err)
	}
	return dev, nil
}

func testCommand() *cobra.Command {
	var int8 bool
	cmd := &cobra.Command{
		Use:   "test [--int8] DIR...",
		Short: "Run ONNX backend-test folders (model.onnx, test_data_set_*/) on the engine",
		Long: `Runs each folder's data sets and prints one line per folder: PASS or FAIL
with the worst error relative to the tolerance (fp32: 1e-5 + 1e-3·|want|;
quantised outputs: 1). With --int8, fp32 models are quantised after training,
calibrated on the folder's inputs, and held to the int8 rule: per output,
every row's (last axis) top-1 equal to the reference's, or every row's cosine
similarity to it at least 0.99. Models dynamically quantised as onnxruntime's
quantize_dynamic writes them (DynamicQuantizeLinear) have their scales
calibrated on the folder's inputs too, and are held to the int8 rule. A
model the compiler refuses fails with its reason.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dev, err := engine()
			if err != nil {
				return err
			}
			defer dev.Close()
			type line struct {
				Dir   string  `json:"dir"`
				Pass  bool    `json:"pass"`
				Worst float64 `json:"worst"`
				Error string  `json:"error,omitempty"`
			}
			var lines []line
			failed := 0
			for _, dir := range args {
				r := onnxtest.Run(cmd.Context(), dev, dir, onnxtest.Options{Quantize: int8})
				if !r.Pass {
					failed++
				}
				l := line{Dir: dir, Pass: r.Pass, Worst: r.Worst}
				if r.Err != nil {
					l.Error = r.Err.Error()
				}
				lines = append(lines, l)
				if !jsonOutput(cmd) {
					fmt.Fprintln(cmd.OutOrStdout(), r.Line())
				}
			}
			if jsonOutput(cmd) {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(lines); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%d of %d passed\n", len(args)-failed, len(args))
			}
			if failed > 0 {
				return fmt.Errorf("%w: %d of %d folders", errFailed, failed, len(args))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&int8, "int8", false, "quantise fp32 models to int8 after training")
	return cmd
}

// parseShapes turns --shape NAME=D0xD1x… flags into WithShape bindings.
func parseShapes(flags []string) ([]alidnn.Option, error) {
	var opts []alidnn.Option
	for _, f := range flags {
		name, spec, ok := strings.Cut(f, "=")
		if !ok || name == "" || spec == "" {
			return nil, usageErrorf("--shape %q: want NAME=DIMS, as in x=1x3x48x320 or batch=1", f)
		}
		var dims []int
		for _, s := range strings.Split(spec, "x") {
			d, err := strconv.Atoi(s)
			if err != nil || d < 1 {
				return nil, usageErrorf("--shape %q: dimension %q is not a positive integer", f, s)
			}
			dims = append(dims, d)
		}
		opts = append(opts, alidnn.WithShape(name, dims...))
	}
	return opts, nil
}

// loadProgram reads MODEL: a program file, or an ONNX model it compiles
// for the shapes of the inputs (quantised after training on them when int8
// is set; a dynamically quantised model's scales calibrated on them, as
// faas model test does).
func loadProgram(ctx context.Context, dev alidnn.Device, path string, int8 bool, floatNodes []string, inputs []*onnx.Tensor) (*alidnn.Program, error) {
	if len(floatNodes) > 0 && !int8 {
		return nil, usageErrorf("--float-node applies with --int8")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	head := make([]byte, 8)
	n, _ := io.ReadFull(f, head)
	f.Close()
	if bytes.Equal(head[:n], []byte("ADNNPRG1")) {
		if int8 {
			return nil, fmt.Errorf("--int8 applies to ONNX models, %s is a compiled program", path)
		}
		return alidnn.ReadFile(path)
	}
	m, err := onnx.ReadModel(path)
	if err != nil {
		return nil, err
	}
	bind := inputShapes(m.Graph, inputs)
	inputs = graphInputs(m.Graph, inputs)
	switch {
	case int8:
		if len(floatNodes) > 0 {
			bind = append(bind, alidnn.WithFloatNodes(floatNodes...))
		}
		return alidnn.Quantize(ctx, dev, m, [][]*onnx.Tensor{inputs}, bind...)
	case slices.ContainsFunc(m.Graph.Nodes, func(n *onnx.Node) bool { return n.OpType == "DynamicQuantizeLinear" }):
		return alidnn.Calibrate(ctx, dev, m, [][]*onnx.Tensor{inputs}, bind...)
	}
	return alidnn.Compile(m, bind...)
}

// inputShapes binds the graph's inputs to the shapes of the tensors,
// matched as graphInputs matches them: the tensors fix the dimensions the
// model leaves free.
func inputShapes(g *onnx.Graph, ts []*onnx.Tensor) []alidnn.Option {
	var opts []alidnn.Option
	for _, t := range graphInputs(g, ts) {
		dims := make([]int, len(t.Dims))
		for j, d := range t.Dims {
			dims[j] = int(d)
		}
		opts = append(opts, alidnn.WithShape(t.Name, dims...))
	}
	return opts
}

// graphInputs returns the tensors named for the graph inputs they are
// matched to: by name, else by position as matchInputs does (a
// TensorProto file names its tensor as its writer chose).
func graphInputs(g *onnx.Graph, ts []*onnx.Tensor) []*onnx.Tensor {
	var names []string
	byName := map[string]bool{}
	for _, in := range g.Inputs {
		if g.Initializer(in.Name) == nil {
			names = append(names, in.Name)
			byName[in.Name] = true
		}
	}
	out := make([]*onnx.Tensor, len(ts))
	for k, t := range ts {
		out[k] = t
		if !byName[t.Name] && k < len(names) {
			named := *t
			named.Name = names[k]
			out[k] = &named
		}
	}
	return out
}

// runFlags are faas model run's flags.
type runFlags struct {
	ins, outs       []string
	floatNodes      []string
	int8            bool
	profile, attach string
	slot, runs      int
}

func runCommand() *cobra.Command {
	f := runFlags{slot: -1, runs: 1}
	cmd := &cobra.Command{
		Use:   "run MODEL --input in.pb [--input ...] [--output out.pb ...] [--slot N | --attach LISTING]",
		Short: "Run a model (ONNX or program file) once and report its device and host time",
		Long: `Runs MODEL with the given input tensors (ONNX TensorProto files, matched to
the model's inputs by name, else by position; an ONNX MODEL is compiled for
their shapes) and writes the outputs. Prints
the modeled device time of the run and the host wall time (upload, run,
download).

The model runs on an engine simulated in this process, or with --slot N on
slot N of the faasd of --agent: a slot with the AliDNN engine that you
loaded or that was shared with you (faas status lists them), or with
--attach LISTING[:VERSION] on an accelerator from the registry's pool, on
whichever node it lands (this host needs no faasd), detached at the end.
--int8 calibrates on the in-process engine either way (--float-node NAME
keeps a node in fp32, as trtexec's --layerPrecisions does), as does a model
dynamically quantised as onnxruntime's quantize_dynamic writes it
(DynamicQuantizeLinear), whose scales are calibrated on the inputs.

--runs N runs it N times (the times printed are the last run's). With
--slot or --attach, --profile FILE writes the profile of every job of the session to
FILE, a profile log that faas trace export turns into a Chrome trace.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runModel(cmd, &f, args[0]) },
	}
	cmd.Flags().StringArrayVar(&f.ins, "input", nil, "input tensor file (TensorProto), once per input")
	cmd.Flags().StringArrayVar(&f.outs, "output", nil, "file to write an output tensor to, once per output")
	cmd.Flags().BoolVar(&f.int8, "int8", false, "quantise an fp32 ONNX model to int8, calibrated on the inputs")
	cmd.Flags().StringArrayVar(&f.floatNodes, "float-node", nil, "with --int8: keep this node (by name) in fp32, once per node")
	cmd.Flags().IntVar(&f.slot, "slot", -1, "run on this AliDNN slot of faasd (--agent) instead of in process")
	registryFlag(cmd)
	cmd.Flags().StringVar(&f.attach, "attach", "", "run on an accelerator of the registry's pool running this listing (LISTING[:VERSION]) instead of in process")
	cmd.Flags().IntVar(&f.runs, "runs", 1, "run the model this many times")
	cmd.Flags().StringVar(&f.profile, "profile", "", "with --slot: write the session's job profiles to this file (for faas trace export)")
	return cmd
}

// runModel is faas model run.
func runModel(cmd *cobra.Command, f *runFlags, model string) error {
	ctx := cmd.Context()
	if len(f.ins) == 0 {
		return fmt.Errorf("--input is required")
	}
	if f.runs < 1 || f.runs > 100000 {
		return usageErrorf("--runs %d: want 1 to 100000", f.runs)
	}
	if f.slot >= 0 && f.attach != "" {
		return usageErrorf("--slot and --attach: choose one")
	}
	if f.profile != "" && f.slot < 0 && f.attach == "" {
		return usageErrorf("--profile needs --slot or --attach: the in-process engine has no faasd to profile")
	}
	tensors, err := readTensors(f.ins)
	if err != nil {
		return err
	}
	dev, err := engine()
	if err != nil {
		return err
	}
	defer dev.Close()
	start := time.Now()
	p, err := loadProgram(ctx, dev, model, f.int8, f.floatNodes, tensors)
	if err != nil {
		return err
	}
	compileTime := time.Since(start)
	matchInputs(p, tensors)
	s, profiled, where, closeSlot, err := openRunSession(cmd, f, dev, p)
	if err != nil {
		return err
	}
	defer closeSlot()
	defer s.Close(context.WithoutCancel(ctx))
	var res *alidnn.Result
	for range f.runs {
		if res, err = s.Run(ctx, tensors...); err != nil {
			return failed(err)
		}
	}
	if f.profile != "" {
		if err := writeProfileLog(f.profile, profiled, profiled.Slot()); err != nil {
			return err
		}
	}
	if len(f.outs) > len(res.Outputs) {
		return fmt.Errorf("%d --output files for %d outputs", len(f.outs), len(res.Outputs))
	}
	for k, path := range f.outs {
		if err := onnx.WriteTensor(path, res.Outputs[k]); err != nil {
			return err
		}
	}
	return printRun(cmd, res, compileTime, where, f.outs)
}

// openRunSession opens a session of p: on the in-process engine dev, or
// on --slot's or --attach's through faasd, which it returns as profiled
// along with the closing of its slot. where names the engine for people.
func openRunSession(cmd *cobra.Command, f *runFlags, dev alidnn.Device, p *alidnn.Program) (s *alidnn.Session, profiled *client.Device, where string, closeSlot func(), err error) {
	ctx := cmd.Context()
	if f.slot < 0 && f.attach == "" {
		s, err = alidnn.Load(ctx, dev, p)
		return s, nil, "the simulated engine", func() {}, err
	}
	var d *client.Device
	if f.attach != "" {
		d, closeSlot, where, err = openAttached(cmd, f.attach)
	} else {
		d, closeSlot, err = openSlot(cmd, f.slot)
		where = fmt.Sprintf("slot %d through faasd", f.slot)
	}
	if err != nil {
		return nil, nil, "", nil, err
	}
	if f.profile != "" {
		d.KeepProfiles(client.MaxKeptProfiles)
	}
	s, err = alidnn.Open(ctx, alidnn.Agent(d), p, alidnn.WithBatch(1), alidnn.WithPipeline(1))
	if err != nil {
		closeSlot()
		return nil, nil, "", nil, err
	}
	return s, d, where, closeSlot, nil
}

// printRun reports the last run's times and work, and where its outputs
// went.
func printRun(cmd *cobra.Command, res *alidnn.Result, compileTime time.Duration, where string, outs []string) error {
	st := res.Stats
	if jsonOutput(cmd) {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{
			"device_ns": st.DeviceNS(), "host_ns": res.HostTime.Nanoseconds(), "compile_ns": compileTime.Nanoseconds(),
			"cycles": st.Cycles, "macs": st.MACs, "instructions": st.Insns, "outputs": outs,
		})
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "device time  %v (modeled: %d cycles at %d MHz)\n", time.Duration(st.DeviceNS()), st.Cycles, st.ClockMHz)
	fmt.Fprintf(w, "host time    %v (upload, run on %s, download)\n", res.HostTime.Round(time.Microsecond), where)
	fmt.Fprintf(w, "compile time %v\n", compileTime.Round(time.Microsecond))
	fmt.Fprintf(w, "work         %d instructions, %.3g G MACs, %d B loaded, %d B stored\n", st.Insns, float64(st.MACs)/1e9, st.LoadBytes, st.StoreBytes)
	for k, o := range res.Outputs {
		where := ""
		if k < len(outs) {
			where = " → " + outs[k]
		}
		fmt.Fprintf(w, "output %q %v%s\n", o.Name, o.Dims, where)
	}
	return nil
}

// writeProfileLog writes the kept profiles of d, a session on slot, to path.
func writeProfileLog(path string, d *client.Device, slot int) error {
	var buf bytes.Buffer
	if err := client.WriteProfileLog(&buf, client.ProfileLog{Tenant: d.Tenant(), Slot: slot, Profiles: d.Profiles()}); err != nil {
		return err
	}
	if err := atomicfile.Write(path, buf.Bytes(), 0o644); err != nil {
		return usageErrorf("--profile: %v", err)
	}
	return nil
}

// openSlot opens a session on slot n of the faasd of --agent; closeSlot
// ends the session.
func openSlot(cmd *cobra.Command, n int) (dev *client.Device, closeSlot func(), err error) {
	c, err := dialAgent(cmd)
	if err != nil {
		return nil, nil, err
	}
	dev, err = c.Open(cmd.Context(), n)
	if err != nil {
		c.Close()
		return nil, nil, failed(fmt.Errorf("opening slot %d: %w", n, err))
	}
	return dev, func() { dev.Close(); c.Close() }, nil
}

// openAttached attaches an accelerator running listing; closeSlot detaches.
func openAttached(cmd *cobra.Command, listing string) (dev *client.Device, closeSlot func(), where string, err error) {
	registry, _ := cmd.Flags().GetString("registry")
	a, err := attachTo(cmd, registry, listing)
	if err != nil {
		return nil, nil, "", err
	}
	info := a.Info()
	where = fmt.Sprintf("slot %d of node %s, attachment %s", info.Slot, info.Node, info.ID)
	if info.Warm {
		where += " (warm)"
	}
	return a.Device(), func() { a.Close() }, where, nil
}

// readTensors reads the tensor files paths.
func readTensors(paths []string) ([]*onnx.Tensor, error) {
	var ts []*onnx.Tensor
	for _, p := range paths {
		t, err := onnx.ReadTensor(p)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// matchInputs names the tensors after the program's inputs when their own
// names do not match (backend-test files often carry none).
func matchInputs(p *alidnn.Program, ts []*onnx.Tensor) {
	names := map[string]bool{}
	for _, b := range p.Inputs {
		names[b.Name] = true
	}
	for k, t := range ts {
		if !names[t.Name] && k < len(p.Inputs) {
			t.Name = p.Inputs[k].Name
		}
	}
}
