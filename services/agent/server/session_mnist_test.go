package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/classify"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// mnistTolerance is the test data's tolerance for fp32 models
// (testdata/README.md), on the scores before argmax.
const mnistTolerance = 5e-3

// TestSessionMNISTTwoTenants: two tenant processes share one AliDNN chip
// (alice loaded it and shares it with bob), each compiles MNIST, loads it
// into its own session and classifies the reference digits many times over,
// concurrently; every run of both must match the reference.
func TestSessionMNISTTwoTenants(t *testing.T) {
	dir := testenv.TestData(t, "onnx", "models", "mnist")
	a := startSessAgent(t, sessOptions{sharedWith: map[int][]string{0: {"bob"}}})
	const repeat = 12
	var kids []*child
	for _, who := range []string{"alice", "bob"} {
		kids = append(kids, startChild(t, "mnist", a.socket, who, 0,
			"FAAS_SESSION_MNIST="+dir, "FAAS_SESSION_REPEAT="+strconv.Itoa(repeat)))
	}
	for _, k := range kids {
		k.expect("READY", time.Minute)
	}
	// Both hold their sessions before either runs, so the runs overlap.
	for _, k := range kids {
		k.say("go")
	}
	for i, k := range kids {
		got := k.expect("OK", 5*time.Minute)
		if len(got) != 1 || got[0] != strconv.Itoa(2*repeat) {
			t.Errorf("child %d: OK %v, want %d runs", i, got, 2*repeat)
		}
		if err := <-k.done; err != nil {
			t.Errorf("child %d: %v\n%s", i, err, k.errb.String())
		}
	}
	for _, who := range []string{"alice", "bob"} {
		if u := usageOf(a.srv, 0, who); u.Jobs == 0 {
			t.Errorf("tenant %s ran no job on slot 0", who)
		}
	}
}

// childMNIST is a tenant process classifying MNIST through the agent.
func childMNIST(socket, tenant string, slot int) error {
	ctx := context.Background()
	dir := os.Getenv("FAAS_SESSION_MNIST")
	repeat, _ := strconv.Atoi(os.Getenv("FAAS_SESSION_REPEAT"))
	m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		return err
	}
	prog, err := alidnn.Compile(m)
	if err != nil {
		return err
	}
	cases, err := classify.ReadCases(dir)
	if err != nil {
		return err
	}
	c, err := faas.Dial(ctx, socket, faas.WithToken(tenantToken(tenant)))
	if err != nil {
		return err
	}
	defer c.Close()
	dev, err := c.Open(ctx, slot)
	if err != nil {
		return err
	}
	defer dev.Close()
	s, err := alidnn.Open(ctx, alidnn.Agent(dev), prog)
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	fmt.Println("READY")
	var line string
	if _, err := fmt.Scanln(&line); err != nil {
		return err
	}
	out, err := classify.Run(ctx, s, prog, cases, repeat)
	if err != nil {
		return err
	}
	if err := classify.Check(out); err != nil {
		return err
	}
	for _, o := range out {
		if o.MaxAbsDiff > mnistTolerance {
			return fmt.Errorf("%s: scores differ from the reference by %g (tolerance %g)", o.Case, o.MaxAbsDiff, mnistTolerance)
		}
	}
	fmt.Println("OK", len(out))
	return nil
}
