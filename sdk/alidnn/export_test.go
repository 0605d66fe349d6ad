package alidnn

import "github.com/fpga-faas/faas/sdk/onnx"

// Pending is the number of runs of s waiting for a job slot.
func Pending(s *Session) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Butterfly is step s of the engine Softmax's row maximum over C lanes.
func Butterfly(C, s int) []float32 { return butterfly(C, s) }

// StageStrings is the ids the runtime stages for the STRING tensor t, in a
// run's dictionary seeded with seed and holding at most max strings.
func StageStrings(max int, seed [][]byte, t *onnx.Tensor) ([]float32, error) {
	d := newDict(seed)
	d.max = max
	return d.stage(t)
}
