package session

import (
	"fmt"
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// maxQueuedFDs bounds the descriptors a FDConn keeps unclaimed: a peer
// sending more is broken.
const maxQueuedFDs = 64

// FDConn reads a unix stream connection and keeps the descriptors that
// arrive with the bytes (SCM_RIGHTS), in order, for frames with FlagFD to
// claim. The kernel delivers a descriptor with the first byte of the send
// that carried it, so by the time a frame is read whole its descriptor is
// queued.
type FDConn struct {
	*net.UnixConn
	oob []byte

	mu  sync.Mutex
	fds []int
	err error
}

// NewFDConn wraps c.
func NewFDConn(c *net.UnixConn) *FDConn {
	return &FDConn{UnixConn: c, oob: make([]byte, unix.CmsgSpace(4*4))}
}

// Read reads bytes and queues any descriptors that come with them.
func (c *FDConn) Read(p []byte) (int, error) {
	n, oobn, _, _, err := c.ReadMsgUnix(p, c.oob)
	if n < 0 {
		n = 0
	}
	if oobn > 0 {
		c.take(c.oob[:oobn])
	}
	return n, err
}

func (c *FDConn) take(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.err = fmt.Errorf("session: control message: %w", err)
		return
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if len(c.fds) >= maxQueuedFDs {
				unix.Close(fd)
				c.err = fmt.Errorf("session: more than %d descriptors unclaimed", maxQueuedFDs)
				continue
			}
			c.fds = append(c.fds, fd)
		}
	}
}

// TakeFD returns the oldest queued descriptor.
func (c *FDConn) TakeFD() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return -1, c.err
	}
	if len(c.fds) == 0 {
		return -1, fmt.Errorf("%w: a frame announced a descriptor that did not arrive", ErrFrame)
	}
	fd := c.fds[0]
	c.fds = c.fds[1:]
	return fd, nil
}

// CloseFDs closes the descriptors nobody claimed.
func (c *FDConn) CloseFDs() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	c.fds = nil
}

// WriteFD writes b (whole frames) with descriptor fd attached to its first
// byte.
func WriteFD(c *net.UnixConn, b []byte, fd int) error {
	n, _, err := c.WriteMsgUnix(b, unix.UnixRights(fd), nil)
	if err != nil {
		return err
	}
	if n < len(b) {
		_, err = c.Write(b[n:])
	}
	return err
}
