package sessions_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/agent/sessions"
	"github.com/fpga-faas/faas/shell"
)

// longJob is a program without DRAM accesses that keeps the engine busy
// for about 0.2 ms (2 ms with the race detector): 2048 GEMMs of 16×16.
const longJob = "gemm uop=0:1 iter=64,32 dst=0,0 src=0,0 wgt=0,0\nfinish job=1"

func TestCloseMidStream(t *testing.T) {
	e, chip := newEngine(t, sessions.Config{})
	a, b := open(t, e, "a"), open(t, e, "b")
	ctx := context.Background()
	ar := a.Region()
	ab := alloc(t, a, 1<<20)
	if err := a.Write(ctx, ab.Handle, 0, bytes.Repeat([]byte{0xff}, 1<<20)); err != nil {
		t.Fatal(err)
	}
	pa := program(t, a, asm(t, longJob))
	g := setupGEMM(t, b, 3)

	const na, nb = 200, 50
	for i := range na {
		if err := a.Submit(pa, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range nb {
		if err := b.Submit(g.prog, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if c := next(t, a); c.Job != 0 || c.Err != nil {
		t.Fatalf("first completion %+v", c)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	ran, closed := 1, 0
	for c := range a.Completions() {
		if c.Job != uint64(ran+closed) {
			t.Fatalf("completion of job %d, want %d", c.Job, ran+closed)
		}
		switch {
		case c.Err == nil && closed == 0:
			ran++
		case errors.Is(c.Err, sessions.ErrClosed):
			closed++
		default:
			t.Fatalf("job %d: %v after %d closed", c.Job, c.Err, closed)
		}
	}
	if ran+closed != na || closed == 0 {
		t.Fatalf("%d jobs ran, %d closed; want %d in all, some closed", ran, closed, na)
	}
	t.Logf("%d of %d jobs ran before Close", ran, na)

	region := make([]byte, ar.Limit-ar.Base)
	if err := chip.Read(ctx, ar.Base, region); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(region, make([]byte, len(region))) {
		t.Fatal("closed session's region not zeroed")
	}
	if ctl, err := chip.Read32(shell.RegWindowControl); err != nil || ctl&(1<<ar.Window) != 0 {
		t.Fatalf("window control %#x (%v): window %d still enabled", ctl, err, ar.Window)
	}
	for _, err := range []error{
		a.Submit(pa, 1), a.Free(ab.Handle), a.Write(ctx, ab.Handle, 0, make([]byte, 4)),
	} {
		if !errors.Is(err, sessions.ErrClosed) {
			t.Errorf("use after Close: %v, want ErrClosed", err)
		}
	}
	if _, err := a.Alloc(64); !errors.Is(err, sessions.ErrClosed) {
		t.Errorf("Alloc after Close: %v", err)
	}

	for i := range nb {
		if c := next(t, b); c.Job != uint64(i) || c.Err != nil {
			t.Fatalf("b's completion %d: %+v", i, c)
		}
	}
	g.check(t, b)
	for _, u := range e.Usage() {
		// The aborted job, if any, used the engine too.
		if u.Tenant == "a" && (u.Sessions != 0 || u.Memory != 0 || u.Jobs < uint64(ran) || u.Jobs > uint64(ran)+1) {
			t.Errorf("a's usage after Close: %+v", u)
		}
	}
}

func TestConcurrentSessions(t *testing.T) {
	e, _ := newEngine(t, sessions.Config{})
	const sessionsN, jobs = 4, 2000
	var wg sync.WaitGroup
	for k := range sessionsN {
		s := open(t, e, string(rune('a'+k%2))) // two tenants, two sessions each
		p := program(t, s, finishOnly)
		base := uint64(k) << 32
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range uint64(jobs) {
				if err := s.Submit(p, base|i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := range uint64(jobs) {
				select {
				case c := <-s.Completions():
					if c.Job != base|i || c.Err != nil {
						t.Errorf("session %d: completion %d is job %#x (%v)", k, i, c.Job, c.Err)
						return
					}
				case <-time.After(10 * time.Second):
					t.Errorf("session %d: stuck after %d completions", k, i)
					return
				}
			}
			select {
			case c := <-s.Completions():
				t.Errorf("session %d: extra completion %+v", k, c)
			default:
			}
		}()
	}
	wg.Wait()
	var total uint64
	for _, u := range e.Usage() {
		total += u.Jobs
	}
	if total != sessionsN*jobs {
		t.Fatalf("usage counts %d jobs, want %d", total, sessionsN*jobs)
	}
}

// feeder keeps depth jobs of a session queued until stopped.
type feeder struct {
	quit, done chan struct{}
}

func feed(t *testing.T, s *sessions.Session, p sessions.Handle, depth int) *feeder {
	f := &feeder{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		var id uint64
		for range depth {
			if err := s.Submit(p, id); err != nil {
				t.Error(err)
				return
			}
			id++
		}
		inflight := depth
		for inflight > 0 {
			c := <-s.Completions()
			inflight--
			if c.Err != nil {
				t.Error(c.Err)
				return
			}
			select {
			case <-f.quit:
				continue
			default:
			}
			if err := s.Submit(p, id); err != nil {
				t.Error(err)
				return
			}
			id++
			inflight++
		}
	}()
	return f
}

func (f *feeder) stop() { close(f.quit); <-f.done }

// fairJobs is how many jobs a share is measured over: the scheduler
// switches tenants at job boundaries, so a window of a few jobs (a fixed
// time on a loaded machine, where each simulated job takes longer) moves a
// share by whole jobs — 19% once for 25% over 500 ms. Over 200 jobs one is
// half a percent.
const fairJobs = 200

// afterJobs waits until the engine has run n more jobs, and returns each
// tenant's BusyNS then.
func afterJobs(t *testing.T, e *sessions.Engine, n uint64) map[string]uint64 {
	t.Helper()
	jobs := func() (total uint64) {
		for _, u := range e.Usage() {
			total += u.Jobs
		}
		return total
	}
	start := jobs()
	deadline := time.Now().Add(time.Minute)
	for jobs()-start < n {
		if time.Now().After(deadline) {
			t.Fatalf("the engine ran %d jobs in a minute, want %d", jobs()-start, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return busy(e)
}

// busy returns each tenant's BusyNS.
func busy(e *sessions.Engine) map[string]uint64 {
	m := map[string]uint64{}
	for _, u := range e.Usage() {
		m[u.Tenant] = u.BusyNS
	}
	return m
}

// shareOf is a's part of the engine time both used between two snapshots.
func shareOf(before, after map[string]uint64) float64 {
	da, db := after["a"]-before["a"], after["b"]-before["b"]
	return float64(da) / float64(da+db)
}

func TestFairShare(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for seconds")
	}
	e, _ := newEngine(t, sessions.Config{Quotas: map[string]sessions.Quota{"a": {Share: 0.25}, "b": {Share: 0.75}}})
	a, b := open(t, e, "a"), open(t, e, "b")
	pa, pb := program(t, a, asm(t, longJob)), program(t, b, asm(t, longJob))

	// Deep queues: a tenant whose client is late to resubmit is idle, and
	// the engine rightly runs the other's jobs meanwhile.
	fa, fb := feed(t, a, pa, 64), feed(t, b, pb, 64)
	time.Sleep(50 * time.Millisecond)
	u0 := busy(e)
	u1 := afterJobs(t, e, fairJobs)
	if s := shareOf(u0, u1); s < 0.20 || s > 0.30 {
		t.Errorf("both busy: a had %.1f%% of the engine, want 25 ± 5", 100*s)
	}

	// b idles: a gets the whole engine.
	fb.stop()
	u2, t2 := busy(e), time.Now()
	time.Sleep(300 * time.Millisecond)
	u3, d := busy(e), time.Since(t2)
	if s := float64(u3["a"]-u2["a"]) / float64(d); s < 0.9 {
		t.Errorf("alone: a had %.1f%% of the engine, want ≥ 90", 100*s)
	}

	// b returns: it banked no credit while idle, so the shares are 25/75
	// from the start rather than b's alone until it catches up.
	fb = feed(t, b, pb, 64)
	u4 := busy(e)
	u5 := afterJobs(t, e, fairJobs)
	if s := shareOf(u4, u5); s < 0.20 || s > 0.30 {
		t.Errorf("after b's idle spell: a had %.1f%% of the engine, want 25 ± 5", 100*s)
	}
	fa.stop()
	fb.stop()
}

func TestRunEndClosesSessions(t *testing.T) {
	chip := newChip(t)
	e, err := sessions.New(sessions.Config{Chip: chip, DDRSize: chip.DDRSize()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Open("a")
	if err != nil {
		t.Fatal(err)
	}
	p := program(t, s, asm(t, longJob))
	for i := range 100 {
		if err := s.Submit(p, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	next(t, s)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	n := 1
	for c := range s.Completions() {
		if c.Err != nil && !errors.Is(c.Err, sessions.ErrClosed) && !errors.Is(c.Err, context.Canceled) {
			t.Errorf("job %d: %v", c.Job, c.Err)
		}
		n++
	}
	if n != 100 {
		t.Errorf("%d completions, want 100", n)
	}
	if _, err := e.Open("a"); !errors.Is(err, sessions.ErrClosed) {
		t.Errorf("Open after Run: %v, want ErrClosed", err)
	}
	if err := e.Run(context.Background()); err == nil {
		t.Error("second Run accepted")
	}
}
