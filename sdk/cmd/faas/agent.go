package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	client "github.com/fpga-faas/faas/sdk/faas"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// dialAgent connects to the faasd of --agent with the stored token.
func dialAgent(cmd *cobra.Command) (*client.Client, error) {
	target, _ := cmd.Flags().GetString("agent")
	tok, err := agentToken()
	if err != nil {
		return nil, failed(err)
	}
	return client.Dial(cmd.Context(), target, client.WithToken(tok), client.WithUserAgent("faas-cli"))
}

func parseSlot(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, usageErrorf("slot %q: want a slot number (faas status lists them)", s)
	}
	return n, nil
}

func writeJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List the host's slots: state, image, tenant, role",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dialAgent(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			slots, err := c.Slots(cmd.Context())
			if err != nil {
				return failed(err)
			}
			if jsonOutput(cmd) {
				if slots == nil {
					slots = []agentapi.Slot{}
				}
				return writeJSON(cmd, slots)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SLOT\tSTATE\tIMAGE\tTENANT\tROLE\tLOADED")
			for _, s := range slots {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", s.Index, s.State, imageName(s.Image), dash(s.Tenant), roleName(s.Role), ago(s.LoadedAt))
			}
			return tw.Flush()
		},
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func imageName(im *agentapi.Image) string {
	switch {
	case im == nil:
		return "-"
	case im.Ref != "":
		return im.Ref
	case im.Name != "":
		return im.Name + ":" + im.Version
	}
	return shortDigest(im.Digest)
}

func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return dash(d)
}

func roleName(r *agentapi.Role) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%s %s", r.Name, r.Version)
}

// ago is how long ago t was, coarsely.
func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

func describeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "describe SLOT",
		Short: "Show every field of a slot, sensors included",
		Args:  cobra.ExactArgs(1),
		RunE: onSlot((*client.Client).Slot, func(cmd *cobra.Command, s agentapi.Slot) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			kv := func(k string, format string, args ...any) {
				fmt.Fprintf(tw, "%s:\t"+format+"\n", append([]any{k}, args...)...)
			}
			kv("Slot", "%d", s.Index)
			kv("State", "%s", s.State)
			if s.Reason != "" {
				kv("Reason", "%s", s.Reason)
			}
			kv("Board", "%s", dash(s.Board))
			kv("Board model", "%s", dash(s.BoardModel))
			kv("Serial", "%s", dash(s.Serial))
			kv("Chip", "%d", s.Chip)
			kv("Part", "%s", dash(s.Part))
			if im := s.Image; im != nil {
				kv("Image", "%s", dash(im.Ref))
				kv("Image digest", "%s", dash(im.Digest))
				kv("Image name", "%s", dash(im.Name))
				kv("Image version", "%s", dash(im.Version))
				kv("Image vendor", "%s", dash(im.Vendor))
			} else {
				kv("Image", "-")
			}
			if r := s.Role; r != nil {
				kv("Role", "%s (id %#x, version %s)", dash(r.Name), r.ID, dash(r.Version))
			} else {
				kv("Role", "-")
			}
			kv("Tenant", "%s", dash(s.Tenant))
			if !s.LoadedAt.IsZero() {
				kv("Loaded at", "%s (%s)", s.LoadedAt.Local().Format(time.RFC3339), ago(s.LoadedAt))
			} else {
				kv("Loaded at", "-")
			}
			if se := s.Sensors; se != nil {
				kv("Temperature", "%.1f °C", se.TempC)
				kv("Power", "%.2f W", se.PowerW)
				kv("VCCINT", "%.3f V", se.VCCIntV)
				kv("Clock 0", "%.1f MHz", se.Clock0MHz)
				kv("Clock 1", "%.1f MHz", se.Clock1MHz)
				kv("Link", "%s", map[bool]string{true: "up", false: "down"}[se.LinkUp])
				kv("Health", "%s", dash(se.Health))
			}
			return tw.Flush()
		}),
	}
}

func clearCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "clear SLOT",
		Short: "Clear a slot you hold (any slot, as operator)",
		Args:  cobra.ExactArgs(1),
		RunE: onSlot((*client.Client).Clear, func(cmd *cobra.Command, s agentapi.Slot) error {
			fmt.Fprintf(cmd.OutOrStdout(), "slot %d %s\n", s.Index, s.State)
			return nil
		}),
	}
}

// onSlot runs a command on the slot named by its argument: call the agent,
// then print the slot as JSON (--json) or with text.
func onSlot(call func(*client.Client, context.Context, int) (agentapi.Slot, error), text func(*cobra.Command, agentapi.Slot) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		n, err := parseSlot(args[0])
		if err != nil {
			return err
		}
		c, err := dialAgent(cmd)
		if err != nil {
			return err
		}
		defer c.Close()
		s, err := call(c, cmd.Context(), n)
		if err != nil {
			return failed(err)
		}
		if jsonOutput(cmd) {
			return writeJSON(cmd, s)
		}
		return text(cmd, s)
	}
}

