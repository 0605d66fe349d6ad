package cache

import (
	"fmt"
	"strings"
)

const (
	algPrefix = "sha256:"
	hexLen    = 64
)

// parseDigest returns the hex part of d, or an error wrapping
// ErrInvalidDigest. It is strict on purpose: the hex part becomes a file name,
// so only exactly 64 lowercase hex digits pass; no other algorithm, case,
// length or character (in particular no '/', '.' or NUL) can reach the
// filesystem.
func parseDigest(d string) (string, error) {
	hex, ok := strings.CutPrefix(d, algPrefix)
	if !ok || !validHex(hex) {
		return "", fmt.Errorf("cache: %w: %q", ErrInvalidDigest, d)
	}
	return hex, nil
}

// validHex reports whether s is 64 lowercase hex digits.
func validHex(s string) bool {
	if len(s) != hexLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
