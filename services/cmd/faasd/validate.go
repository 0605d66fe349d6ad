package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/services/agent/boards"
	"github.com/fpga-faas/faas/services/agent/device"
	devsim "github.com/fpga-faas/faas/services/agent/device/sim"
	"github.com/fpga-faas/faas/services/agent/selftest"
	"github.com/fpga-faas/faas/shell/sim"
)

type validateFlags struct {
	sim       int
	sysfs     string
	dev       string
	size      int
	bitstream string
	json      bool
	realTime  bool
}

func validateCommand() *cobra.Command {
	var f validateFlags
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Bring every chip up with the loopback role and check it end to end",
		Long: `validate programs the loopback role into every chip of every board, then checks
role registers, tenant windows, DMA both ways, the role's own DDR access, its
interrupt and the CRC it computes. With --sim N it runs on N simulated boards.

Exit codes: 0 all checks passed, 1 a check failed, 2 usage error or no board.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return validate(cmd, f) },
	}
	fl := cmd.Flags()
	fl.IntVar(&f.sim, "sim", 0, "validate N simulated boards instead of the host's")
	fl.BoolVar(&f.realTime, "sim-real-time", false, "simulated boards take modeled time (programming at the configuration-port rate)")
	fl.StringVar(&f.sysfs, "sysfs", "", "sysfs root to discover boards in (default /sys)")
	fl.StringVar(&f.dev, "dev", "", "directory of the XDMA device nodes (default /dev)")
	fl.IntVar(&f.size, "size", 64<<20, "bytes to move through DMA and the role, per chip")
	fl.StringVar(&f.bitstream, "bitstream", "", "loopback .bit to program (default: the reference loopback bitstream for each chip's part)")
	fl.BoolVar(&f.json, "json", false, "print one JSON object per chip instead of text")
	return cmd
}

// chipReport is the JSON form of one chip's validation.
type chipReport struct {
	Board        string       `json:"board"`
	Serial       string       `json:"serial"`
	Model        string       `json:"model"`
	Chip         int          `json:"chip"`
	Part         string       `json:"part"`
	Passed       bool         `json:"passed"`
	Error        string       `json:"error,omitempty"`
	Role         string       `json:"role,omitempty"`
	ConfigTimeUS int64        `json:"config_time_us"`
	Bytes        int          `json:"bytes"`
	CRC          string       `json:"crc32"`
	WriteGBps    float64      `json:"write_gbps"`
	ReadGBps     float64      `json:"read_gbps"`
	Steps        []stepReport `json:"steps"`
}

type stepReport struct {
	Name       string  `json:"name"`
	DurationMS float64 `json:"duration_ms"`
	Detail     string  `json:"detail,omitempty"`
	Error      string  `json:"error,omitempty"`
}

func validate(cmd *cobra.Command, f validateFlags) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	bs, err := openBoards(cmd, f)
	if err != nil && len(bs) == 0 {
		return err
	}
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "faasd: some boards could not be opened:", err)
	}
	if len(bs) == 0 {
		return fmt.Errorf("no FaaS boards found (use --sim N to validate simulated boards)")
	}
	defer func() {
		for _, b := range bs {
			b.Close()
		}
	}()
	var custom []byte
	if f.bitstream != "" {
		if custom, err = os.ReadFile(f.bitstream); err != nil {
			return err
		}
	}
	failed := 0
	enc := json.NewEncoder(out)
	for _, b := range bs {
		if !f.json {
			fmt.Fprintf(out, "board %s: %s, serial %s\n", b.ID, b.Model.Name, b.Serial)
		}
		for _, c := range b.Chips {
			bit := custom
			if bit == nil {
				if bit, err = loopback.Bitstream(c.Part(), 4<<20); err != nil {
					return err
				}
			}
			rep := chipReport{Board: b.ID, Serial: b.Serial, Model: b.Model.Name, Chip: c.Index(), Part: c.Part().Name}
			opts := selftest.Options{Size: f.size, Step: func(s selftest.Step) {
				rep.Steps = append(rep.Steps, stepReport{Name: s.Name, DurationMS: float64(s.Duration.Microseconds()) / 1000, Detail: s.Detail, Error: errText(s.Err)})
				if !f.json {
					printStep(out, s)
				}
			}}
			res, err := selftest.Run(ctx, c, bit, opts)
			rep.Passed, rep.Error = err == nil, errText(err)
			rep.Role, rep.ConfigTimeUS, rep.Bytes = res.Role.String(), res.ConfigTime.Microseconds(), res.Bytes
			rep.CRC, rep.WriteGBps, rep.ReadGBps = fmt.Sprintf("%08x", res.CRC), res.WriteRate/1e9, res.ReadRate/1e9
			if err != nil {
				failed++
			}
			if f.json {
				enc.Encode(rep)
			} else if err == nil {
				fmt.Fprintf(out, "  chip %d: PASSED\n", c.Index())
			} else {
				fmt.Fprintf(out, "  chip %d: FAILED: %v\n", c.Index(), err)
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d chip(s) failed validation", errCheck, failed)
	}
	return nil
}

func openBoards(cmd *cobra.Command, f validateFlags) ([]*device.Board, error) {
	if f.sim < 0 || f.size <= 0 {
		return nil, fmt.Errorf("--sim and --size must not be negative")
	}
	if f.sim == 0 {
		return boards.Host{SysfsRoot: f.sysfs, DevRoot: f.dev}.Open(cmd.Context())
	}
	roles, err := simRoles()
	if err != nil {
		return nil, err
	}
	var out []*device.Board
	for i := range f.sim {
		sb, err := sim.NewBoard(sim.Config{Serial: fmt.Sprintf("SIM%04d", i), Roles: roles, RealTime: f.realTime})
		if err != nil {
			return nil, err
		}
		b, err := devsim.Open(sb)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func printStep(w io.Writer, s selftest.Step) {
	status := "ok"
	if s.Err != nil {
		status = "FAILED: " + s.Err.Error()
	}
	fmt.Fprintf(w, "  chip %d  %-15s %9s  %s %s\n", s.Chip, s.Name, s.Duration.Round(10*time.Microsecond), status, s.Detail)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
