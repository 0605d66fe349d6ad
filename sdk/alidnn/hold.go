package alidnn

import (
	"fmt"
	"slices"
	"time"
)

// WithMaxDelay holds a run up to d, while fewer runs wait than a job
// takes, so that more runs arrive to share its job — Triton's dynamic
// batcher's max_queue_delay. A job goes at once when the waiting runs fill
// the largest of the preferred sizes (default: the job's most runs,
// WithBatch or the program's batch); when the oldest run's delay has
// passed, the job takes the largest preferred size the waiting runs fill,
// or all of them. A run whose ctx has a deadline before its delay would
// end is not held at all: holding it would spend the time its job needs.
// d = 0 holds nothing; preferred sizes then still split what waits.
func WithMaxDelay(d time.Duration, preferred ...int) SessionOption {
	return func(o *sessionOptions) { o.delay, o.preferred = d, slices.Clone(preferred) }
}

// checkHold checks the preferred sizes against the most runs a job takes.
func checkHold(o *sessionOptions, perJob int) error {
	if o.delay < 0 {
		return fmt.Errorf("session: max delay %v is negative", o.delay)
	}
	slices.Sort(o.preferred)
	for _, n := range o.preferred {
		if n < 1 || n > perJob {
			return fmt.Errorf("session: preferred batch size %d is not within 1 to the %d runs a job takes", n, perJob)
		}
	}
	o.preferred = slices.Compact(o.preferred)
	return nil
}

// holds reports whether the session holds runs back or splits them by
// preferred sizes; without either it dispatches as soon as a slot is free.
func (s *Session) holds() bool { return s.delay > 0 || len(s.preferred) > 0 }

// holdUntil is when a run arriving now stops being held: zero if it is
// not held.
func (s *Session) holdUntil(r *request, now time.Time) time.Time {
	if s.delay <= 0 {
		return time.Time{}
	}
	until := now.Add(s.delay)
	if dl, ok := r.ctx.Deadline(); ok && dl.Before(until) {
		return time.Time{}
	}
	return until
}

// jobSize is how many of the waiting runs the next job takes now, or 0 to
// hold them, a wake-up armed for when the oldest's hold ends. Callers
// hold mu.
func (s *Session) jobSize(now time.Time) int {
	n := min(s.perJob, len(s.pending))
	if !s.holds() {
		return n
	}
	top := s.perJob
	if len(s.preferred) > 0 {
		top = s.preferred[len(s.preferred)-1]
	}
	if n >= top {
		return top
	}
	var due time.Time // the earliest end of a hold among the runs a job would take
	for k, r := range s.pending[:n] {
		if k == 0 || r.holdUntil.Before(due) {
			due = r.holdUntil
		}
	}
	if due.After(now) {
		s.wakeAt(due)
		return 0
	}
	for k := len(s.preferred) - 1; k >= 0; k-- {
		if s.preferred[k] <= n {
			return s.preferred[k]
		}
	}
	return n
}

// wakeAt arms the timer that dispatches again at t, unless it is armed
// for sooner. Callers hold mu.
func (s *Session) wakeAt(t time.Time) {
	if !s.wakeup.IsZero() && !t.Before(s.wakeup) {
		return
	}
	s.wakeup = t
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Until(t), s.woken)
		return
	}
	s.timer.Reset(time.Until(t))
}

// woken dispatches the runs whose hold has ended.
func (s *Session) woken() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wakeup = time.Time{}
	if !s.closed {
		s.dispatch()
	}
}
