// Command hdk is the ISV toolkit of the FaaS platform: it scaffolds, builds,
// inspects, signs, verifies and pushes accelerator images (OCI artifacts
// holding partial bitstreams for one or both chips of a board).
//
// An image argument is an OCI image layout directory if such a directory
// exists, otherwise a registry reference. Registry credentials come from the
// standard docker config (~/.docker/config.json).
//
// Exit codes: 0 success; 1 the image failed a check (verification,
// validation); 2 usage error or any other failure.
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

// errCheck marks an image that failed a check, as opposed to a usage or I/O
// problem.
var errCheck = errors.New("check failed")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := &cobra.Command{
		Use:           "hdk",
		Short:         "FaaS ISV toolkit: build, inspect, sign and push accelerator images",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().Bool("json", false, "print machine-readable JSON")
	root.AddCommand(keygenCommand(), initCommand(), buildCommand(), inspectCommand(), bitCommand(),
		pushCommand(), signCommand(), verifyCommand(), sealCommand(), recipientKeygenCommand(), loginCommand(), validateCommand(), asmCommand(), disasmCommand())
	err := root.ExecuteContext(ctx)
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "hdk:", err)
	if errors.Is(err, errCheck) {
		os.Exit(1)
	}
	os.Exit(2)
}

func jsonOutput(cmd *cobra.Command) bool {
	v, _ := cmd.Flags().GetBool("json")
	return v
}
