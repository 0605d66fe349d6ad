package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// Chromium returns the path of a headless-capable Chromium: $FAAS_CHROMIUM,
// else chromium or chromium-browser on PATH (Debian's package `chromium`,
// which `make tools` installs when root). A missing browser skips the test,
// or fails it under CI=true.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("FAAS_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			missing(t, "FAAS_CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	missing(t, "no chromium on PATH (apt-get install chromium, or set FAAS_CHROMIUM)")
	return ""
}
