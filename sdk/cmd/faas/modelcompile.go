package main

// faas model compile: an ONNX model to a program file, in fp32 or
// quantised after training on calibration samples.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
	"github.com/spf13/cobra"
)

// compileFlags are faas model compile's flags.
type compileFlags struct {
	out           string
	shapes, calib []string
	floatNodes    []string
	int8          bool
	batch         int
}

func compileCommand() *cobra.Command {
	var f compileFlags
	f.batch = 1
	cmd := &cobra.Command{
		Use:   "compile MODEL.onnx -o PROGRAM [--batch N] [--shape NAME=DIMS ...] [--int8 --calib DIR ... [--float-node NAME ...]]",
		Short: "Compile an ONNX model to an AliDNN program file",
		Long: `Compiles MODEL.onnx for the AliDNN engine and writes the program file.

With --batch N, the program holds N samples a run (the model's leading
batch dimension of 1 becomes N): sessions coalesce up to N concurrent runs
into one run of it, and fully connected layers load their weights once for
all N.

The engine runs static shapes. --shape binds the dimensions a model leaves
free (the symbolic batch and sequence length exporters write) at compile
time, as trtexec's --shapes does: --shape NAME=1x3x48x320 gives input NAME
that shape, and --shape NAME=N, NAME a symbolic dimension (batch, seq),
binds it in every input that has it, as onnxruntime's free-dimension
overrides by name do. A binding of an input wins over a binding of its
symbolic dimensions; repeated, the last one of a name wins. A free
dimension left unbound is an error naming the input and the dimension, and
so is a binding that contradicts a fixed one. faas model test binds the
shapes of each data set's inputs, and run and bench those of --input.

--int8 quantises the model after training, as trtexec --int8 does with a
calibration set: --calib DIR (repeatable) is one calibration sample, a
folder of input_0.pb, input_1.pb, … (TensorProto files, as an ONNX test
data set holds them) matched to the model's inputs by name, else by
position; the inputs' shapes are bound from the first sample unless
--shape binds them. The calibration runs on an engine simulated in this
process. --float-node NAME keeps a node in fp32. A model dynamically
quantised as onnxruntime's quantize_dynamic writes it
(DynamicQuantizeLinear) needs --calib, without --int8, for the scales the
engine fixes at compile time.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := f.out
			if out == "" {
				return fmt.Errorf("-o PROGRAM is required")
			}
			p, err := compileModel(cmd.Context(), &f, args[0])
			if err != nil {
				return err
			}
			p.Name = filepath.Base(args[0])
			if err := p.WriteFile(out); err != nil {
				return err
			}
			info := map[string]any{"program": out, "instructions": len(p.Insns), "layers": p.Layers,
				"constant_bytes": len(p.Consts), "memory_bytes": p.MemSize(), "macs": p.MACs, "batch": max(p.Batch, 1)}
			if jsonOutput(cmd) {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(info)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d layers, %d instructions, %d bytes of constants, %d bytes of device memory, %.3g G MACs per run\n",
				out, p.Layers, len(p.Insns), len(p.Consts), p.MemSize(), float64(p.MACs)/1e9)
			return nil
		},
	}
	cmd.Flags().StringVarP(&f.out, "output", "o", "", "program file to write")
	cmd.Flags().IntVar(&f.batch, "batch", f.batch, "samples a run holds (the model's batch dimension)")
	cmd.Flags().StringArrayVar(&f.shapes, "shape", nil, "bind free dimensions: INPUT=1x3x48x320 or SYMBOL=N (repeatable)")
	cmd.Flags().BoolVar(&f.int8, "int8", false, "quantise to int8 after training, calibrated on --calib")
	cmd.Flags().StringArrayVar(&f.calib, "calib", nil, "a calibration sample: a folder of input_N.pb files (repeatable)")
	cmd.Flags().StringArrayVar(&f.floatNodes, "float-node", nil, "with --int8: keep this node (by name) in fp32 (repeatable)")
	return cmd
}

// compileModel compiles the model at path as f asks.
func compileModel(ctx context.Context, f *compileFlags, path string) (*alidnn.Program, error) {
	if f.batch < 1 || f.batch > 256 {
		return nil, usageErrorf("--batch %d: want 1 to 256", f.batch)
	}
	if f.int8 && len(f.calib) == 0 {
		return nil, usageErrorf("--int8 needs --calib DIR, a folder of input_N.pb files, once per calibration sample")
	}
	if len(f.floatNodes) > 0 && !f.int8 {
		return nil, usageErrorf("--float-node applies with --int8")
	}
	if len(f.calib) > 0 && f.batch > 1 {
		return nil, usageErrorf("--calib with --batch %d: calibration compiles for one sample a run; compile with --batch 1", f.batch)
	}
	bind, err := parseShapes(f.shapes)
	if err != nil {
		return nil, err
	}
	m, err := onnx.ReadModel(path)
	if err != nil {
		return nil, err
	}
	if len(f.calib) == 0 {
		p, err := alidnn.Compile(m, append(bind, alidnn.ForBatch(f.batch))...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return p, nil
	}
	samples, err := readSamples(m.Graph, f.calib)
	if err != nil {
		return nil, err
	}
	if len(f.shapes) == 0 {
		bind = inputShapes(m.Graph, samples[0])
	}
	dev, err := engine()
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	var p *alidnn.Program
	switch {
	case f.int8:
		if len(f.floatNodes) > 0 {
			bind = append(bind, alidnn.WithFloatNodes(f.floatNodes...))
		}
		p, err = alidnn.Quantize(ctx, dev, m, samples, bind...)
	case slices.ContainsFunc(m.Graph.Nodes, func(n *onnx.Node) bool { return n.OpType == "DynamicQuantizeLinear" }):
		p, err = alidnn.Calibrate(ctx, dev, m, samples, bind...)
	default:
		return nil, usageErrorf("--calib applies with --int8, or to a model with DynamicQuantizeLinear")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// readSamples reads the calibration samples of dirs, each a folder of
// input_0.pb, input_1.pb, …, the tensors named for the graph's inputs.
func readSamples(g *onnx.Graph, dirs []string) ([][]*onnx.Tensor, error) {
	var samples [][]*onnx.Tensor
	for _, dir := range dirs {
		var paths []string
		for k := 0; ; k++ {
			p := filepath.Join(dir, fmt.Sprintf("input_%d.pb", k))
			if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("--calib %s: %w", dir, err)
			}
			paths = append(paths, p)
		}
		if len(paths) == 0 {
			return nil, usageErrorf("--calib %s: no input_0.pb there (a calibration sample is a folder of input_N.pb files)", dir)
		}
		ts, err := readTensors(paths)
		if err != nil {
			return nil, fmt.Errorf("--calib %s: %w", dir, err)
		}
		samples = append(samples, graphInputs(g, ts))
	}
	return samples, nil
}
