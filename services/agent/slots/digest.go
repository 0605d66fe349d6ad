package slots

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// DigestBytes returns the 32 bytes the shell's digest register holds for a
// manifest digest "sha256:<hex>".
func DigestBytes(d string) ([32]byte, error) {
	var out [32]byte
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return out, fmt.Errorf("slots: digest %q: want sha256:<64 hex>", d)
	}
	if _, err := hex.Decode(out[:], []byte(h)); err != nil {
		return out, fmt.Errorf("slots: digest %q: %v", d, err)
	}
	return out, nil
}
