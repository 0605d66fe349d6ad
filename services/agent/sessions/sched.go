package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
)

// tenant is the accounting and the job queue of one tenant. Guarded by
// Engine.mu.
type tenant struct {
	name  string
	quota Quota

	// vtime is the tenant's virtual time: engine nanoseconds used divided
	// by its share. float64 keeps nanosecond resolution for months of
	// engine time; only differences between busy tenants matter.
	vtime float64
	queue []job // in submit order; head at queue[0]
	busy  bool  // in scheduler.busy

	busyNS, jobs, memory           uint64
	scrubs, scrubNS, scrubDeviceNS uint64
	sessions                       int
}

// job is one submitted run.
type job struct {
	s      *Session
	p      *program
	id     uint64
	queued time.Time // when Submit queued it, for the job's profile
}

// scheduler picks the next job. Guarded by Engine.mu.
type scheduler struct {
	busy []*tenant // tenants with queued jobs
	// vnow is the virtual time of the last pick: the least vtime of the
	// busy tenants then. A tenant that becomes busy starts at vnow at the
	// earliest, so time spent idle is not banked as credit.
	vnow float64
	wake chan struct{} // a job was queued (capacity 1)
}

func (sc *scheduler) init() { sc.wake = make(chan struct{}, 1) }

// push queues j behind its tenant's other jobs.
func (sc *scheduler) push(t *tenant, j job) {
	if !t.busy {
		t.busy = true
		t.vtime = max(t.vtime, sc.vnow)
		sc.busy = append(sc.busy, t)
	}
	t.queue = append(t.queue, j)
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

// pick removes and returns the next job: the oldest of the busy tenant
// with the least virtual time (the earliest to become busy on a tie).
func (sc *scheduler) pick() (job, bool) {
	k := -1
	for i, t := range sc.busy {
		if k < 0 || t.vtime < sc.busy[k].vtime {
			k = i
		}
	}
	if k < 0 {
		return job{}, false
	}
	t := sc.busy[k]
	sc.vnow = max(sc.vnow, t.vtime)
	j := t.queue[0]
	t.queue[0] = job{}
	t.queue = t.queue[1:]
	if len(t.queue) == 0 {
		sc.idle(k)
	}
	return j, true
}

// idle drops busy tenant k, whose queue is empty.
func (sc *scheduler) idle(k int) {
	t := sc.busy[k]
	t.busy = false
	t.queue = nil // let the backing array go
	sc.busy = append(sc.busy[:k], sc.busy[k+1:]...)
}

// idleIfEmpty drops tenant t from the busy tenants once its queue is
// empty.
func (sc *scheduler) idleIfEmpty(t *tenant) {
	if !t.busy || len(t.queue) > 0 {
		return
	}
	for k, b := range sc.busy {
		if b == t {
			sc.idle(k)
			return
		}
	}
}

// cancel removes the queued jobs of session s and returns them in order.
func (sc *scheduler) cancel(s *Session) []job {
	t := s.t
	var out []job
	kept := t.queue[:0]
	for _, j := range t.queue {
		if j.s == s {
			out = append(out, j)
		} else {
			kept = append(kept, j)
		}
	}
	clear(t.queue[len(kept):])
	t.queue = kept
	sc.idleIfEmpty(t)
	return out
}

// Run schedules jobs until ctx ends; then every session is closed. It runs
// one job at a time and returns nil when ctx ends. A job running then is
// aborted and completes with ctx's error.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return errors.New("sessions: Run called twice")
	}
	e.started = true
	e.mu.Unlock()
	stop := context.AfterFunc(ctx, e.stop)
	defer stop()
	defer e.shutdown()

	for ctx.Err() == nil {
		e.mu.Lock()
		j, ok := e.sched.pick()
		if !ok {
			e.mu.Unlock()
			select {
			case <-e.sched.wake:
			case <-ctx.Done():
			}
			continue
		}
		e.running = j.s
		e.run = runState{job: j.id}
		e.mu.Unlock()
		e.exec(j)
	}
	return nil
}

// exec runs one job and delivers its completion. If the SRAMs may hold
// another session's data, a scrub clears it first; a job whose scrub failed
// does not run and completes with the scrub's error.
func (e *Engine) exec(j job) {
	s := j.s
	t := s.t
	if !e.dirty.empty() && e.owner != s {
		sst, sd, err := e.scrub(s.ctx, s)
		e.mu.Lock()
		t.scrubs++
		t.scrubNS += uint64(sd)
		t.scrubDeviceNS += sst.DeviceNS()
		if err != nil {
			// e.dirty and e.owner stay: the next job of any other session
			// scrubs again.
			e.running = nil
			j.p.jobs--
			err = fmt.Errorf("sessions: job %d not run: %w", j.id, err)
			if s.closed {
				err = fmt.Errorf("%w: %w", ErrClosed, err)
			}
			e.log.Warn("SRAM scrub failed", "tenant", t.name, "window", s.window, "err", err)
			s.deliver(Completion{Job: j.id, Err: err})
			e.jobDone.Broadcast()
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		e.dirty, e.owner = sramSet{}, nil
	}
	e.mu.Lock()
	if why := e.run.why; why != nil { // cancelled during the scrub
		e.running = nil
		j.p.jobs--
		s.deliver(Completion{Job: j.id, Err: why})
		e.jobDone.Broadcast()
		e.mu.Unlock()
		return
	}
	start := time.Now()
	e.run.exec, e.run.start = true, start
	e.mu.Unlock()
	if e.watchdog != nil {
		e.watchdog.Reset(e.jobTimeout)
	}
	st, err := alidnn.Exec(s.ctx, e.chip, alidnn.Run{Insns: j.p.addr, Count: j.p.count, Window: s.window})
	if e.watchdog != nil {
		e.watchdog.Stop()
	}
	d := uint64(time.Since(start))
	// Even a failed or aborted job may have written part of what its
	// program writes.
	if !j.p.writes.empty() {
		e.dirty.add(&j.p.writes)
		e.owner = s
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	e.running = nil
	t.busyNS += d
	t.jobs++
	e.activity.Jobs++
	e.activity.Busy += time.Duration(d)
	t.vtime += float64(d) / t.quota.Share
	j.p.jobs--
	switch {
	case err == nil:
	case s.closed:
		err = fmt.Errorf("%w: job %d aborted: %w", ErrClosed, j.id, err)
	case e.run.why != nil && aborted(err):
		err = e.run.why
	}
	s.deliver(Completion{Job: j.id, Stats: st, Err: err, Queued: start.Sub(j.queued), Engine: time.Duration(d)})
	e.jobDone.Broadcast()
}

// aborted reports whether err is the engine's report of CONTROL.ABORT.
func aborted(err error) bool {
	var ee *alidnn.EngineError
	return errors.As(err, &ee) && ee.Cause == alidnn.CauseAborted
}

// shutdown closes every session when Run returns; no session opens after.
func (e *Engine) shutdown() {
	e.stop()
	if e.watchdog != nil {
		e.watchdog.Stop()
	}
	e.mu.Lock()
	e.dead = true
	var all []*Session
	for s := range e.sessions {
		all = append(all, s)
	}
	e.mu.Unlock()
	for _, s := range all {
		if err := s.Close(); err != nil {
			e.log.Warn("closing a session at shutdown", "tenant", s.t.name, "window", s.window, "err", err)
		}
	}
}
