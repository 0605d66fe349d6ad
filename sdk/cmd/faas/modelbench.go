package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/fpga-faas/faas/sdk/alidnn"
	client "github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/onnx"
	"github.com/spf13/cobra"
)

// benchPipeline is the job slots of a bench session: two, so that one
// job's inputs are written while the other runs, as in a serving session.
const benchPipeline = 2

// progressEvery is how often a long measurement reports on stderr.
const progressEvery = 5 * time.Second

// maxBenchBatch bounds --batch: device memory grows with batch × pipeline.
const maxBenchBatch = 1024

// benchRow is one batch size's measurement.
type benchRow struct {
	Batch         int     `json:"batch"`
	Runs          int     `json:"runs"`
	Jobs          float64 `json:"jobs"` // a job cut by the window's ends counts in part
	RunsPerSecond float64 `json:"runs_per_s"`
	P50NS         int64   `json:"p50_ns"` // host time of single runs
	P90NS         int64   `json:"p90_ns"`
	P99NS         int64   `json:"p99_ns"`
	DeviceNSRun   float64 `json:"device_ns_per_run"` // modeled
	DeviceNSJob   float64 `json:"device_ns_per_job"` // modeled
	HostNSJob     float64 `json:"host_ns_per_job"`   // wall time / jobs
}

