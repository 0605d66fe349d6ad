// Command faas is the tenant's command-line tool. `faas model` compiles and
// runs ONNX models on the AliDNN engine; until the node agent serves
// engines, it runs them on an in-process simulated engine. The other
// commands drive the node agent, faasd, through package sdk/faas.
//
//	faas model test [--int8] DIR...                 run ONNX backend-test folders, one PASS/FAIL line each
//	faas model compile MODEL.onnx -o PROGRAM [--batch N]  compile to a program file
//	faas model push REF [--config config.json] MODEL  push a model to the registry, print its digest
//	faas model run MODEL --input in.pb --output out.pb
//	                                                run MODEL (.onnx or a program file), print the
//	                                                modeled device time and the host wall time
//	faas model bench MODEL [--batch 1,4,16] [--duration 3s] [--slot N | --attach LISTING]
//	                                                throughput, host latency p50/p90/p99 and
//	                                                modeled device time per batch size
//
//	faas login REGISTRY -u USER --password-stdin    create a registry API token and store it
//	faas logout                                     revoke and forget it
//	faas status                                     table of the host's slots
//	faas describe SLOT                              every field of a slot, sensors included
//	faas load [--slot N] [--async] IMAGE            load an image, showing each phase
//	faas clear SLOT                                 clear a slot
//	faas pull IMAGE                                 prefetch an image into the node cache
//	faas images                                     the node cache
//	faas attach LISTING[:VERSION] [--share] [--hold]
//	                                                an accelerator from the registry's pool, on any node
//	faas detach ID                                  end an attachment
//	faas attachments                                your attachments
//
// Every command takes --json for machine-readable output. The agent commands
// take --agent TARGET: a socket path (unix:///path, /path, ./path) or
// https://host:port, by default $FAAS_AGENT or /run/faas/faasd.sock. They
// send faasd the token of $FAAS_TOKEN, else the one `faas login` stored in
// $FAAS_CONFIG or faas/config.json under the user's configuration directory
// (~/.config on Linux), a file of mode 0600, else, in a Kubernetes pod given
// devices, their allocation credential ($FAAS_ALLOCATION_TOKEN).
//
// Errors print "faas: MESSAGE" on standard error, then "hint: HINT" when
// there is something to do about them. Exit codes:
//
//	0  success
//	1  the operation failed: a test folder failed (faas model test), the
//	   image failed to program or its self-test, faasd failed otherwise
//	2  usage error or bad input (including an unknown slot, load or image,
//	   an unreadable file, or any other failure of faas model)
//	3  not authenticated, permission denied, not entitled to the image, or
//	   the tenant's spend limit of the month reached (no new loads)
//	4  signature or platform countersignature invalid or missing
//	5  image incompatible with the slot (shell version, board model, part)
//	6  slot busy
//	7  unavailable: faasd or the registry unreachable
//	8  the node cache cannot hold the image
//	9  the attachment was lost: its lease expired or its node stopped answering
//
// `faas model push` exits 3 when the registry refuses the login (or there
// is none), 7 when it is unreachable and 1 when it fails otherwise.
//
// `faas attach` exits 6 when the pool has no room for the image, and 1 when
// the node could not load it.
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/fpga-faas/faas/sdk/agentapi"
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
	os.Exit(report(os.Stderr, err))
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "faas",
		Short:         "FaaS tenant tool: load images into FPGA slots, compile and run models",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().Bool("json", false, "print machine-readable JSON")
	root.PersistentFlags().String("agent", "", "faasd address: socket path or https://host:port (default $FAAS_AGENT or "+agentapi.DefaultSocket+")")
	root.AddCommand(modelCommand(), loginCommand(), logoutCommand(), statusCommand(), describeCommand(),
		loadCommand(), clearCommand(), pullCommand(), imagesCommand(), traceCommand(),
		attachCommand(), detachCommand(), attachmentsCommand())
	return root
}

func jsonOutput(cmd *cobra.Command) bool {
	v, _ := cmd.Flags().GetBool("json")
	return v
}
