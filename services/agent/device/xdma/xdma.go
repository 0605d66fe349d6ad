// Package xdma is the device backend for real boards: it drives a chip
// through the character devices of the Xilinx XDMA driver (dma_ip_drivers,
// xdma/cdev_*.c) exactly as the driver expects:
//
//   - /dev/xdmaN_user and _control: one 4-byte pread/pwrite per register at a
//     4-byte aligned offset (the driver answers EPROTO otherwise);
//   - /dev/xdmaN_h2c_K and _c2h_K: pwrite/pread whose offset is the card
//     address (the driver does not advance a file position);
//   - /dev/xdmaN_events_K: a blocking 4-byte read that returns once user
//     interrupt K has fired and clears the event; interrupts coalesce.
//
// Files are opened through an Opener so that tests can stand regular files,
// FIFOs or the simulator's driver personality in for device nodes.
package xdma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fpga-faas/faas/services/agent/device"
	"github.com/fpga-faas/faas/shell"
)

// File is what the backend needs of an open device node; *os.File has it.
//
// An events node must also let the backend wait for its event without
// consuming it: *os.File does through syscall.Conn (Go's poller and
// poll(2)), other implementations through ReadyWaiter.
type File interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Read(p []byte) (int, error)
	Close() error
}

// ReadyWaiter is an events node that can block until a read would return at
// once, like poll(2) on the driver's node, honouring ctx.
type ReadyWaiter interface {
	WaitReadable(ctx context.Context) error
}

// Opener opens the device node at path.
type Opener func(path string, write bool) (File, error)

// OS opens real files.
func OS(path string, write bool) (File, error) {
	flag := os.O_RDONLY
	if write {
		flag = os.O_RDWR
	}
	return os.OpenFile(path, flag, 0)
}

// Nodes are the device node paths of one chip. H2C, C2H and Events are
// indexed by channel and IRQ line; missing lines may be empty.
type Nodes struct {
	User, Control string
	H2C, C2H      []string
	Events        []string
}

// OpenChip opens one chip's nodes. Event nodes are opened when first waited
// on, so a chip whose agent never waits holds no event file.
func OpenChip(open Opener, n Nodes) (device.Port, error) {
	if open == nil {
		open = OS
	}
	p := &port{open: open, nodes: n, events: make([]File, len(n.Events))}
	// Only files that opened are stored: an Opener may return a typed nil
	// with its error, which must not be closed.
	openOne := func(path string, write bool) (File, error) {
		f, err := open(path, write)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("xdma: %w", device.FromErrno(err))
		}
		return f, nil
	}
	var err error
	if p.user, err = openOne(n.User, true); err != nil {
		return nil, err
	}
	if p.control, err = openOne(n.Control, false); err != nil {
		return nil, err
	}
	for _, path := range n.H2C {
		f, err := openOne(path, true)
		if err != nil {
			return nil, err
		}
		p.h2c = append(p.h2c, f)
	}
	for _, path := range n.C2H {
		f, err := openOne(path, false)
		if err != nil {
			return nil, err
		}
		p.c2h = append(p.c2h, f)
	}
	return p, nil
}

// OpenBoard opens the two chips of a board.
func OpenBoard(id string, model shell.BoardModel, open Opener, chips []Nodes) (*device.Board, error) {
	ports := make([]device.Port, 0, len(chips))
	for _, n := range chips {
		p, err := OpenChip(open, n)
		if err != nil {
			for _, q := range ports {
				q.Close()
			}
			return nil, err
		}
		ports = append(ports, p)
	}
	return device.OpenBoard(id, model, ports)
}

type port struct {
	open          Opener
	nodes         Nodes
	user, control File
	h2c, c2h      []File

	mu     sync.Mutex // guards events
	events []File
	// waiting serialises waits per line: the event flag has one reader.
	waiting sync.Map // line -> *sync.Mutex
}

func (p *port) ReadUser(off uint32) (uint32, error)    { return read32(p.user, off) }
func (p *port) WriteUser(off uint32, v uint32) error   { return write32(p.user, off, v) }
func (p *port) ReadControl(off uint32) (uint32, error) { return read32(p.control, off) }

