package sessions_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/agent/sessions"
)

// endlessJob keeps the engine busy for minutes: 16383² GEMMs.
const endlessJob = "gemm uop=0:1 iter=16383,16383 dst=0,0 src=0,0 wgt=0,0\nfinish job=1"

// waitBusy waits until a job of tenant has been taken off the queue: the
// engine reports the tenant running.
func waitBusy(t *testing.T, e *sessions.Engine, tenant string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, u := range e.Usage() {
			if u.Tenant == tenant && u.Running {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no job of %s started in 10 s", tenant)
}

func TestCancel(t *testing.T) {
	e, _ := newEngine(t, sessions.Config{})
	a, b := open(t, e, "a"), open(t, e, "b")
	endless, fin := program(t, a, asm(t, endlessJob)), program(t, a, finishOnly)
	if err := a.Submit(endless, 0); err != nil {
		t.Fatal(err)
	}
	waitBusy(t, e, "a")
	for id := uint64(1); id <= 5; id++ {
		if err := a.Submit(fin, id); err != nil {
			t.Fatal(err)
		}
	}
	// Another session's Cancel of the same ids touches nothing of a's.
	for id := range uint64(6) {
		if err := b.Cancel(id); err != nil {
			t.Fatalf("b.Cancel(%d): %v", id, err)
		}
	}
	if err := a.Cancel(3); err != nil {
		t.Fatal(err)
	}
	if c := next(t, a); c.Job != 3 || !errors.Is(c.Err, sessions.ErrCanceled) {
		t.Fatalf("first completion: job %d, %v; want job 3 cancelled", c.Job, c.Err)
	}
	start := time.Now()
	if err := a.Cancel(0); err != nil {
		t.Fatal(err)
	}
	if c := next(t, a); c.Job != 0 || !errors.Is(c.Err, sessions.ErrCanceled) {
		t.Fatalf("second completion: job %d, %v; want the running job 0 cancelled", c.Job, c.Err)
	}
	t.Logf("running job aborted %v after Cancel", time.Since(start))
	for _, id := range []uint64{1, 2, 4, 5} {
		if c := next(t, a); c.Job != id || c.Err != nil {
			t.Fatalf("completion: job %d, %v; want job %d done", c.Job, c.Err, id)
		}
	}
	// Ended and unknown jobs: nothing to do, no error.
	for _, id := range []uint64{1, 99} {
		if err := a.Cancel(id); err != nil {
			t.Errorf("Cancel(%d): %v", id, err)
		}
	}
	// The engine goes on: b runs, and a's program can be freed.
	pb := program(t, b, finishOnly)
	if c := run(t, b, pb, 1); c.Err != nil {
		t.Fatal(c.Err)
	}
	if err := a.Free(endless); err != nil {
		t.Errorf("Free of the cancelled job's program: %v", err)
	}
	a.Close()
	if err := a.Cancel(1); !errors.Is(err, sessions.ErrClosed) {
		t.Errorf("Cancel after Close: %v, want ErrClosed", err)
	}
}

func TestJobTimeout(t *testing.T) {
	const limit = 250 * time.Millisecond
	e, _ := newEngine(t, sessions.Config{JobTimeout: limit})
	a, b := open(t, e, "a"), open(t, e, "b")
	pa, pb := program(t, a, asm(t, endlessJob)), program(t, b, finishOnly)
	// Jobs well inside the limit are never hit by a stale watchdog.
	for i := range uint64(300) {
		if c := run(t, b, pb, i); c.Err != nil {
			t.Fatalf("short job %d: %v", i, c.Err)
		}
	}
	start := time.Now()
	if err := a.Submit(pa, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Submit(pb, 1000); err != nil {
		t.Fatal(err)
	}
	c := next(t, a)
	took := time.Since(start)
	if !errors.Is(c.Err, sessions.ErrTimeout) {
		t.Fatalf("endless job: %v, want ErrTimeout", c.Err)
	}
	if took < limit {
		t.Errorf("aborted after %v, before the %v limit", took, limit)
	}
	if c := next(t, b); c.Job != 1000 || c.Err != nil {
		t.Fatalf("b's job after the timeout: job %d, %v", c.Job, c.Err)
	}
}
