package server

import (
	"context"

	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/services/agent/sessions"
)

// WrapChips has every session engine s starts from now on reach its chip
// through wrap(slot, chip): the injection point of the tests that force
// an interleaving.
func WrapChips(s *Server, wrap func(slot int, c sessions.Chip) sessions.Chip) {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.wrap = wrap
}

// PlacePoolAttachment has s's pool take a as live and placed on its slot,
// still attaching: what an attachment whose load is about to fail is.
// release ends it as the registry's end of it would once that load
// failed, and reports whether nothing of a's was left on the chip.
func PlacePoolAttachment(s *Server, a poolapi.Assignment) (release func(context.Context) bool) {
	p := s.pool
	r := &attachRun{a: a, done: make(chan struct{})}
	close(r.done)
	p.mu.Lock()
	p.runs[a.ID] = r
	p.mu.Unlock()
	return func(ctx context.Context) bool {
		p.mu.Lock()
		r.releasing = true
		p.mu.Unlock()
		scrubbed := p.letGo(ctx, a, false)
		p.mu.Lock()
		delete(p.runs, a.ID)
		p.mu.Unlock()
		return scrubbed
	}
}

// CoolPoolSlot runs the clear of slot i kept warm now, as its timer would
// at its deadline, and reports whether one was armed.
func CoolPoolSlot(s *Server, i int) bool {
	p := s.pool
	p.mu.Lock()
	t := p.warm[i]
	p.mu.Unlock()
	if t == nil || !t.Stop() {
		return false
	}
	p.cool(poolAssignment(i, s.cfg.Slots.Record(i)), t)
	return true
}
