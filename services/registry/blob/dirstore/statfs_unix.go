//go:build unix

package dirstore

import "golang.org/x/sys/unix"

// freeSpace returns the bytes available to unprivileged writers on the file
// system of dir and its free inodes; a file system that does not count
// inodes reports -1 of them.
func freeSpace(dir string) (avail uint64, inodes int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	inodes = -1
	if st.Files > 0 {
		inodes = int64(st.Ffree)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), inodes, nil
}
