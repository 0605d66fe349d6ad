package alidnn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/alidnn"
)

// waitPending polls until n runs of s wait, failing after a minute.
func waitPending(t *testing.T, s *alidnn.Session, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for alidnn.Pending(s) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d runs waiting, want %d", alidnn.Pending(s), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSessionMaxDelay holds runs for an hour, longer than the test may
// last, so that only the rules that release them early can answer them:
// a preferred batch filled, a deadline before the hold's end, a
// cancellation.
func TestSessionMaxDelay(t *testing.T) {
	m := loadMNIST(t)
	ctx := context.Background()
	s, err := alidnn.Open(ctx, alidnn.NewLocal(local(t)), m.prog, alidnn.WithBatch(4), alidnn.WithPipeline(2),
		alidnn.WithMaxDelay(time.Hour, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)

	// One run is held; a second fills the preferred size and both go.
	type out struct {
		res *alidnn.Result
		err error
	}
	results := make(chan out, 2)
	run := func(ctx context.Context, k int) {
		res, err := s.Run(ctx, m.ins[k])
		results <- out{res, err}
	}
	go run(ctx, 0)
	waitPending(t, s, 1)
	go run(ctx, 1)
	for range 2 {
		o := <-results
		if o.err != nil {
			t.Fatal(o.err)
		}
		if o.res.Batch != 2 {
			t.Errorf("a run of a preferred batch of 2 ran in a job of %d", o.res.Batch)
		}
	}

	// A run whose deadline comes before its hold would end is not held.
	dctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	res, err := s.Run(dctx, m.ins[0])
	if err != nil {
		t.Fatal(err)
	}
	m.check(t, "a run with a deadline", 0, res)
	if res.Batch != 1 {
		t.Errorf("a lone run with a deadline ran in a job of %d", res.Batch)
	}

	// A held run that is canceled returns at once and waits no more.
	cctx, cancelRun := context.WithCancel(ctx)
	go run(cctx, 0)
	waitPending(t, s, 1)
	cancelRun()
	if o := <-results; !errors.Is(o.err, context.Canceled) {
		t.Errorf("a held run canceled: %v, want context.Canceled", o.err)
	}
	waitPending(t, s, 0)
}

// TestSessionMaxDelayLone checks that a lone run is held no longer than
// the delay: with no other run ever coming, it is answered alone.
func TestSessionMaxDelayLone(t *testing.T) {
	m := loadMNIST(t)
	ctx := context.Background()
	s, err := alidnn.Open(ctx, alidnn.NewLocal(local(t)), m.prog, alidnn.WithMaxDelay(20*time.Millisecond, 4))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for k := range 2 {
		res, err := s.Run(ctx, m.ins[k])
		if err != nil {
			t.Fatal(err)
		}
		m.check(t, "a lone held run", k, res)
		if res.Batch != 1 || res.Started.IsZero() {
			t.Errorf("a lone run: batch %d, started %v; want 1 and a time", res.Batch, res.Started)
		}
	}
	if _, err := alidnn.Open(ctx, alidnn.NewLocal(local(t)), m.prog, alidnn.WithBatch(4), alidnn.WithMaxDelay(time.Millisecond, 8)); err == nil {
		t.Error("a preferred size of 8 for jobs of 4 runs was accepted")
	}
}
