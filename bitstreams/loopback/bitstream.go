package loopback

import (
	"math/rand/v2"

	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/bitfile"
)

// Header is the .bit header of the loopback role's partial bitstream for part.
func Header(part shell.Part) bitfile.Header {
	return bitfile.Header{
		Design: Name + ";UserID=0XFFFFFFFF;Version=2024.1;PARTIAL=TRUE",
		Part:   part.Name,
		Date:   "2026/11/22",
		Time:   "00:00:00",
	}
}

// Bitstream returns a partial bitstream of the loopback role for part, with
// frameBytes bytes of configuration frames. The frames are a fixed
// pseudo-random sequence: the same arguments give the same file, and its size
// is that of a real role of that many frames.
func Bitstream(part shell.Part, frameBytes int) ([]byte, error) {
	frames := make([]byte, frameBytes)
	rng := rand.NewChaCha8([32]byte{'l', 'o', 'o', 'p', 'b', 'a', 'c', 'k'})
	rng.Read(frames)
	return bitfile.Build(Header(part), part, frames)
}
