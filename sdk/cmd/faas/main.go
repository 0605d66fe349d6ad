// Command faas is the tenant's command-line tool. `faas model` compiles and
// runs ONNX models on the AliDNN engine; until the node agent serves
// engines, it runs them on an in-process simulated engine.
//
//	faas model test [--int8] DIR...                 run ONNX backend-test folders, one PASS/FAIL line each
//	faas model compile MODEL.onnx -o PROGRAM        compile to a program file
//	faas model run MODEL --input in.pb --output out.pb
//	                                                run MODEL (.onnx or a program file), print the
//	                                                modeled device time and the host wall time
//
// Every command takes --json for machine-readable output.
//
// Exit codes: 0 success; 1 a test folder failed; 2 usage error or any other
// failure.
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

// errFailed marks a run whose tests failed, as opposed to a usage or I/O
// problem.
var errFailed = errors.New("tests failed")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRoot().ExecuteContext(ctx)
	if err == nil {
		return
	}
	if !errors.Is(err, errFailed) {
		fmt.Fprintln(os.Stderr, "faas:", err)
	}
	os.Exit(exitCode(err))
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "faas",
		Short:         "FaaS tenant tool: compile and run models on FPGA accelerators",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().Bool("json", false, "print machine-readable JSON")
	root.AddCommand(modelCommand())
	return root
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errFailed):
		return 1
	}
	return 2
}

func jsonOutput(cmd *cobra.Command) bool {
	v, _ := cmd.Flags().GetBool("json")
	return v
}
