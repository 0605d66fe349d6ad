package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	client "github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/faas/replay"
	"github.com/fpga-faas/faas/sdk/faas/tracefile"
)

func traceRecordCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "record -o TRACE -- COMMAND [ARG...]",
		Short: "Run a program and record its accelerator sessions",
		Long: `Runs COMMAND with $FAAS_TRACE set, so that every session it opens with the
SDK records a trace: its buffers, the bytes it writes to the device and
reads back, its programs and jobs. The first session records to TRACE,
later ones to TRACE.2, TRACE.3, … faas trace replay runs a trace again.
A trace holds the program's data: keep it as you would the data.

Exit codes: COMMAND's own; 2 usage errors or COMMAND could not start.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageErrorf("-o TRACE is required")
			}
			abs, err := filepath.Abs(out)
			if err != nil {
				return usageErrorf("%v", err)
			}
			c := exec.CommandContext(cmd.Context(), args[0], args[1:]...)
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			c.Env = append(os.Environ(), client.TraceEnv+"="+abs)
			err = c.Run()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return &exitWith{code: ee.ExitCode(), err: fmt.Errorf("%s exited with %d", args[0], ee.ExitCode())}
			}
			if err != nil {
				return usageErrorf("%v", err)
			}
			if _, err := os.Stat(abs); err != nil {
				return failedf("%s opened no accelerator session: no trace at %s", args[0], abs)
			}
			if !jsonOutput(cmd) {
				fmt.Fprintf(cmd.ErrOrStderr(), "trace written to %s\n", abs)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "trace file to write")
	return cmd
}

func traceReplayCommand() *cobra.Command {
	slot := -1
	cmd := &cobra.Command{
		Use:   "replay TRACE --slot N",
		Short: "Run a recorded session again and check its results bit for bit",
		Long: `Replays TRACE on slot N of the faasd of --agent (a local socket or a remote
https:// agent): allocates its buffers, writes the recorded inputs, stores its
programs (moved to the new buffers) and runs its jobs in order, then compares
every read with the recording, byte for byte. The slot must run the role and
role version the trace was recorded on. Prints per-job timing, recorded
against replayed (medians), and the modeled device cycles.

Exit codes: 0 every result identical; 1 a result differs; 2 usage, a bad or
altered trace, or an incompatible slot; the agent commands' codes otherwise.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if slot < 0 {
				return usageErrorf("--slot N is required")
			}
			f, err := os.Open(args[0])
			if err != nil {
				return usageErrorf("%v", err)
			}
			tr, err := tracefile.Read(f, 0)
			f.Close()
			if err != nil {
				return usageErrorf("%s: %v", args[0], err)
			}
			c, err := dialAgent(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			s, err := c.Slot(ctx, slot)
			if err != nil {
				return err
			}
			if err := replay.Compatible(tr.Header, s); err != nil {
				return usageErrorf("%v", err)
			}
			dev, err := c.Open(ctx, slot)
			if err != nil {
				return failed(fmt.Errorf("opening slot %d: %w", slot, err))
			}
			defer dev.Close()
			rep, err := replay.Run(ctx, dev, tr)
			if err != nil {
				return err
			}
			rec, rpl := median(rep.Recorded), median(rep.Replayed)
			if jsonOutput(cmd) {
				if err := writeJSON(cmd, map[string]any{
					"identical": rep.Identical(), "jobs": rep.Jobs, "reads": rep.Reads, "mismatched": rep.Mismatched,
					"mismatches": rep.Mismatches, "failed_jobs_differ": rep.FailedJobs,
					"recorded_median_ns": rec.Nanoseconds(), "replayed_median_ns": rpl.Nanoseconds(),
					"recorded_cycles": rep.RecordedCycles, "replayed_cycles": rep.ReplayedCycles,
				}); err != nil {
					return err
				}
			} else {
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "%d jobs, %d reads compared: %d differ\n", rep.Jobs, rep.Reads, rep.Mismatched)
				for _, m := range rep.Mismatches {
					fmt.Fprintf(w, "  record %d: buffer %#x byte %d is %#02x, recorded %#02x\n", m.Record, m.Addr, m.Off, m.Got, m.Want)
				}
				ratio := 0.0
				if rec > 0 {
					ratio = float64(rpl) / float64(rec)
				}
				fmt.Fprintf(w, "job time (median) recorded %v, replayed %v (%.2f×); device cycles %d recorded, %d replayed\n",
					rec, rpl, ratio, rep.RecordedCycles, rep.ReplayedCycles)
			}
			if !rep.Identical() {
				return failedf("the replay differs from the recording")
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&slot, "slot", -1, "slot to replay on")
	return cmd
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Microsecond)
}