func read32(f File, off uint32) (uint32, error) {
	var b [4]byte
	if _, err := f.ReadAt(b[:], int64(off)); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

func write32(f File, off uint32, v uint32) error {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	_, err := f.WriteAt(b[:], int64(off))
	return err
}

// H2C and C2H issue one pwrite/pread: the driver pins the whole buffer,
// splits it into descriptor chunks and waits for each until the engine is done
// or h2c_timeout/c2h_timeout (10 s by default) passes. A context cannot stop
// a transfer in flight, so it is checked before starting. The driver answers
// a signal during the wait by aborting the transfer with ETIMEDOUT or a short
// count, which os.File's pread/pwrite loop completes.
func (p *port) H2C(ctx context.Context, ch int, b []byte, addr uint64) error {
	if ch < 0 || ch >= len(p.h2c) {
		return fmt.Errorf("xdma: no h2c channel %d: %w", ch, device.ErrOutOfRange)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := p.h2c[ch].WriteAt(b, int64(addr))
	return err
}

func (p *port) C2H(ctx context.Context, ch int, b []byte, addr uint64) error {
	if ch < 0 || ch >= len(p.c2h) {
		return fmt.Errorf("xdma: no c2h channel %d: %w", ch, device.ErrOutOfRange)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := p.c2h[ch].ReadAt(b, int64(addr))
	return err
}

func (p *port) eventFile(line int) (File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if line < 0 || line >= len(p.nodes.Events) || p.nodes.Events[line] == "" {
		return nil, fmt.Errorf("xdma: no event node for IRQ line %d: %w", line, device.ErrOutOfRange)
	}
	if p.events[line] == nil {
		f, err := p.open(p.nodes.Events[line], false)
		if err != nil {
			return nil, err
		}
		p.events[line] = f
	}
	return p.events[line], nil
}

// WaitIRQ waits for the line's event and consumes it.
//
// The driver's read of an events node ignores O_NONBLOCK and sleeps in the
// kernel until the interrupt, where neither a read deadline nor Close reaches
// it. Its poll does work, so the backend waits for readability first (in Go's
// poller for real files, which honours ctx through the read deadline) and
// reads only once the event flag is set.
func (p *port) WaitIRQ(ctx context.Context, line int) error {
	f, err := p.eventFile(line)
	if err != nil {
		return err
	}
	mu, _ := p.waiting.LoadOrStore(line, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	for {
		var v uint32
		switch w := f.(type) {
		case syscall.Conn:
			v, err = readPolled(ctx, w)
		case ReadyWaiter:
			if err = w.WaitReadable(ctx); err == nil {
				v, err = readEvent(f)
			}
		default:
			return fmt.Errorf("xdma: events node %s (%T) cannot be polled", p.nodes.Events[line], f)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		// Every open of the node shares one flag: when another reader took
		// the event first, the driver returns 0. Wait again.
		if v != 0 {
			return nil
		}
	}
}

func readEvent(f File) (uint32, error) {
	var b [4]byte
	if _, err := f.Read(b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

// readPolled reads one event from a pollable file descriptor without ever
// blocking in read(2).
func readPolled(ctx context.Context, f syscall.Conn) (uint32, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	if d, ok := f.(interface{ SetReadDeadline(time.Time) error }); ok {
		deadline, _ := ctx.Deadline()
		if err := d.SetReadDeadline(deadline); err != nil {
			return 0, err
		}
		stop := context.AfterFunc(ctx, func() { d.SetReadDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	var (
		b    [4]byte
		n    int
		rerr error
	)
	err = rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if k, perr := unix.Poll(pfd, 0); perr != nil || k == 0 {
			return false // not ready: let the poller wait
		}
		n, rerr = syscall.Read(int(fd), b[:])
		return rerr != syscall.EAGAIN
	})
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, rerr
	case n != 4:
		return 0, fmt.Errorf("xdma: event read returned %d bytes, want 4", n)
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

func (p *port) Close() error {
	var errs []error
	closeAll := func(fs ...File) {
		for _, f := range fs {
			if f != nil {
				errs = append(errs, f.Close())
			}
		}
	}
	closeAll(p.user, p.control)
	closeAll(p.h2c...)
	closeAll(p.c2h...)
	p.mu.Lock()
	closeAll(p.events...)
	p.mu.Unlock()
	return errors.Join(errs...)
}
