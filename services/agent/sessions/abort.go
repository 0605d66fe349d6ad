package sessions

import (
	"fmt"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
)

// runState is what the engine knows of the running job. Guarded by
// Engine.mu; meaningful while Engine.running is set.
type runState struct {
	job   uint64
	exec  bool      // the job's own program is in Exec (not its scrub)
	start time.Time // of the job's Exec
	// why is the reason the agent aborted the job (a Cancel or the time
	// limit), nil if it did not. A job that ends well before the abort
	// takes effect completes as it would have.
	why error
}

// Cancel stops job id of the session: a queued job is taken off the queue,
// a running one aborted, and either completes with ErrCanceled. Cancel is
// best effort: a job that has already completed, or completes before the
// abort reaches the engine, keeps its outcome; Cancel reports no error for
// it nor for an id the session never submitted.
func (s *Session) Cancel(id uint64) error {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if j, ok := e.sched.remove(s, id); ok {
		j.p.jobs--
		s.deliver(Completion{Job: id, Err: fmt.Errorf("sessions: job %d cancelled before it ran: %w", id, ErrCanceled)})
		return nil
	}
	if e.running == s && e.run.job == id {
		e.abortRunning(fmt.Errorf("sessions: job %d cancelled while running: %w", id, ErrCanceled))
	}
	return nil
}

// abortRunning aborts the running job for why. During its scrub only why
// is recorded: exec then does not start the job. e.mu held.
func (e *Engine) abortRunning(why error) {
	if e.run.why != nil {
		return
	}
	e.run.why = why
	if !e.run.exec {
		return
	}
	// Under e.mu, so the write cannot reach the next job: that job's START
	// comes after exec has taken e.mu to finish this one.
	if err := e.chip.RoleWrite32(alidnn.RegControl, alidnn.Abort); err != nil {
		e.log.Warn("aborting a job", "tenant", e.running.t.name, "job", e.run.job, "err", err)
	}
}

// expire is the watchdog's function: it aborts the running job if it has
// run longer than the limit. A late call for an earlier job finds a job
// younger than the limit and does nothing.
func (e *Engine) expire() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running == nil || !e.run.exec || time.Since(e.run.start) < e.jobTimeout {
		return
	}
	e.log.Warn("job exceeded the time limit; aborted", "tenant", e.running.t.name, "window", e.running.window,
		"job", e.run.job, "limit", e.jobTimeout)
	e.abortRunning(fmt.Errorf("sessions: job %d ran longer than %v: %w", e.run.job, e.jobTimeout, ErrTimeout))
}

// remove takes job id of session s off its tenant's queue.
func (sc *scheduler) remove(s *Session, id uint64) (job, bool) {
	t := s.t
	for i, j := range t.queue {
		if j.s != s || j.id != id {
			continue
		}
		n := len(t.queue)
		copy(t.queue[i:], t.queue[i+1:])
		t.queue[n-1] = job{}
		t.queue = t.queue[:n-1]
		sc.idleIfEmpty(t)
		return j, true
	}
	return job{}, false
}
