// Package atomicfile replaces files so that a reader, or the file system
// after a crash, sees the old content or the new, never a mix or a part.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// Write replaces path with data, with mode perm: it writes a temporary file
// in the same directory (created 0600, so a secret is never readable by
// others on the way), syncs it, renames it over path and syncs the
// directory. On error path is unchanged and the temporary file is gone.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteWith(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteWith is Write of what write writes, for content streamed rather
// than held in memory.
func WriteWith(path string, perm os.FileMode, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after a successful rename it is gone already
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
