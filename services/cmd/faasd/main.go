// Command faasd is the node agent of the FaaS platform. It owns the FPGA
// boards of one host.
//
//	faasd serve     own the boards and serve the agent API (loads, slots, cache)
//	faasd validate  bring every chip up with the loopback role and check
//	                programming, DMA, tenant windows, the role's DDR access,
//	                interrupts and its CRC, like `xbutil validate` on Alveo
//	faasd health    exit 0 when the running faasd answers on its socket (a probe)
//
// serve logs JSON lines to standard error.
//
// Exit codes: 0 every check passed; 1 a check failed; 2 bad usage, or no
// board could be opened.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// errCheck marks a failed check, as opposed to a usage or setup problem.
var errCheck = errors.New("check failed")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:           "faasd",
		Short:         "FaaS node agent: owns the FPGA boards of this host",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(validateCommand(), serveCommand(), healthCommand())
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		os.Exit(exitOK)
	case errors.Is(err, errCheck):
		fmt.Fprintln(os.Stderr, "faasd:", err)
		os.Exit(exitFailed)
	default:
		fmt.Fprintln(os.Stderr, "faasd:", err)
		os.Exit(exitUsage)
	}
}
