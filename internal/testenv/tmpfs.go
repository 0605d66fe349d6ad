package testenv

import (
	"strconv"
	"syscall"
	"testing"
)

// Tmpfs mounts a tmpfs file system of size bytes on a fresh temporary
// directory and returns the directory; t.Cleanup unmounts it. Tests use it
// to fill a file system for real (ENOSPC). Mounting needs root (or
// CAP_SYS_ADMIN); without it the test is skipped, or fails when CI=true.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size="+strconv.FormatInt(size, 10)); err != nil {
		missing(t, "cannot mount a tmpfs on %s (needs root or CAP_SYS_ADMIN): %v", dir, err)
	}
	// Registered after TempDir's cleanup, so it runs before the removal.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("testenv: unmount %s: %v", dir, err)
		}
	})
	return dir
}
