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
	"time"

	"github.com/fpga-faas/faas/services/agent/device"
	"github.com/fpga-faas/faas/shell"
)

// File is what the backend needs of an open device node; *os.File has it.
type File interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Read(p []byte) (int, error)
	SetReadDeadline(t time.Time) error
	Close() error
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
	var err error
	if p.user, err = open(n.User, true); err != nil {
		return nil, fmt.Errorf("xdma: %w", device.FromErrno(err))
	}
	if p.control, err = open(n.Control, false); err != nil {
		p.Close()
		return nil, fmt.Errorf("xdma: %w", device.FromErrno(err))
	}
	for _, path := range n.H2C {
		f, err := open(path, true)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("xdma: %w", device.FromErrno(err))
		}
		p.h2c = append(p.h2c, f)
	}
	for _, path := range n.C2H {
		f, err := open(path, false)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("xdma: %w", device.FromErrno(err))
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

// H2C and C2H issue one pwrite/pread: the driver builds a scatter-gather
// list of the whole buffer and blocks until the engine is done or its timeout
// passes. A context cannot interrupt a transfer in flight (neither can a
// signal on the real driver); it is checked before starting.
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

// WaitIRQ reads the line's event node. The read blocks in the driver; the
// context is honoured through the file's read deadline, which the runtime
// poller applies to pollable device nodes and FIFOs alike.
func (p *port) WaitIRQ(ctx context.Context, line int) error {
	f, err := p.eventFile(line)
	if err != nil {
		return err
	}
	mu, _ := p.waiting.LoadOrStore(line, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()

	deadline, _ := ctx.Deadline()
	if err := f.SetReadDeadline(deadline); err != nil && !errors.Is(err, os.ErrNoDeadline) {
		return err
	}
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var b [4]byte
	_, err = f.Read(b[:])
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
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
