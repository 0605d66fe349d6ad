package s3store

// IdleDirectConns is the number of idle connections of s's direct GETs, or
// -1 when s makes none.
func IdleDirectConns(s *Store) int {
	if s.direct == nil {
		return -1
	}
	s.direct.mu.Lock()
	defer s.direct.mu.Unlock()
	return len(s.direct.idle)
}
