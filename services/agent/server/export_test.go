package server

import "github.com/fpga-faas/faas/services/agent/sessions"

// WrapChips has every session engine s starts from now on reach its chip
// through wrap(slot, chip): the injection point of the tests that force
// an interleaving.
func WrapChips(s *Server, wrap func(slot int, c sessions.Chip) sessions.Chip) {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.wrap = wrap
}
