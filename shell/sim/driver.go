package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fpga-faas/faas/shell"
)

// Node is a character device of the Xilinx XDMA driver for one chip, with the
// driver's semantics, so that code written for /dev/xdmaN_* can be run against
// the simulator unchanged:
//
//   - user, control: pread/pwrite move one 32-bit word at a 4-byte aligned
//     offset per call (EPROTO otherwise); ReadAt/WriteAt of longer buffers
//     loop word by word, as os.File does over short transfers.
//   - h2c_K (write-only), c2h_K (read-only): the offset is the card address;
//     there is no file position to advance.
//   - events_K: Read of exactly 4 bytes blocks until IRQ line K has fired,
//     returns the value 1 and clears the flag, ignoring deadlines as the
//     driver does; WaitReadable is its poll, which a caller can abandon.
//
// Errors are *fs.PathError wrapping the driver's errno (or os.ErrClosed,
// os.ErrDeadlineExceeded), exactly as os.File reports them.
type Node struct {
	chip *Chip
	path string
	kind string // user, control, h2c, c2h, events
	num  int

	closed chan struct{}
	once   sync.Once
}

// Node opens the chip's device node called name, the part of the /dev name
// after "xdmaN_": "user", "control", "h2c_0", "c2h_1", "events_3".
func (c *Chip) Node(name string) (*Node, error) {
	path := fmt.Sprintf("sim:%s/chip%d/xdma_%s", c.board.cfg.Serial, c.index, name)
	kind, num := name, 0
	numbered := false
	if i := strings.LastIndexByte(name, '_'); i >= 0 {
		n, err := strconv.Atoi(name[i+1:])
		// The driver's nodes carry canonical decimal numbers: no sign, no
		// leading zero ("events_01" does not exist).
		if err != nil || strconv.Itoa(n) != name[i+1:] {
			return nil, &fs.PathError{Op: "open", Path: path, Err: syscall.ENOENT}
		}
		kind, num, numbered = name[:i], n, true
	}
	valid := false
	switch kind {
	case "user", "control":
		valid = !numbered
	case "h2c", "c2h":
		valid = numbered && num >= 0 && num < shell.DMAChannels
	case "events":
		valid = numbered && num >= 0 && num < len(c.irq)
	}
	if !valid {
		return nil, &fs.PathError{Op: "open", Path: path, Err: syscall.ENOENT}
	}
	return &Node{chip: c, path: path, kind: kind, num: num, closed: make(chan struct{})}, nil
}

func (n *Node) err(op string, err error) error {
	var se *Error
	if errors.As(err, &se) {
		err = se.Errno
	}
	return &fs.PathError{Op: op, Path: n.path, Err: err}
}

func (n *Node) isClosed() bool {
	select {
	case <-n.closed:
		return true
	default:
		return false
	}
}

// ReadAt implements pread.
func (n *Node) ReadAt(p []byte, off int64) (int, error) {
	if n.isClosed() {
		return 0, n.err("read", os.ErrClosed)
	}
	if off < 0 {
		return 0, n.err("read", syscall.EINVAL)
	}
	switch n.kind {
	case "user", "control":
		return n.words(p, off, func(o uint64, b []byte) error {
			var v uint32
			var err error
			if n.kind == "user" {
				v, err = n.chip.ReadUser(o)
			} else {
				v, err = n.chip.ReadControl(o)
			}
			binary.LittleEndian.PutUint32(b, v)
			return err
		}, "read")
	case "c2h":
		if err := n.chip.C2H(context.Background(), n.num, p, uint64(off)); err != nil {
			return 0, n.err("read", err)
		}
		return len(p), nil
	}
	return 0, n.err("read", syscall.EINVAL)
}

// WriteAt implements pwrite.
func (n *Node) WriteAt(p []byte, off int64) (int, error) {
	if n.isClosed() {
		return 0, n.err("write", os.ErrClosed)
	}
	if off < 0 {
		return 0, n.err("write", syscall.EINVAL)
	}
	switch n.kind {
	case "user", "control":
		return n.words(p, off, func(o uint64, b []byte) error {
			v := binary.LittleEndian.Uint32(b)
			if n.kind == "user" {
				return n.chip.WriteUser(o, v)
			}
			return n.chip.WriteControl(o, v)
		}, "write")
	case "h2c":
		if err := n.chip.H2C(context.Background(), n.num, p, uint64(off)); err != nil {
			return 0, n.err("write", err)
		}
		return len(p), nil
	}
	return 0, n.err("write", syscall.EINVAL)
}

// words runs one 4-byte register access per word of p. The driver copies a
// whole word even for shorter buffers; a short buffer is refused here instead
// of touching memory past it.
func (n *Node) words(p []byte, off int64, access func(uint64, []byte) error, op string) (int, error) {
	if len(p) < 4 {
		return 0, n.err(op, syscall.EINVAL)
	}
	done := 0
	for ; done+4 <= len(p); done += 4 {
		if err := access(uint64(off)+uint64(done), p[done:done+4]); err != nil {
			return done, n.err(op, err)
		}
	}
	if done < len(p) {
		return done, n.err(op, syscall.EINVAL)
	}
	return done, nil
}

// Read implements read(2) on an events node. Like the driver's, it blocks
// until the line fires and ignores O_NONBLOCK and deadlines: only
// WaitReadable, the driver's poll, can be abandoned. (Close wakes it, which
// the driver's read would not; that only matters to a caller that already
// misuses the node.)
func (n *Node) Read(p []byte) (int, error) {
	if n.kind != "events" {
		return 0, n.err("read", syscall.EINVAL)
	}
	if len(p) != 4 {
		return 0, n.err("read", syscall.EPROTO)
	}
	if n.isClosed() {
		return 0, n.err("read", os.ErrClosed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	switch err := n.chip.waitIRQ(ctx, n.num, time.Time{}); {
	case err == nil:
		binary.LittleEndian.PutUint32(p, 1)
		return 4, nil
	case n.isClosed():
		return 0, n.err("read", os.ErrClosed)
	default:
		return 0, n.err("read", syscall.ENODEV)
	}
}

// WaitReadable blocks until a Read of the events node would return at once,
// like poll(2) on the driver's node (which, unlike its read, can be
// abandoned), or until ctx is done or the node is closed.
func (n *Node) WaitReadable(ctx context.Context) error {
	if n.kind != "events" {
		return n.err("poll", syscall.EINVAL)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-n.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	switch err := n.chip.irq[n.num].ready(ctx, n.chip.board.closed); {
	case err == nil:
		return nil
	case n.isClosed():
		return n.err("poll", os.ErrClosed)
	case errors.Is(err, errClosed):
		return n.err("poll", syscall.ENODEV)
	default:
		return err
	}
}

// Write on a device node other than user/control/h2c is refused, as by the
// driver.
func (n *Node) Write(p []byte) (int, error) { return 0, n.err("write", syscall.EINVAL) }

// Close releases the node and fails blocked reads with os.ErrClosed.
func (n *Node) Close() error {
	n.once.Do(func() { close(n.closed) })
	return nil
}

// Name returns the node's path.
func (n *Node) Name() string { return n.path }