func loadCommand() *cobra.Command {
	var slot int
	var async bool
	cmd := &cobra.Command{
		Use:   "load [--slot N] [--async] IMAGE",
		Short: "Load an image into a slot, showing each phase",
		Long: `load asks faasd to load IMAGE (a registry reference, tag or digest) into
slot N (for a two-chip image, the board holding slot N), or into the lowest
cleared slot that fits, and follows the phases: resolve, pull, verify, key,
program, self-test. Progress goes to standard error; the summary (slots,
digest, total and phase times) or, with --json, the final load to standard
output. With --async it prints the load's id and returns at once.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var opts []client.LoadOption
			var req agentapi.LoadRequest
			req.Image = args[0]
			if cmd.Flags().Changed("slot") {
				if slot < 0 {
					return usageErrorf("--slot %d: want a slot number", slot)
				}
				opts = append(opts, client.OnSlot(slot))
				req.Slot = &slot
			}
			c, err := dialAgent(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			if async {
				l, err := c.StartLoad(cmd.Context(), req)
				if err != nil {
					return failed(err)
				}
				if jsonOutput(cmd) {
					return writeJSON(cmd, l)
				}
				fmt.Fprintln(cmd.OutOrStdout(), l.ID)
				return nil
			}
			p := newProgress(cmd)
			start := time.Now()
			l, err := c.Load(cmd.Context(), args[0], append(opts, client.WithProgress(p.event))...)
			p.finish()
			return finishLoad(cmd, l, err, start)
		},
	}
	cmd.Flags().IntVar(&slot, "slot", 0, "slot to load into (default: the lowest cleared slot that fits)")
	cmd.Flags().BoolVar(&async, "async", false, "start the load, print its id and return")
	return cmd
}

func pullCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "pull IMAGE",
		Short: "Prefetch an image into the node cache",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dialAgent(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			p := newProgress(cmd)
			start := time.Now()
			l, err := c.Pull(cmd.Context(), args[0], p.event)
			p.finish()
			return finishLoad(cmd, l, err, start)
		},
	}
}

// finishLoad prints the outcome of a load or pull that ran to its end (or
// failed) and returns the error to exit with.
func finishLoad(cmd *cobra.Command, l agentapi.Load, err error, start time.Time) error {
	if l.ID == "" { // never started, or the stream was lost
		return failed(err)
	}
	if jsonOutput(cmd) {
		if werr := writeJSON(cmd, l); werr != nil && err == nil {
			return werr
		}
		return failed(err)
	}
	if err != nil {
		return failed(err)
	}
	w := cmd.OutOrStdout()
	total := time.Since(start)
	if !l.Started.IsZero() && !l.Finished.IsZero() {
		total = l.Finished.Sub(l.Started)
	}
	if l.Kind == "pull" {
		fmt.Fprintf(w, "pulled %s\n", dash(l.Image.Ref))
	} else {
		fmt.Fprintf(w, "loaded %s into %s\n", dash(l.Image.Ref), slotsString(l.Slots))
	}
	fmt.Fprintf(w, "  digest     %s\n", dash(l.Image.Digest))
	fmt.Fprintf(w, "  total      %v\n", roundDuration(total))
	for _, ph := range l.Phases {
		line := fmt.Sprintf("  %-10s %v", ph.Name, roundDuration(time.Duration(ph.DurationMS*float64(time.Millisecond))))
		if ph.Bytes > 0 {
			line += "  " + bytesString(ph.Bytes)
		}
		if ph.CacheHit {
			line += "  (cached)"
		}
		fmt.Fprintln(w, line)
	}
	return nil
}

func slotsString(slots []int) string {
	if len(slots) == 1 {
		return fmt.Sprintf("slot %d", slots[0])
	}
	s := make([]string, len(slots))
	for k, n := range slots {
		s[k] = strconv.Itoa(n)
	}
	return "slots " + strings.Join(s, ", ")
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d
}

func bytesString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/unit, 0
	for v >= unit && u < 4 {
		v /= unit
		u++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[u])
}

// progress shows a load's phases on standard error: a progress bar per
// phase on a terminal, one line per phase otherwise, nothing with --json.
type progress struct {
	w     io.Writer
	quiet bool
	tty   bool
	phase string
	bar   *progressbar.ProgressBar
	max   int64
}

func newProgress(cmd *cobra.Command) *progress {
	w := cmd.ErrOrStderr()
	p := &progress{w: w, quiet: jsonOutput(cmd)}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	return p
}

func (p *progress) event(ev agentapi.Event) {
	if p.quiet || ev.Phase == "" {
		return
	}
	if ev.Phase != p.phase {
		p.finish()
		p.phase = ev.Phase
		if !p.tty {
			if ev.Total > 0 {
				fmt.Fprintf(p.w, "%s (%s)\n", ev.Phase, bytesString(ev.Total))
			} else {
				fmt.Fprintln(p.w, ev.Phase)
			}
			return
		}
		p.newBar(ev.Total)
	}
	if p.bar == nil {
		return
	}
	switch {
	case ev.Total > 0 && p.max <= 0: // the size became known: a byte bar instead of the spinner
		p.bar.Clear()
		p.newBar(ev.Total)
	case ev.Total > 0 && ev.Total != p.max:
		p.max = ev.Total
		p.bar.ChangeMax64(ev.Total)
	}
	p.bar.Set64(ev.Bytes)
}

// newBar starts the bar of p.phase: of total bytes, or a spinner when the
// total is unknown.
func (p *progress) newBar(total int64) {
	p.max = total
	if p.max <= 0 {
		p.max = -1
	}
	p.bar = progressbar.NewOptions64(p.max, progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(fmt.Sprintf("%-9s", p.phase)), progressbar.OptionShowBytes(total > 0),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetElapsedTime(true))
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
		p.bar = nil
	}
}

func imagesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "images",
		Short: "List the node cache",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dialAgent(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			l, err := c.Images(cmd.Context())
			if err != nil {
				return failed(err)
			}
			if jsonOutput(cmd) {
				if l.Images == nil {
					l.Images = []agentapi.CachedBlob{}
				}
				return writeJSON(cmd, l)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "DIGEST\tSIZE\tLAST USED")
			for _, b := range l.Images {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", b.Digest, bytesString(b.Size), ago(b.LastUsed))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d blobs, %s used of %s\n", len(l.Images), bytesString(l.UsedBytes), bytesString(l.MaxBytes))
			return nil
		},
	}
}
