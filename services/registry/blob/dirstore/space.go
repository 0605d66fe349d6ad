package dirstore

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/fpga-faas/faas/services/registry/blob"
)

// MinFreeBytes is the free space below which CheckSpace reports the store
// full: less than this is no room for a layer, and the last writes that
// fit would leave the file system without space for anything else.
const MinFreeBytes = 1 << 20

var _ blob.SpaceChecker = (*Store)(nil)

// isFull reports whether err is the file system's refusal for want of space.
func isFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// full wraps err with blob.ErrStorageFull when it is a refusal for want of
// space.
func full(err error) error {
	if isFull(err) {
		return fmt.Errorf("%w: %w", blob.ErrStorageFull, err)
	}
	return err
}

// CheckSpace implements blob.SpaceChecker: the store is full when its file
// system has less than MinFreeBytes available to unprivileged writers, or
// no free inode.
func (s *Store) CheckSpace(ctx context.Context) error {
	avail, inodes, err := freeSpace(s.root)
	if err != nil {
		return fmt.Errorf("dirstore: free space of %s: %w", s.root, err)
	}
	if avail < MinFreeBytes || inodes == 0 {
		return fmt.Errorf("dirstore: %w: %d bytes and %d inodes free on %s", blob.ErrStorageFull, avail, inodes, s.root)
	}
	return nil
}