func benchCommand() *cobra.Command {
	var ins []string
	var attach, batches string
	slot := -1
	duration := 3 * time.Second
	cmd := &cobra.Command{
		Use:   "bench MODEL [--slot N | --attach LISTING[:VERSION]] [--batch 1,4,16] [--duration 3s] [--input in.pb ...]",
		Short: "Measure a model's throughput and latency per batch size",
		Long: `For each batch size b of --batch, opens a session on MODEL (in process, on
--slot N of faasd, or on --attach LISTING[:VERSION], as faas model run) that
coalesces up to b concurrent runs into one job, with two job slots, and keeps
2·b runs in flight (b for each job slot) for --duration after a warm-up of
a tenth of it. Reports per batch size the runs, throughput, host-time
latency percentiles of single runs, and the modeled device time per run and
per job next to the host time per job.

A program compiled with faas model compile --batch N is measured at batch N
only: up to N runs share each run of it.

Without --input, the inputs are pseudo-random tensors of the model's input
shapes (the same on every invocation). Progress goes to stderr unless --json.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			sizes, err := parseBatches(batches)
			if err != nil {
				return err
			}
			if duration <= 0 || duration > time.Hour {
				return usageErrorf("--duration %v: want more than 0 and at most 1h", duration)
			}
			if slot >= 0 && attach != "" {
				return usageErrorf("--slot and --attach: choose one")
			}
			tensors, err := readTensors(ins)
			if err != nil {
				return err
			}
			dev, err := engine()
			if err != nil {
				return err
			}
			defer dev.Close()
			p, err := loadProgram(ctx, dev, args[0], false, nil, tensors)
			if err != nil {
				return err
			}
			if len(tensors) == 0 {
				if tensors, err = benchInputs(p); err != nil {
					return err
				}
			}
			matchInputs(p, tensors)
			if p.Batch > 1 {
				// A program compiled for a batch coalesces that many runs
				// into each of its runs, whatever --batch says.
				sizes = []int{p.Batch}
			}
			eng := alidnn.NewLocal(dev)
			where := "the simulated engine"
			if slot >= 0 || attach != "" {
				d, closeSlot, w, err := openBenchDevice(cmd, slot, attach)
				if err != nil {
					return err
				}
				defer closeSlot()
				eng, where = alidnn.Agent(d), w
			}
			var progress io.Writer
			if !jsonOutput(cmd) {
				progress = cmd.ErrOrStderr()
			}
			var rows []benchRow
			for _, b := range sizes {
				if progress != nil {
					fmt.Fprintf(progress, "batch %d: %v on %s...\n", b, duration, where)
				}
				row, err := benchBatch(ctx, eng, p, tensors, b, duration, progress)
				if err != nil {
					return failed(fmt.Errorf("batch %d: %w", b, err))
				}
				rows = append(rows, row)
			}
			return printBench(cmd, args[0], where, duration, rows)
		},
	}
	cmd.Flags().StringArrayVar(&ins, "input", nil, "input tensor file (TensorProto), once per input (default: pseudo-random)")
	cmd.Flags().StringVar(&batches, "batch", "1,4,16", "comma-separated batch sizes (most runs coalesced into one job)")
	cmd.Flags().DurationVar(&duration, "duration", duration, "measuring time per batch size")
	cmd.Flags().IntVar(&slot, "slot", -1, "run on this AliDNN slot of faasd (--agent) instead of in process")
	registryFlag(cmd)
	cmd.Flags().StringVar(&attach, "attach", "", "run on an accelerator of the registry's pool running this listing (LISTING[:VERSION]) instead of in process")
	return cmd
}

// printBench reports the measurements of each batch size.
func printBench(cmd *cobra.Command, model, where string, duration time.Duration, rows []benchRow) error {
	if jsonOutput(cmd) {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{
			"model": model, "where": where, "duration_ns": duration.Nanoseconds(), "results": rows,
		})
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "BATCH\tRUNS\tRUNS/S\tP50\tP90\tP99\tDEVICE/RUN\tDEVICE/JOB\tHOST/JOB\tRUNS/JOB\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%d\t%d\t%.1f\t%v\t%v\t%v\t%v\t%v\t%v\t%.2f\t\n", r.Batch, r.Runs, r.RunsPerSecond,
			us(float64(r.P50NS)), us(float64(r.P90NS)), us(float64(r.P99NS)),
			us(r.DeviceNSRun), us(r.DeviceNSJob), us(r.HostNSJob), float64(r.Runs)/r.Jobs)
	}
	return w.Flush()
}

func us(ns float64) time.Duration { return time.Duration(ns).Round(time.Microsecond) }

// openBenchDevice opens the faasd session of --slot or --attach.
func openBenchDevice(cmd *cobra.Command, slot int, attach string) (*client.Device, func(), string, error) {
	if attach != "" {
		return openAttached(cmd, attach)
	}
	d, closeSlot, err := openSlot(cmd, slot)
	return d, closeSlot, fmt.Sprintf("slot %d through faasd", slot), err
}

// parseBatches parses --batch: distinct sizes from 1 to maxBenchBatch.
func parseBatches(list string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(list, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || b < 1 || b > maxBenchBatch {
			return nil, usageErrorf("--batch %q: %q is not a batch size from 1 to %d", list, f, maxBenchBatch)
		}
		if slices.Contains(sizes, b) {
			return nil, usageErrorf("--batch %q: %d twice", list, b)
		}
		sizes = append(sizes, b)
	}
	return sizes, nil
}

// benchBatch opens a session coalescing up to b runs a job on eng, warms
// it up for a tenth of d, then measures for d, writing the runs so far to
// progress every progressEvery unless progress is nil.
func benchBatch(ctx context.Context, eng alidnn.Engine, p *alidnn.Program, in []*onnx.Tensor, b int, d time.Duration, progress io.Writer) (benchRow, error) {
	s, err := alidnn.Open(ctx, eng, p, alidnn.WithBatch(b), alidnn.WithPipeline(benchPipeline))
	if err != nil {
		return benchRow{}, err
	}
	defer s.Close(context.WithoutCancel(ctx))
	if _, err := measure(ctx, s, in, b*benchPipeline, d/10, new(atomic.Int64)); err != nil {
		return benchRow{}, err
	}
	var done atomic.Int64
	start := time.Now()
	if progress != nil {
		stop := make(chan struct{})
		defer close(stop)
		go reportProgress(progress, stop, b, &done, start.Add(d))
	}
	samples, err := measure(ctx, s, in, b*benchPipeline, d, &done)
	if err != nil {
		return benchRow{}, err
	}
	wall := time.Since(start)
	row := benchRow{Batch: b, Runs: len(samples)}
	var dev float64
	lat := make([]int64, 0, len(samples))
	for _, x := range samples {
		lat = append(lat, x.host)
		row.Jobs += 1 / float64(x.batch)
		dev += float64(x.device) / float64(x.batch)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		row.P50NS, row.P90NS, row.P99NS = percentile(lat, 50), percentile(lat, 90), percentile(lat, 99)
		row.RunsPerSecond = float64(len(samples)) / wall.Seconds()
		row.DeviceNSRun = dev / float64(len(samples))
		row.DeviceNSJob = dev / row.Jobs
		row.HostNSJob = float64(wall.Nanoseconds()) / row.Jobs
		row.Jobs = math.Round(row.Jobs*100) / 100 // jobs cut by the window's ends count in part
	}
	return row, nil
}

// sample is one run: its host time, its job's modeled device time and
// how many runs shared the job.
type sample struct {
	host   int64
	device uint64
	batch  int
}

// reportProgress writes the runs counted in done every progressEvery
// until stop is closed.
func reportProgress(w io.Writer, stop <-chan struct{}, b int, done *atomic.Int64, end time.Time) {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			fmt.Fprintf(w, "batch %d: %d runs, %v left\n", b, done.Load(), time.Until(end).Round(time.Second))
		}
	}
}

// measure keeps n runs in flight on s for d and returns every run that
// ended in that time, counting them in done as they end.
func measure(ctx context.Context, s *alidnn.Session, in []*onnx.Tensor, n int, d time.Duration, done *atomic.Int64) ([]sample, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := time.Now().Add(d)
	var mu sync.Mutex
	var all []sample
	var first error
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			var mine []sample
			// Every worker runs at least once, so that a short window
			// still measures something.
			for k := 0; (k == 0 || time.Now().Before(deadline)) && ctx.Err() == nil; k++ {
				res, err := s.Run(ctx, in...)
				if err != nil {
					mu.Lock()
					if first == nil && ctx.Err() == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					break
				}
				mine = append(mine, sample{res.HostTime.Nanoseconds(), res.Stats.DeviceNS(), max(res.Batch, 1)})
				done.Add(1)
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all, first
}

// percentile is the nearest-rank q-th percentile of sorted.
func percentile(sorted []int64, q int) int64 {
	k := (len(sorted)*q + 99) / 100
	return sorted[max(k-1, 0)]
}

// benchInputs makes one pseudo-random tensor per input of p, of its shape
// and type, from a fixed seed so that runs compare.
func benchInputs(p *alidnn.Program) ([]*onnx.Tensor, error) {
	rng := rand.New(rand.NewPCG(16, 5))
	// Ids that pick rows of a table (the embeddings) stay below its rows.
	rows := map[string]int64{}
	for _, d := range p.Derived {
		if g := d.Gather; g != nil && (rows[g.From] == 0 || int64(g.Rows) < rows[g.From]) {
			rows[g.From] = int64(g.Rows)
		}
	}
	var ts []*onnx.Tensor
	for _, b := range p.Inputs {
		shape := b.Shape
		if b.Bcast != nil { // the caller gives the input's own shape, broadcast on upload
			shape = b.Bcast
		}
		if p.Batch > 1 { // a run of a batched program is one sample
			shape = append([]int{1}, shape[1:]...)
		}
		n := 1
		dims := make([]int64, len(shape))
		for k, d := range shape {
			dims[k] = int64(d)
			n *= d
		}
		if b.Type == onnx.Float {
			data := make([]float32, n)
			for k := range data {
				data[k] = rng.Float32()
			}
			ts = append(ts, onnx.NewFloat32(b.Name, dims, data))
			continue
		}
		if b.Type == onnx.String {
			t, err := onnx.NewString(b.Name, dims, benchStrings(rng, p.Strings, n))
			if err != nil {
				return nil, fmt.Errorf("input %q: %w", b.Name, err)
			}
			ts = append(ts, t)
			continue
		}
		lo, span := int64(0), int64(10)
		switch b.Type {
		case onnx.Uint8:
			span = 256
		case onnx.Int8:
			lo, span = -128, 256
		case onnx.Bool:
			span = 2
		}
		if r := rows[b.Name]; r > 0 {
			span = min(span, r)
		}
		data := make([]int64, n)
		for k := range data {
			data[k] = lo + rng.Int64N(span)
		}
		t, err := onnx.NewInt(b.Name, b.Type, dims, data)
		if err != nil {
			return nil, fmt.Errorf("input %q of type %v: %w; give --input", b.Name, b.Type, err)
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// benchStrings are n strings for a STRING input: half of them the
// program's own constants (which Equal finds), half 1 to 8 random bytes.
func benchStrings(rng *rand.Rand, consts [][]byte, n int) [][]byte {
	strs := make([][]byte, n)
	for k := range strs {
		if len(consts) > 0 && rng.IntN(2) == 0 {
			strs[k] = consts[rng.IntN(len(consts))]
			continue
		}
		strs[k] = make([]byte, 1+rng.IntN(8))
		for i := range strs[k] {
			strs[k][i] = byte(rng.UintN(256))
		}
	}
	return strs
}
