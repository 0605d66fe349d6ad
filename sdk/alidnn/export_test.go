package alidnn

// Pending is the number of runs of s waiting for a job slot.
func Pending(s *Session) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Butterfly is step s of the engine Softmax's row maximum over C lanes.
func Butterfly(C, s int) []float32 { return butterfly(C, s) }
