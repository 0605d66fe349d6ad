package sessions

// outboxCap is the buffer of a session's Completions channel. Beyond it
// completions wait in an unbounded queue (bounded in effect by
// Config.MaxJobs), so the scheduler never blocks on a slow reader.
const outboxCap = 256

// outbox delivers a session's completions in order. The scheduler hands a
// completion straight to the channel when nothing is waiting before it and
// the channel has room: the fast path takes no goroutine switch besides
// the reader's. Otherwise the completion is queued and a drainer goroutine,
// started on demand, feeds the channel at the reader's pace. Guarded by
// Engine.mu.
type outbox struct {
	s        *Session
	ch       chan Completion
	pending  []Completion
	draining bool // a drainer goroutine owns pending
	done     bool // no completion will follow those in pending
}

func (o *outbox) init(s *Session) {
	o.s = s
	o.ch = make(chan Completion, outboxCap)
}

// deliver hands c to the session's reader. e.mu held.
func (s *Session) deliver(c Completion) {
	o := &s.out
	if !o.draining {
		select {
		case o.ch <- c:
			s.jobs--
			return
		default:
		}
		o.draining = true
		go o.drain()
	}
	o.pending = append(o.pending, c)
}

// finish closes the channel once every completion is delivered. e.mu held.
func (o *outbox) finish() {
	o.done = true
	if !o.draining {
		close(o.ch)
	}
}

// drain feeds pending completions to the channel until none is left. If
// the engine stops while the reader is not reading, the rest are dropped
// so the goroutine ends.
func (o *outbox) drain() {
	e := o.s.e
	e.mu.Lock()
	for len(o.pending) > 0 {
		c := o.pending[0]
		o.pending[0] = Completion{}
		o.pending = o.pending[1:]
		e.mu.Unlock()
		select {
		case o.ch <- c:
		case <-e.base.Done():
		}
		e.mu.Lock()
		o.s.jobs--
	}
	o.pending = nil
	o.draining = false
	if o.done {
		close(o.ch)
	}
	e.mu.Unlock()
}
