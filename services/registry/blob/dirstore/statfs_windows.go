package dirstore

import "golang.org/x/sys/windows"

// freeSpace returns the bytes available to the caller on the volume of dir;
// Windows does not count inodes (-1).
func freeSpace(dir string) (avail uint64, inodes int64, err error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, 0, err
	}
	var total, totalFree uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &totalFree); err != nil {
		return 0, 0, err
	}
	return avail, -1, nil
}
