package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/internal/atomicfile"
	client "github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/traceevent"
)

func traceCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "trace", Short: "Record, replay and export what sessions did on the accelerator"}
	cmd.AddCommand(traceExportCommand(), traceRecordCommand(), traceReplayCommand())
	return cmd
}

// maxProfileLogFile bounds a profile log read by trace export.
const maxProfileLogFile = 1 << 30

func traceExportCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export PROFILE-LOG... -o TRACE.json",
		Short: "Write profile logs as a Chrome trace (Perfetto, chrome://tracing)",
		Long: `Reads profile logs — written by faas model run --profile, or by an
application with the SDK's Device.KeepProfiles and faas.WriteProfileLog — and
writes them as one Chrome trace-event JSON file: a process per slot with a
track per engine queue (load, compute, store), and a process per tenant with
its jobs, each job split into its queue wait in faasd and its run on the
engine. Open it in https://ui.perfetto.dev or chrome://tracing.

Exit codes: 0 written; 1 a profile log is malformed; 2 usage or I/O errors.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageErrorf("-o TRACE.json is required")
			}
			var logs []client.ProfileLog
			jobs := 0
			for _, path := range args {
				l, err := readProfileLog(path)
				if err != nil {
					return err
				}
				logs = append(logs, l)
				jobs += len(l.Profiles)
			}
			var buf bytes.Buffer
			if err := traceevent.Write(&buf, logs...); err != nil {
				return err
			}
			// The export checks its own output as a viewer would.
			if _, err := traceevent.Validate(buf.Bytes()); err != nil {
				return err
			}
			if err := atomicfile.Write(out, buf.Bytes(), 0o644); err != nil {
				return usageErrorf("%v", err)
			}
			if jsonOutput(cmd) {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"trace": out, "logs": len(logs), "jobs": jobs, "bytes": buf.Len()})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d jobs from %d profile logs; open it in https://ui.perfetto.dev or chrome://tracing\n", out, jobs, len(logs))
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "trace file to write")
	return cmd
}

func readProfileLog(path string) (client.ProfileLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return client.ProfileLog{}, usageErrorf("%v", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxProfileLogFile {
		return client.ProfileLog{}, failedf("%s: %d bytes, more than a profile log's %d", path, st.Size(), maxProfileLogFile)
	}
	l, err := client.ReadProfileLog(f)
	if errors.Is(err, client.ErrProfileLog) {
		return client.ProfileLog{}, failedf("%s: %w", path, err)
	}
	if err != nil {
		return client.ProfileLog{}, usageErrorf("%s: %v", path, err)
	}
	return l, nil
}
